"""Tests for mslm_core.corpus: CoNLL/JSONL reading, writing, conversion and split loading."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import DATA, REQUIRE_DATA

from mslm_core.corpus import (
    MAX_ISSUES,
    Corpus,
    Mention,
    Sentence,
    convert,
    detect_format,
    load_splits,
    read_conll,
    read_corpus,
    read_jsonl,
    write_conll,
    write_corpus,
    write_jsonl,
)
from mslm_core.errors import CorpusError

NCBI = DATA / "NCBI-disease-IOB"
BC5CDR = DATA / "BC5CDR-IOB"
# where CI found the shared corpora (REQUIRE_DATA), a missing one fails the test that reads it
needs_data = pytest.mark.skipif(
    not NCBI.is_dir() and not REQUIRE_DATA, reason="shared corpora not available"
)


def _write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, str):
        content = content.encode("utf-8")
    path.write_bytes(content)
    return path


def _conll(tmp_path: Path, content: str | bytes, name: str = "c.tsv") -> Path:
    return _write(tmp_path, name, content)


def _jsonl(tmp_path: Path, *records: object, name: str = "c.jsonl") -> Path:
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    return _write(tmp_path, name, "\n".join(lines) + "\n")


def _tags_file(tags: str) -> str:
    return "".join(f"w{i}\t{tag}\n" for i, tag in enumerate(tags.split()))


def _only_issue(excinfo: pytest.ExceptionInfo[CorpusError]):
    assert len(excinfo.value.issues) == 1, excinfo.value.issues
    return excinfo.value.issues[0]


# --------------------------------------------------------------------------- Sentence, Corpus


def test_sentence_from_words_tags_and_char_mentions():
    s = Sentence.from_words(
        ["BRCA1", "breast", "cancer", "gene"], [Mention(1, 3, "Disease"), Mention(0, 1, "Gene")]
    )
    assert s.text == "BRCA1 breast cancer gene"
    assert s.words == ["BRCA1", "breast", "cancer", "gene"]
    assert s.mentions == [Mention(0, 1, "Gene"), Mention(1, 3, "Disease")]  # sorted
    assert s.tags() == ["B-Gene", "B-Disease", "I-Disease", "O"]
    assert s.char_mentions() == [(0, 5, "Gene"), (6, 19, "Disease")]
    assert [s.text[a:b] for a, b, _ in s.char_mentions()] == ["BRCA1", "breast cancer"]


@pytest.mark.parametrize(
    "mentions",
    [[Mention(0, 0, "X")], [Mention(1, 3, "X")], [Mention(0, 2, "X"), Mention(1, 2, "Y")]],
    ids=["empty", "outside", "overlap"],
)
def test_sentence_from_words_rejects_bad_mentions(mentions):
    with pytest.raises(ValueError):
        Sentence.from_words(["a", "b"], mentions)


def test_corpus_properties_and_stats():
    corpus = Corpus(
        [
            Sentence.from_words(["a", "b", "c"], [Mention(0, 1, "Y"), Mention(2, 3, "X")]),
            Sentence.from_words(["d"], [Mention(0, 1, "X")]),
        ],
        repairs=2,
    )
    assert len(corpus) == 2
    assert corpus.types == ["X", "Y"]
    assert corpus.n_mentions == 3
    assert list(corpus) == corpus.sentences
    assert corpus.stats() == {
        "sentences": 2,
        "words": 4,
        "mentions": 3,
        "mentions_per_type": {"X": 2, "Y": 1},
        "repairs": 2,
        "stripped": 0,
    }


# --------------------------------------------------------------------------- read_conll


def test_read_conll_basic(tmp_path):
    path = _conll(
        tmp_path,
        "-DOCSTART-\tO\n\nFamilial\tB-Disease\ncancer\tI-Disease\nrisk\tO\n\n\n"
        "Aspirin  B-Chemical\n.\tO",  # whitespace-separated line; no final newline
    )
    corpus = read_conll(path)
    assert corpus.path == str(path)
    assert [s.words for s in corpus] == [["Familial", "cancer", "risk"], ["Aspirin", "."]]
    assert corpus.sentences[0].text == "Familial cancer risk"
    assert corpus.sentences[0].mentions == [Mention(0, 2, "Disease")]
    assert corpus.sentences[1].mentions == [Mention(0, 1, "Chemical")]
    assert corpus.types == ["Chemical", "Disease"]
    assert corpus.repairs == 0


def test_read_conll_crlf_bom_and_docstart_as_boundary(tmp_path):
    raw = "\ufeffa\tB-X\r\nb\tI-X\r\n-DOCSTART- -X- O O\r\nc\tO\r\n\r\n".encode()
    corpus = read_conll(_conll(tmp_path, raw))
    assert [s.words for s in corpus] == [["a", "b"], ["c"]]
    assert corpus.sentences[0].mentions == [Mention(0, 2, "X")]


@pytest.mark.parametrize(
    ("tags", "repairs", "mentions"),
    [
        ("O I-X I-X", 1, [Mention(1, 3, "X")]),
        ("B-X I-Y", 1, [Mention(0, 1, "X"), Mention(1, 2, "Y")]),
        ("I-X", 1, [Mention(0, 1, "X")]),
        ("B-X I-X O", 0, [Mention(0, 2, "X")]),
        ("B-X B-X", 0, [Mention(0, 1, "X"), Mention(1, 2, "X")]),
        ("I-X O I-X I-Y", 3, [Mention(0, 1, "X"), Mention(2, 3, "X"), Mention(3, 4, "Y")]),
    ],
)
def test_read_conll_repairs(tmp_path, tags, repairs, mentions):
    corpus = read_conll(_conll(tmp_path, _tags_file(tags)))
    assert corpus.repairs == repairs
    assert corpus.sentences[0].mentions == mentions
    assert corpus.stats()["repairs"] == repairs


def test_read_conll_repair_at_each_sentence_start(tmp_path):
    corpus = read_conll(_conll(tmp_path, "a\tB-X\n\nb\tI-X\nc\tI-X\n"))
    assert corpus.repairs == 1
    assert corpus.sentences[1].mentions == [Mention(0, 2, "X")]


GOOD = "ok\tO\n\nfine\tB-X\n"  # two good lines and a blank: a bad line after it is line 4


@pytest.mark.parametrize(
    ("bad_line", "fragment"),
    [
        ("a\tO\textra", "expected 2 columns (token, tag), found 3"),
        ("a b c", "expected 2 columns (token, tag), found 3"),
        ("lonely", "expected 2 columns (token, tag), found 1"),
        ("a\tE-Disease", "'E-Disease' is a BIOES/BILOU tag"),
        ("a\tS-Disease", "'S-Disease' is a BIOES/BILOU tag"),
        ("a\tL-Disease", "BIOES/BILOU"),
        ("a\tU-Disease", "BIOES/BILOU"),
        ("a\tB-", "invalid tag 'B-'"),
        ("a\tI-", "invalid tag 'I-'"),
        ("a\tX", "invalid tag 'X'"),
        ("a\to", "invalid tag 'o'"),
        ("a\tB-Some Type", "invalid tag 'B-Some Type'"),
        ("\tO", "token '' is empty"),
        ("a b\tO", "contains whitespace"),
    ],
)
def test_read_conll_errors(tmp_path, bad_line, fragment):
    path = _conll(tmp_path, GOOD + bad_line + "\nlast\tO\n")
    with pytest.raises(CorpusError) as excinfo:
        read_conll(path)
    issue = _only_issue(excinfo)
    assert issue.line == 4
    assert issue.path == str(path)
    assert fragment in issue.message
    if "invalid tag" in fragment or "BIOES" in fragment:
        assert "only IOB2 tags (O, B-TYPE, I-TYPE) are supported" in issue.message
        assert issue.field == "tag"
    assert fragment in str(excinfo.value)
    assert str(excinfo.value).startswith("[E001]")


def test_read_conll_invalid_utf8_names_the_line(tmp_path):
    path = _conll(tmp_path, b"a\tO\nb\xff\xfe\tO\nc\tO\n")
    with pytest.raises(CorpusError) as excinfo:
        read_conll(path)
    issue = _only_issue(excinfo)
    assert (issue.line, issue.path) == (2, str(path))
    assert "invalid UTF-8" in issue.message


@pytest.mark.parametrize("content", ["", "\n\n  \n", "-DOCSTART- -X- O O\n\n"])
def test_read_conll_empty_corpus(tmp_path, content):
    with pytest.raises(CorpusError) as excinfo:
        read_conll(_conll(tmp_path, content))
    issue = _only_issue(excinfo)
    assert issue.line is None
    assert "empty corpus" in issue.message


def test_read_conll_collects_several_issues(tmp_path):
    path = _conll(tmp_path, "a\tO\nb\tE-X\nc\nd\tO\ne\tS-X\n")
    with pytest.raises(CorpusError) as excinfo:
        read_conll(path)
    issues = excinfo.value.issues
    assert [i.line for i in issues] == [2, 3, 5]
    assert all(i.path == str(path) for i in issues)
    assert "(and 2 more)" in str(excinfo.value)


def test_read_conll_stops_after_max_issues(tmp_path):
    path = _conll(tmp_path, "bad\n" * (MAX_ISSUES + 30))
    with pytest.raises(CorpusError) as excinfo:
        read_conll(path)
    assert MAX_ISSUES == 20
    assert [i.line for i in excinfo.value.issues] == list(range(1, MAX_ISSUES + 1))


def test_read_conll_missing_file(tmp_path):
    with pytest.raises(CorpusError, match="file not found") as excinfo:
        read_conll(tmp_path / "nope.tsv")
    assert _only_issue(excinfo).line is None


# --------------------------------------------------------------------------- read_jsonl


def test_read_jsonl_basic(tmp_path):
    text = "Tamoxifen reduces breast cancer risk."
    path = _jsonl(
        tmp_path,
        {
            "text": text,
            "entities": [
                {"start": 18, "end": 31, "label": "Disease"},
                {"start": 0, "end": 9, "label": "Chemical"},
            ],
            "id": "extra keys are ignored",
        },
        "",
        {"text": "   ", "entities": []},  # no words, no entities: skipped
        {"text": "No entity here", "entities": []},
    )
    corpus = read_jsonl(path)
    assert len(corpus) == 2
    s = corpus.sentences[0]
    assert s.text == text
    assert s.words == ["Tamoxifen", "reduces", "breast", "cancer", "risk", "."]
    assert s.mentions == [Mention(0, 1, "Chemical"), Mention(2, 4, "Disease")]
    assert s.char_mentions() == [(0, 9, "Chemical"), (18, 31, "Disease")]
    assert corpus.sentences[1].mentions == []
    assert (corpus.stripped, corpus.repairs) == (0, 0)


def test_read_jsonl_entity_boundary_inside_word_splits_it(tmp_path):
    # "HER2" is annotated inside "antiHER2therapy": the word is cut at both boundaries.
    path = _jsonl(
        tmp_path,
        {"text": "antiHER2therapy works", "entities": [{"start": 4, "end": 8, "label": "Gene"}]},
    )
    s = read_jsonl(path).sentences[0]
    assert s.words == ["anti", "HER2", "therapy", "works"]
    assert s.mentions == [Mention(1, 2, "Gene")]
    assert s.char_mentions() == [(4, 8, "Gene")]


def test_read_jsonl_strips_entity_whitespace(tmp_path):
    text = "the  breast cancer  gene"
    path = _jsonl(
        tmp_path,
        {"text": text, "entities": [{"start": 3, "end": 20, "label": "Disease"}]},
        {"text": "x y", "entities": [{"start": 0, "end": 1, "label": "A"}]},
    )
    corpus = read_jsonl(path)
    assert corpus.stripped == 1
    assert corpus.stats()["stripped"] == 1
    assert corpus.sentences[0].char_mentions() == [(5, 18, "Disease")]
    assert corpus.sentences[0].mentions == [Mention(1, 3, "Disease")]


def _ent(start: object = 0, end: object = 3, label: object = "X") -> dict[str, object]:
    return {"start": start, "end": end, "label": label}


@pytest.mark.parametrize(
    ("line", "fragment", "field"),
    [
        ("{not json", "invalid JSON", None),
        ("[1, 2]", "expected a JSON object, found list", None),
        ('"text"', "expected a JSON object, found str", None),
        ({"entities": []}, "missing 'text'", "text"),
        ({"text": 3, "entities": []}, "'text' must be a string, found int", "text"),
        ({"text": None, "entities": []}, "found null", "text"),
        ({"text": "abc def"}, "missing 'entities'", "entities"),
        ({"text": "abc def", "entities": {}}, "'entities' must be a list", "entities"),
        ({"text": "abc def", "entities": ["x"]}, "entity must be an object", "entities[0]"),
        (
            {"text": "abc def", "entities": [{"end": 3, "label": "X"}]},
            "missing 'start'",
            "entities[0].start",
        ),
        (
            {"text": "abc def", "entities": [{"start": 0, "label": "X"}]},
            "missing 'end'",
            "entities[0].end",
        ),
        (
            {"text": "abc def", "entities": [_ent(start="0")]},
            "must be an integer, found str",
            "entities[0].start",
        ),
        (
            {"text": "abc def", "entities": [_ent(start=True)]},
            "must be an integer, found bool",
            "entities[0].start",
        ),
        (
            {"text": "abc def", "entities": [_ent(end=3.0)]},
            "must be an integer, found float",
            "entities[0].end",
        ),
        ({"text": "abc def", "entities": [_ent(end=False)]}, "found bool", "entities[0].end"),
        (
            {"text": "abc def", "entities": [_ent(2, 2)]},
            "start 2 is not before end 2",
            "entities[0].end",
        ),
        ({"text": "abc def", "entities": [_ent(3, 1)]}, "is not before end", "entities[0].end"),
        (
            {"text": "abc def", "entities": [_ent(-1, 3)]},
            "start -1 is outside the text [0, 7]",
            "entities[0].start",
        ),
        (
            {"text": "abc def", "entities": [_ent(4, 8)]},
            "end 8 is outside the text [0, 7]",
            "entities[0].end",
        ),
        (
            {"text": "abc def", "entities": [{"start": 0, "end": 3}]},
            "missing 'label'",
            "entities[0].label",
        ),
        (
            {"text": "abc def", "entities": [_ent(label="")]},
            "'label' is empty",
            "entities[0].label",
        ),
        (
            {"text": "abc def", "entities": [_ent(label="  ")]},
            "'label' is empty",
            "entities[0].label",
        ),
        (
            {"text": "abc def", "entities": [_ent(label=7)]},
            "'label' must be a string",
            "entities[0].label",
        ),
        (
            {"text": "abc def", "entities": [_ent(label="A B")]},
            "contains whitespace",
            "entities[0].label",
        ),
        (
            {"text": "abc   def", "entities": [_ent(3, 6)]},
            "entity [3, 6) is only whitespace",
            "entities[0]",
        ),
        ({"text": "   ", "entities": [_ent(0, 2)]}, "only whitespace", "entities[0]"),
        (
            {"text": "abc def", "entities": [_ent(0, 5), _ent(4, 7)]},
            "entity [4, 7) overlaps entities[0]",
            "entities[1]",
        ),
        (
            {"text": "abc def", "entities": [_ent(4, 7), _ent(0, 3), _ent(4, 7)]},
            "overlaps entities[0]",
            "entities[2]",
        ),
        (
            {"text": "abc def", "entities": [_ent(0, 7), _ent(0, 1, "Y")]},
            "overlaps entities[0]",
            "entities[1]",
        ),
        (
            {"text": "abc def ghi", "entities": [_ent(0, 3), _ent(4, 7), _ent(8, 12)]},
            "end 12 is outside",
            "entities[2].end",
        ),
    ],
)
def test_read_jsonl_errors(tmp_path, line, fragment, field):
    good = {"text": "fine", "entities": []}
    path = _jsonl(tmp_path, good, "", line, good)  # the bad record is line 3
    with pytest.raises(CorpusError) as excinfo:
        read_jsonl(path)
    issue = _only_issue(excinfo)
    assert (issue.line, issue.path) == (3, str(path))
    assert fragment in issue.message
    assert issue.field == field


def test_read_jsonl_nested_overlap_with_earlier_long_entity(tmp_path):
    # [0, 11) contains both later entities; each overlap is reported against it.
    record = {"text": "abc def ghi", "entities": [_ent(0, 11), _ent(0, 3), _ent(8, 11)]}
    with pytest.raises(CorpusError) as excinfo:
        read_jsonl(_jsonl(tmp_path, record))
    assert [(i.line, i.field) for i in excinfo.value.issues] == [
        (1, "entities[1]"),
        (1, "entities[2]"),
    ]


def test_read_jsonl_invalid_utf8_names_the_line(tmp_path):
    good = json.dumps({"text": "fine", "entities": []}).encode()
    path = _write(tmp_path, "c.jsonl", good + b"\n" + b'{"text": "caf\xe9", "entities": []}\n')
    with pytest.raises(CorpusError) as excinfo:
        read_jsonl(path)
    issue = _only_issue(excinfo)
    assert issue.line == 2
    assert "invalid UTF-8" in issue.message


@pytest.mark.parametrize("content", ["", "\n  \n", '{"text": "", "entities": []}\n'])
def test_read_jsonl_empty_corpus(tmp_path, content):
    with pytest.raises(CorpusError) as excinfo:
        read_jsonl(_write(tmp_path, "c.jsonl", content))
    issue = _only_issue(excinfo)
    assert issue.line is None
    assert "empty corpus" in issue.message


def test_read_jsonl_collects_issues_on_several_lines(tmp_path):
    path = _jsonl(tmp_path, "{", {"text": "ok", "entities": []}, "[]", {"text": 1, "entities": 2})
    with pytest.raises(CorpusError) as excinfo:
        read_jsonl(path)
    assert [(i.line, i.field) for i in excinfo.value.issues] == [
        (1, None),
        (3, None),
        (4, "text"),
        (4, "entities"),
    ]


# --------------------------------------------------------------------------- writers


def _sample_corpus() -> Corpus:
    return Corpus(
        [
            Sentence.from_words(["Café", "au", "lait", "spots"], [Mention(0, 4, "Disease")]),
            Sentence.from_words(["No", "entity"], []),
            Sentence.from_words(
                ["Aspirin", "and", "naproxen"],
                [Mention(0, 1, "Chemical"), Mention(2, 3, "Chemical")],
            ),
        ]
    )


def test_write_conll_and_read_back(tmp_path):
    path = tmp_path / "out" / "c.conll"  # parent directory is created
    write_conll(_sample_corpus(), path)
    text = path.read_text(encoding="utf-8")
    assert text.startswith("Café\tB-Disease\nau\tI-Disease\nlait\tI-Disease\nspots\tI-Disease\n\n")
    assert text.endswith("naproxen\tB-Chemical\n\n")
    back = read_conll(path)
    assert [s.words for s in back] == [s.words for s in _sample_corpus()]
    assert [s.mentions for s in back] == [s.mentions for s in _sample_corpus()]


def test_write_jsonl_keeps_non_ascii_and_reads_back(tmp_path):
    path = tmp_path / "c.jsonl"
    write_jsonl(_sample_corpus(), path)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0]) == {
        "text": "Café au lait spots",
        "entities": [{"start": 0, "end": 18, "label": "Disease"}],
    }
    assert "Café" in lines[0]  # ensure_ascii=False
    back = read_jsonl(path)
    assert [(s.text, s.word_spans, s.mentions) for s in back] == [
        (s.text, s.word_spans, s.mentions) for s in _sample_corpus()
    ]


@pytest.mark.parametrize("word", ["two words", "", "tab\there", "-DOCSTART-"])
def test_write_conll_refuses_unwritable_words(tmp_path, word):
    corpus = _sample_corpus()
    corpus.sentences.append(Sentence.from_words(["fine", word], []))
    path = tmp_path / "c.tsv"
    with pytest.raises(CorpusError, match="sentence 3") as excinfo:
        write_conll(corpus, path)
    assert _only_issue(excinfo).field == "sentences[3].words[1]"
    assert list(tmp_path.iterdir()) == []  # nothing written, no temporary file left


def test_write_conll_refuses_label_with_whitespace(tmp_path):
    corpus = Corpus([Sentence.from_words(["a"], [Mention(0, 1, "Some Type")])])
    with pytest.raises(CorpusError, match="sentence 0"):
        write_conll(corpus, tmp_path / "c.tsv")


def test_write_is_atomic(tmp_path):
    path = tmp_path / "c.tsv"
    path.write_text("old\tO\n", encoding="utf-8")
    write_conll(_sample_corpus(), path)
    assert path.read_text(encoding="utf-8").startswith("Café")
    # A failure half-way (an invalid mention found while writing) keeps the old file intact.
    broken = _sample_corpus()
    broken.sentences.append(Sentence("a", [(0, 1)], [Mention(0, 5, "X")]))
    before = path.read_bytes()
    with pytest.raises(IndexError):
        write_conll(broken, path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["c.tsv"]


# --------------------------------------------------------------------------- formats


CONLL_TEXT = "a\tB-X\nb\tO\n\n"
JSONL_TEXT = '{"text": "a b", "entities": [{"start": 0, "end": 1, "label": "X"}]}\n'


@pytest.mark.parametrize(
    ("name", "content", "fmt"),
    [
        ("c.jsonl", JSONL_TEXT, "jsonl"),
        ("c.JSON", JSONL_TEXT, "jsonl"),
        ("c.ndjson", JSONL_TEXT, "jsonl"),
        ("c.tsv", CONLL_TEXT, "conll"),
        ("c.conll", CONLL_TEXT, "conll"),
        ("c.iob", CONLL_TEXT, "conll"),
        ("c.iob2", CONLL_TEXT, "conll"),
        ("c.txt", CONLL_TEXT, "conll"),
        ("c.bio", CONLL_TEXT, "conll"),
        ("c.data", "\ufeff\n  \n" + JSONL_TEXT, "jsonl"),  # sniffed
        ("noext", CONLL_TEXT, "conll"),  # sniffed
    ],
)
def test_read_corpus_detects_format(tmp_path, name, content, fmt):
    path = _write(tmp_path, name, content)
    assert detect_format(path) == fmt
    corpus = read_corpus(path)
    assert corpus.sentences[0].words == ["a", "b"]
    assert corpus.sentences[0].mentions == [Mention(0, 1, "X")]


def test_read_corpus_explicit_format_overrides_extension(tmp_path):
    path = _write(tmp_path, "c.txt", JSONL_TEXT)
    assert read_corpus(path, format="JSONL").sentences[0].words == ["a", "b"]
    with pytest.raises(CorpusError):
        read_corpus(path, format="conll")  # a JSON line is not two columns


def test_unknown_format_lists_valid_ones(tmp_path):
    path = _write(tmp_path, "c.tsv", CONLL_TEXT)
    with pytest.raises(CorpusError, match="unknown corpus format 'brat'; valid: conll, jsonl"):
        read_corpus(path, format="brat")
    with pytest.raises(CorpusError, match="valid: conll, jsonl"):
        write_corpus(read_corpus(path), tmp_path / "o.tsv", format="xml")


@pytest.mark.parametrize("fmt", [None, "conll", "jsonl"])
def test_read_corpus_missing_file_or_directory(tmp_path, fmt):
    with pytest.raises(CorpusError, match="file not found") as excinfo:
        read_corpus(tmp_path / "missing.tsv", format=fmt)
    assert _only_issue(excinfo).path == str(tmp_path / "missing.tsv")
    with pytest.raises(CorpusError, match="is a directory"):
        read_corpus(tmp_path, format=fmt)


def test_write_corpus_by_extension(tmp_path):
    corpus = _sample_corpus()
    write_corpus(corpus, tmp_path / "a.jsonl")
    write_corpus(corpus, tmp_path / "a.iob2")
    write_corpus(corpus, tmp_path / "a.out", format="jsonl")
    assert (tmp_path / "a.jsonl").read_text(encoding="utf-8").startswith("{")
    assert (tmp_path / "a.iob2").read_text(encoding="utf-8").startswith("Café\t")
    assert (tmp_path / "a.out").read_bytes() == (tmp_path / "a.jsonl").read_bytes()
    with pytest.raises(CorpusError, match="cannot tell the format"):
        write_corpus(corpus, tmp_path / "a.out")


def test_convert(tmp_path):
    src = _write(tmp_path, "in.tsv", "Tamoxifen\tB-Chemical\ntherapy\tO\n\nBRCA1\tO\nmutation\tO\n")
    corpus = convert(src, tmp_path / "out.jsonl")
    assert len(corpus) == 2
    back = read_corpus(tmp_path / "out.jsonl")
    assert [(s.words, s.mentions) for s in back] == [(s.words, s.mentions) for s in corpus]
    again = convert(tmp_path / "out.jsonl", tmp_path / "again", "jsonl", "conll")
    assert (tmp_path / "again").read_bytes() == src.read_bytes() + b"\n"
    assert again.types == ["Chemical"]


# --------------------------------------------------------------------------- load_splits


def test_load_splits_names_and_extensions(tmp_path):
    _write(tmp_path, "train.tsv", CONLL_TEXT)
    _write(tmp_path, "validation.jsonl", JSONL_TEXT)
    _write(tmp_path, "README.md", "not a split")
    splits = load_splits(tmp_path)
    assert sorted(splits) == ["dev", "train"]
    assert splits["dev"].path == str(tmp_path / "validation.jsonl")


def test_load_splits_requires_train(tmp_path):
    _write(tmp_path, "devel.tsv", CONLL_TEXT)
    _write(tmp_path, "notes.md", "x")
    with pytest.raises(CorpusError, match=r"no train split .* found: devel\.tsv, notes\.md"):
        load_splits(tmp_path)


def test_load_splits_ambiguous_and_missing_directory(tmp_path):
    _write(tmp_path, "train.tsv", CONLL_TEXT)
    _write(tmp_path, "dev.tsv", CONLL_TEXT)
    _write(tmp_path, "devel.jsonl", JSONL_TEXT)
    with pytest.raises(
        CorpusError, match=r"several files for the dev split: dev\.tsv, devel\.jsonl"
    ):
        load_splits(tmp_path)
    with pytest.raises(CorpusError, match="directory not found"):
        load_splits(tmp_path / "nowhere")


# --------------------------------------------------------------------------- real corpora


def _raw_counts(path: Path) -> tuple[int, int]:
    """Sentences (blank-line separated) and B- tags counted straight from the file."""
    sentences = mentions = 0
    in_sentence = False
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                in_sentence = True
                mentions += line.rstrip("\n").split("\t")[1].startswith("B-")
            else:
                sentences += in_sentence
                in_sentence = False
    return sentences + in_sentence, mentions


@pytest.fixture(scope="module")
def ncbi_splits() -> dict[str, Corpus]:
    return load_splits(NCBI)


def _readme_table() -> dict[str, tuple[list[int], int]]:
    """Sentences per split and train mentions per folder, from the data README."""
    rows = {}
    for line in (DATA / "README.md").read_text(encoding="utf-8").splitlines():
        m = re.match(r"\| `([^`]+)` \|[^|]+\| ([\d,]+) / ([\d,]+) / ([\d,]+) \| ([\d,]+) \|", line)
        if m:
            nums = [int(x.replace(",", "")) for x in m.groups()[1:]]
            rows[m.group(1)] = (nums[:3], nums[3])
    return rows


@needs_data
def test_ncbi_disease_real_stats(ncbi_splits):
    train = ncbi_splits["train"]
    stats = train.stats()
    assert _raw_counts(NCBI / "train.tsv") == (stats["sentences"], stats["mentions"])
    assert (stats["sentences"], stats["mentions"]) == (5424, 5134)
    sentences, mentions = _readme_table()["NCBI-disease-IOB"]
    assert [len(ncbi_splits[k]) for k in ("train", "dev", "test")] == sentences == [5424, 923, 940]
    assert stats["mentions"] == mentions
    assert stats["words"] == 135701
    assert train.types == ["Disease"]
    assert stats["repairs"] == 0


@needs_data
def test_load_splits_real_ncbi(ncbi_splits):
    assert sorted(ncbi_splits) == ["dev", "test", "train"]
    assert ncbi_splits["dev"].path == str(NCBI / "devel.tsv")
    assert [c.n_mentions for c in ncbi_splits.values()] == [5134, 787, 960]


@needs_data
def test_bc5cdr_real_types_and_counts():
    train = read_corpus(BC5CDR / "train.tsv")
    assert train.types == ["Chemical", "Disease"]
    assert train.stats()["mentions_per_type"] == {"Chemical": 5203, "Disease": 4182}
    sentences, mentions = _readme_table()["BC5CDR-IOB"]
    assert (len(train), train.n_mentions) == (sentences[0], mentions) == (4560, 9385)
    assert _raw_counts(BC5CDR / "train.tsv") == (len(train), train.n_mentions)


@needs_data
def test_real_ncbi_devel_round_trip_conll_jsonl_conll(tmp_path, ncbi_splits):
    original = ncbi_splits["dev"]
    convert(NCBI / "devel.tsv", tmp_path / "devel.jsonl")
    via_jsonl = read_jsonl(tmp_path / "devel.jsonl")
    assert [s.words for s in via_jsonl] == [s.words for s in original]
    assert [s.mentions for s in via_jsonl] == [s.mentions for s in original]
    back = convert(tmp_path / "devel.jsonl", tmp_path / "devel.tsv")
    assert [(s.words, s.mentions) for s in back] == [(s.words, s.mentions) for s in original]
    assert (tmp_path / "devel.tsv").read_bytes() == (NCBI / "devel.tsv").read_bytes()


@needs_data
def test_real_ncbi_mentions_match_seqeval(ncbi_splits):
    seqeval = pytest.importorskip("seqeval.metrics.sequence_labeling")
    for sentence in ncbi_splits["dev"]:
        expected = [(s, e + 1, t) for t, s, e in seqeval.get_entities(sentence.tags())]
        assert [(m.start, m.end, m.label) for m in sentence.mentions] == expected


@pytest.mark.parametrize(
    "value", ["9" * 5000, "[" * 100_000 + "]" * 100_000], ids=["huge-int", "deep-nesting"]
)
def test_jsonl_values_python_cannot_decode_are_refused_with_the_line(tmp_path, value):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"text": "a b", "entities": []}\n{"text": "a", "x": ' + value + "}\n")
    with pytest.raises(CorpusError) as err:
        read_jsonl(path)
    assert f"{path}:2: unreadable JSON" in str(err.value)


def test_a_missing_corpus_fails_where_ci_requires_the_data(monkeypatch):
    """Outside CI a test whose corpus is missing skips; where .ci/run found the shared corpora
    (MSLM_REQUIRE_DATA=1) it fails, naming the corpus."""
    import conftest

    monkeypatch.setattr(conftest, "REQUIRE_DATA", False)
    with pytest.raises(pytest.skip.Exception, match="no-such-corpus"):
        conftest.data_dir("no-such-corpus")
    monkeypatch.setattr(conftest, "REQUIRE_DATA", True)
    with pytest.raises(pytest.fail.Exception, match=r"no-such-corpus.*MSLM_REQUIRE_DATA=1"):
        conftest.data_dir("no-such-corpus")
