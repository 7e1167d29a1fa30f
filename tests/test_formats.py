"""The annotation formats clinical tools speak (issue 8): Label Studio, BioC JSON and PubTator
read and written, predictions rendered in them, `mslm convert`, `format=` on /v1/annotate."""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path
from types import MappingProxyType, SimpleNamespace

import pytest
from conftest import TOY_CONLL, data_dir
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mslm_core import cli
from mslm_core.corpus import (
    FORMATS,
    Corpus,
    Mention,
    Sentence,
    convert,
    detect_format,
    predictions_to_bioc,
    predictions_to_labelstudio,
    predictions_to_pubtator,
    read_bioc,
    read_conll,
    read_corpus,
    read_labelstudio,
    read_pubtator,
    scan_corpus,
    write_bioc,
    write_conll,
    write_corpus,
    write_labelstudio,
    write_pubtator,
)
from mslm_core.corpus._shared import JsonStream
from mslm_core.errors import CorpusError
from mslm_core.text import word_spans
from mslm_core.types import Entity

OFFSET_FORMATS = ("jsonl", "labelstudio", "bioc", "pubtator")
SUFFIX = {
    "conll": ".tsv",
    "jsonl": ".jsonl",
    "labelstudio": ".json",
    "bioc": ".json",
    "pubtator": ".pubtator",
}


def _pairs(corpus: Corpus) -> list[tuple[list[str], list[Mention]]]:
    return [(s.words, s.mentions) for s in corpus.sentences]


def _write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def _line_of(text: str, needle: str, nth: int = 1) -> int:
    """The 1-based line of the ``nth`` line of ``text`` that contains ``needle``."""
    hits = [i + 1 for i, line in enumerate(text.splitlines()) if needle in line]
    return hits[nth - 1]


# --------------------------------------------------------------------------- real corpora


@pytest.fixture(scope="module", params=["NCBI-disease-IOB", "BC5CDR-chem-IOB"])
def first_200(request, tmp_path_factory) -> Path:
    """The first 200 sentences of a shared corpus's test split, as CoNLL."""
    corpus = read_conll(data_dir(request.param) / "test.tsv")
    path = tmp_path_factory.mktemp(request.param) / "first200.tsv"
    write_conll(Corpus(corpus.sentences[:200]), path)
    return path


@pytest.mark.parametrize("fmt", OFFSET_FORMATS)
def test_real_sentences_conll_to_format_and_back_keep_words_and_mentions(first_200, fmt, tmp_path):
    original = read_conll(first_200)
    assert len(original) == 200 and original.n_mentions > 100
    there = tmp_path / f"there{SUFFIX[fmt]}"
    convert(first_200, there, dst_format=fmt)
    assert detect_format(there) == fmt
    middle = read_corpus(there)
    assert _pairs(middle) == _pairs(original)
    back = convert(there, tmp_path / "back.tsv")
    assert _pairs(back) == _pairs(original)
    assert (tmp_path / "back.tsv").read_bytes() == first_200.read_bytes()


@pytest.mark.parametrize("fmt", FORMATS)
def test_scan_counts_what_read_reads_in_every_format(first_200, fmt, tmp_path):
    """Issue 18 item 7: uploads are checked and counted by scan_corpus, which keeps no
    sentence; its figures are those of the corpus read."""
    there = tmp_path / f"there{SUFFIX[fmt]}"
    convert(first_200, there, dst_format=fmt)
    corpus = read_corpus(there)
    summary = scan_corpus(there)
    assert summary.stats == corpus.stats() and summary.types == corpus.types
    assert summary.stats["mentions"] > 100


def test_scan_refuses_what_read_refuses(tmp_path):
    path = _write(tmp_path, "bad.tsv", "a\tO\nb\tB-\n\nc\tX\n")
    with pytest.raises(CorpusError) as read_error:
        read_corpus(path)
    with pytest.raises(CorpusError) as scan_error:
        scan_corpus(path)
    assert str(scan_error.value) == str(read_error.value)
    assert [i.line for i in scan_error.value.issues] == [2, 4]


def test_scan_holds_one_sentence_at_a_time(tmp_path):
    """Issue 18 item 7: 3 M one-token sentences cost the API 1.55 GB. Scanning 60,000 of
    them allocates a fixed amount, reading them grows with the file."""
    import tracemalloc

    path = tmp_path / "many.tsv"
    path.write_text("w\tB-X\n\n" * 60_000)
    peaks = {}
    for name, fn in (("scan", scan_corpus), ("read", read_corpus)):
        tracemalloc.start()
        result = fn(path)
        peaks[name] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        del result
    assert scan_corpus(path).stats["sentences"] == 60_000
    assert peaks["scan"] < 1 << 20, peaks
    assert peaks["read"] > 20 * peaks["scan"], peaks


def test_real_sentences_through_every_format_in_a_chain(first_200, tmp_path):
    original = read_conll(first_200)
    src = first_200
    for fmt in ("jsonl", "labelstudio", "bioc", "pubtator", "conll"):
        dst = tmp_path / f"chain-{fmt}"
        corpus = convert(src, dst, dst_format=fmt)
        assert _pairs(corpus) == _pairs(original), fmt
        src = dst
    assert (tmp_path / "chain-conll").read_bytes() == first_200.read_bytes()


# --------------------------------------------------------------------------- Label Studio

LS_EXPORT = [
    {
        "id": 101,
        "data": {"text": "Œdème après cisplatine chez un patient âgé."},
        "annotations": [
            {
                "id": 1,
                "was_cancelled": True,
                "updated_at": "2024-05-03T10:00:00Z",
                "result": [],
            },
            {
                "id": 2,
                "was_cancelled": False,
                "updated_at": "2024-05-01T09:00:00Z",
                "result": [
                    {
                        "id": "old",
                        "from_name": "label",
                        "to_name": "text",
                        "type": "labels",
                        "value": {"start": 0, "end": 5, "text": "Œdème", "labels": ["Symptom"]},
                    }
                ],
            },
            {
                "id": 3,
                "was_cancelled": False,
                "updated_at": "2024-05-02T09:00:00Z",
                "result": [
                    {
                        "id": "r1",
                        "from_name": "label",
                        "to_name": "text",
                        "type": "labels",
                        "value": {"start": 0, "end": 6, "text": "Œdème ", "labels": ["Disease"]},
                    },
                    {
                        "id": "r2",
                        "from_name": "label",
                        "to_name": "text",
                        "type": "labels",
                        "value": {
                            "start": 12,
                            "end": 22,
                            "text": "cisplatine",
                            "labels": ["Chemical"],
                        },
                    },
                    {
                        "id": "c1",
                        "from_name": "relevance",
                        "to_name": "text",
                        "type": "choices",
                        "value": {"choices": ["relevant"]},
                    },
                ],
            },
        ],
        "predictions": [],
    },
    {"id": 102, "data": {"text": "Not annotated yet."}, "annotations": []},
    {
        "id": 103,
        "data": {"text": "Aspirin reduces fever."},
        "annotations": [
            {
                "result": [
                    {
                        "type": "labels",
                        "value": {"start": 0, "end": 7, "text": "Aspirin", "labels": ["Chemical"]},
                    },
                    {
                        "type": "labels",
                        "value": {"start": 16, "end": 21, "text": "fever", "labels": ["Disease"]},
                    },
                    {"type": "relation", "from_id": "a", "to_id": "b", "direction": "right"},
                ]
            }
        ],
    },
]


def test_read_labelstudio_export_latest_completed_annotation(tmp_path, caplog):
    path = _write(tmp_path, "export.json", json.dumps(LS_EXPORT, indent=2, ensure_ascii=False))
    with caplog.at_level(logging.WARNING):
        corpus = read_corpus(path)
    first, second = corpus.sentences
    assert first.words == ["Œdème", "après", "cisplatine", "chez", "un", "patient", "âgé", "."]
    # annotation 3 (latest not cancelled), not the cancelled 1 nor the older 2
    assert first.mentions == [Mention(0, 1, "Disease"), Mention(2, 3, "Chemical")]
    assert first.char_mentions() == [(0, 5, "Disease"), (12, 22, "Chemical")]
    assert second.mentions == [Mention(0, 1, "Chemical"), Mention(2, 3, "Disease")]
    assert corpus.stripped == 1  # "Œdème " lost its trailing space
    assert "1 of 3 tasks have no completed annotation" in caplog.text
    assert "1 choices, 1 relation" in caplog.text


def test_labelstudio_result_types_are_never_echoed_into_the_log(tmp_path, caplog):
    # issue 18: a 5,000,189-character result type went verbatim into one log line
    task = json.loads(json.dumps(LS_EXPORT[0]))
    odd = "patient text " * 1000
    task["annotations"][-1]["result"].append({"type": odd, "value": {}})
    path = _write(tmp_path, "export.json", json.dumps([task]))
    with caplog.at_level(logging.WARNING):
        read_corpus(path)
    assert "patient text" not in caplog.text and "1 other" in caplog.text
    assert max(len(r.getMessage()) for r in caplog.records) < 300


def test_read_labelstudio_json_min_and_a_custom_text_key(tmp_path):
    rows = [
        {
            "id": 7,
            "note": "Renal failure after cisplatin.",
            "ner": [{"start": 0, "end": 13, "text": "Renal failure", "labels": ["Disease"]}],
            "annotator": 1,
            "annotation_id": 3,
        },
        {"id": 8, "note": "Nothing to see.", "annotator": 1, "annotation_id": 4},
        {"id": 9, "note": "An imported task, never annotated."},
    ]
    path = _write(tmp_path, "min.json", json.dumps(rows))
    corpus = read_labelstudio(path, text_key="note", label_key="ner")
    assert _pairs(corpus) == [
        (["Renal", "failure", "after", "cisplatin", "."], [Mention(0, 2, "Disease")]),
        (["Nothing", "to", "see", "."], []),
    ]


def test_json_min_keeps_the_latest_annotation_of_a_task(tmp_path, caplog):
    """Issue 19: JSON-MIN has one row per annotation; a task annotated twice gave the same
    sentence twice with contradictory labels."""
    text = "Renal failure after cisplatin."
    rows = [
        {
            "id": 7,
            "text": text,
            "label": [{"start": 0, "end": 13, "text": "Renal failure", "labels": ["Chemical"]}],
            "annotator": 1,
            "annotation_id": 3,
            "updated_at": "2026-01-02T10:00:00.000000Z",
        },
        {"id": 8, "text": "Nothing to see.", "label": [], "annotator": 1, "annotation_id": 4},
        {
            "id": 7,
            "text": text,
            "label": [{"start": 0, "end": 13, "text": "Renal failure", "labels": ["Disease"]}],
            "annotator": 2,
            "annotation_id": 5,
            "updated_at": "2026-01-03T09:00:00.000000Z",
        },
    ]
    for order in (rows, rows[::-1]):  # the latest wins wherever its row is
        path = _write(tmp_path, "min.json", json.dumps(order))
        with caplog.at_level(logging.WARNING):
            corpus = read_labelstudio(path)
        by_text = {s.text: s.mentions for s in corpus.sentences}
        assert len(corpus.sentences) == 2
        assert by_text[text] == [Mention(0, 2, "Disease")]
        counted = scan_corpus(path).stats
        assert counted["sentences"] == 2 and counted["mentions_per_type"] == {"Disease": 1}
    assert "1 older annotations" in caplog.text


def test_write_labelstudio_import_file_one_task_per_line(tmp_path):
    corpus = _small_corpus()
    path = tmp_path / "tasks.json"
    write_labelstudio(corpus, path, text_key="note", from_name="ner", to_name="note")
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2 + len(corpus)  # "[", one task per line, "]"
    tasks = json.loads(path.read_text(encoding="utf-8"))
    assert tasks[0]["data"] == {"note": "Cisplatin caused renal failure ."}
    (annotation,) = tasks[0]["annotations"]
    assert annotation["was_cancelled"] is False
    assert annotation["result"][1] == {
        "id": "e1",
        "from_name": "ner",
        "to_name": "note",
        "type": "labels",
        "value": {"start": 17, "end": 30, "text": "renal failure", "labels": ["Disease"]},
    }
    assert _pairs(read_labelstudio(path, text_key="note")) == _pairs(corpus)


# --------------------------------------------------------------------------- BioC

TITLE = "Sjögren syndrome after interferon-α therapy."
ABSTRACT = "A 54-year-old woman developed Sjögren syndrome. Naproxen was stopped."


def _bioc_annotation(ident: str, doc_offset: int, text: str, etype: str) -> dict:
    return {
        "id": ident,
        "infons": {"type": etype, "identifier": "MESH:D012859"},
        "text": text,
        "locations": [{"offset": doc_offset, "length": len(text)}],
    }


def _bioc_collection() -> dict:
    a0 = len(TITLE) + 1  # the abstract passage's offset in the document
    return {
        "source": "PubTator",
        "date": "20240501",
        "key": "BioC.key",
        "infons": {},
        "documents": [
            {
                "id": "28436013",
                "infons": {},
                "passages": [
                    {
                        "infons": {"type": "title"},
                        "offset": 0,
                        "text": TITLE,
                        "annotations": [
                            _bioc_annotation("1", 0, "Sjögren syndrome", "Disease"),
                            _bioc_annotation("2", 23, "interferon-α", "Chemical"),
                        ],
                        "relations": [],
                    },
                    {
                        "infons": {"type": "abstract"},
                        "offset": a0,
                        "text": ABSTRACT,
                        "annotations": [
                            _bioc_annotation("3", a0 + 30, "Sjögren syndrome", "Disease"),
                            _bioc_annotation("4", a0 + 48, "Naproxen", "Chemical"),
                        ],
                        "relations": [],
                    },
                ],
                "relations": [{"id": "R1", "infons": {"type": "CID"}, "nodes": []}],
            },
            {
                "id": "9999",
                "infons": {},
                "passages": [
                    {
                        "offset": 100,
                        "infons": {},
                        "sentences": [
                            {
                                "offset": 100,
                                "text": "Cisplatin nephrotoxicity.",
                                "annotations": [
                                    _bioc_annotation("5", 100, "Cisplatin", "Chemical")
                                ],
                            },
                            {
                                "offset": 126,
                                "text": "Renal failure followed.",
                                "annotations": [
                                    _bioc_annotation("6", 126, "Renal failure", "Disease")
                                ],
                            },
                        ],
                    }
                ],
            },
        ],
    }


def test_read_bioc_passage_offsets_and_sentences(tmp_path, caplog):
    text = json.dumps(_bioc_collection(), indent=2, ensure_ascii=False)
    path = _write(tmp_path, "collection.json", text)
    assert detect_format(path) == "bioc"
    with caplog.at_level(logging.WARNING):
        corpus = read_corpus(path)
    title, abstract, s1, s2 = corpus.sentences
    assert title.text == TITLE and abstract.text == ABSTRACT
    assert [(title.text[a:b], t) for a, b, t in title.char_mentions()] == [
        ("Sjögren syndrome", "Disease"),
        ("interferon-α", "Chemical"),
    ]
    assert title.mentions == [Mention(0, 2, "Disease"), Mention(3, 6, "Chemical")]
    assert [(abstract.text[a:b], t) for a, b, t in abstract.char_mentions()] == [
        ("Sjögren syndrome", "Disease"),
        ("Naproxen", "Chemical"),
    ]
    assert _pairs(Corpus([s1, s2])) == [
        (["Cisplatin", "nephrotoxicity", "."], [Mention(0, 1, "Chemical")]),
        (["Renal", "failure", "followed", "."], [Mention(0, 2, "Disease")]),
    ]
    assert "1 relations not kept" in caplog.text


def test_write_bioc_collection(tmp_path):
    corpus = _small_corpus()
    path = tmp_path / "out.json"
    write_bioc(corpus, path)
    collection = json.loads(path.read_text(encoding="utf-8"))
    assert {"source", "date", "key", "infons", "documents"} <= set(collection)
    assert [d["id"] for d in collection["documents"]] == ["0", "1"]
    (passage,) = collection["documents"][0]["passages"]
    assert passage["offset"] == 0 and passage["text"] == "Cisplatin caused renal failure ."
    assert passage["annotations"][1] == {
        "id": "1",
        "infons": {"type": "Disease"},
        "text": "renal failure",
        "locations": [{"offset": 17, "length": 13}],
    }
    assert _pairs(read_bioc(path)) == _pairs(corpus)


# --------------------------------------------------------------------------- PubTator

PUBTATOR = """\
28436013|t|Sjögren syndrome after interferon-α therapy.
28436013|a|A 54-year-old woman developed Sjögren syndrome. Naproxen was stopped.
28436013\t0\t16\tSjögren syndrome\tDisease\tMESH:D012859
28436013\t23\t35\tinterferon-α\tChemical\tMESH:D016898
28436013\t75\t91\tSjögren syndrome\tDisease\tMESH:D012859
28436013\t93\t101\tNaproxen\tChemical\tMESH:D009288
28436013\tCID\tD009288\tD012859

9999|t|Cisplatin nephrotoxicity.
9999|a|
9999\t0\t9\tCisplatin\tChemical\tD002945
"""


def test_read_pubtator_title_and_abstract(tmp_path, caplog):
    path = _write(tmp_path, "corpus.txt", PUBTATOR)
    assert detect_format(path) == "pubtator"
    with caplog.at_level(logging.WARNING):
        corpus = read_corpus(path)
    title, abstract, other = corpus.sentences  # the empty abstract of 9999 has no words
    assert (title.text, abstract.text) == (TITLE, ABSTRACT)
    assert title.mentions == [Mention(0, 2, "Disease"), Mention(3, 6, "Chemical")]
    assert [(abstract.text[a:b], t) for a, b, t in abstract.char_mentions()] == [
        ("Sjögren syndrome", "Disease"),
        ("Naproxen", "Chemical"),
    ]
    assert _pairs(Corpus([other])) == [
        (["Cisplatin", "nephrotoxicity", "."], [Mention(0, 1, "Chemical")])
    ]
    assert "1 relation lines not kept" in caplog.text
    # the same mentions as the BioC collection of the same document
    bioc = _write(tmp_path, "same.json", json.dumps(_bioc_collection()))
    assert _pairs(Corpus(corpus.sentences[:2])) == _pairs(Corpus(read_bioc(bioc).sentences[:2]))


def test_write_pubtator_flattens_line_breaks_and_keeps_offsets(tmp_path):
    corpus = _small_corpus()
    path = tmp_path / "out.pubtator"
    write_corpus(corpus, path)
    assert path.read_text(encoding="utf-8") == (
        "0|t|Cisplatin caused renal failure .\n0|a|\n"
        "0\t0\t9\tCisplatin\tChemical\t-\n0\t17\t30\trenal failure\tDisease\t-\n\n"
        "1|t|Fever and skin rash\n1|a|\n"
        "1\t0\t5\tFever\tDisease\t-\n1\t10\t19\tskin rash\tDisease\t-\n\n"
    )
    assert _pairs(read_pubtator(path)) == _pairs(corpus)


def test_pubtator_we_write_is_read_by_bioc_pubtator(tmp_path):
    """Issue 19: bioc.pubtator (PyPI bioc 2.1) read our 5-column mention lines as relations
    (0 annotations, no error). The third-party reader itself checks the round trip."""
    from bioc import pubtator

    corpus = _small_corpus()
    path = tmp_path / "out.pubtator"
    write_corpus(corpus, path)
    with open(path, encoding="utf-8") as f:
        docs = pubtator.load(f)
    assert [d.pmid for d in docs] == ["0", "1"]
    assert [d.relations for d in docs] == [[], []]
    read = [[(a.start, a.end, a.text, a.type, a.id) for a in d.annotations] for d in docs]
    assert read == [
        [(0, 9, "Cisplatin", "Chemical", "-"), (17, 30, "renal failure", "Disease", "-")],
        [(0, 5, "Fever", "Disease", "-"), (10, 19, "skin rash", "Disease", "-")],
    ]
    assert all(d.title[a.start : a.end] == a.text for d in docs for a in d.annotations)


def test_write_pubtator_refuses_a_type_with_whitespace(tmp_path):
    corpus = Corpus([Sentence.from_words(["a", "b"], [Mention(0, 1, "Two words")])])
    with pytest.raises(CorpusError, match="cannot be written in PubTator"):
        write_pubtator(corpus, tmp_path / "x.pubtator")
    assert not (tmp_path / "x.pubtator").exists()


def _small_corpus() -> Corpus:
    text = "Fever and\nskin rash"  # a line break, as a JSONL text may hold
    return Corpus(
        [
            Sentence.from_words(
                ["Cisplatin", "caused", "renal", "failure", "."],
                [Mention(0, 1, "Chemical"), Mention(2, 4, "Disease")],
            ),
            Sentence(text, word_spans(text), [Mention(0, 1, "Disease"), Mention(2, 4, "Disease")]),
        ]
    )


# --------------------------------------------------------------------------- malformed input


def _ls(*values: dict, text: str = "Aspirin reduces fever.") -> str:
    results = [
        {"type": "labels", "from_name": "label", "to_name": "text", "value": v} for v in values
    ]
    return json.dumps([{"data": {"text": text}, "annotations": [{"result": results}]}], indent=2)


ASPIRIN = {"start": 0, "end": 7, "text": "Aspirin", "labels": ["Chemical"]}
VALUE = "[0].annotations[0].result[0].value"

LS_BAD = [
    (_ls({**ASPIRIN, "start": "3"}), '"start": "3"', f"{VALUE}.start", "must be an integer"),
    (_ls({**ASPIRIN, "end": 99}), '"end": 99', f"{VALUE}.end", "outside the text"),
    (_ls({**ASPIRIN, "text": "Aspirine"}), '"text": "Aspirine"', f"{VALUE}.text", "does not match"),
    (_ls({**ASPIRIN, "labels": ["A", "B"]}), '"labels": [', f"{VALUE}.labels", "found 2 labels"),
    (_ls({**ASPIRIN, "labels": ["Chem X"]}), '"Chem X"', f"{VALUE}.labels[0]", "whitespace"),
    (
        _ls(ASPIRIN, {"start": 3, "end": 10, "text": "irin re", "labels": ["X"]}),
        ('"value": {', 2),
        "[0].annotations[0].result[1].value",
        "overlaps the entity [0, 7) Chemical",
    ),
    ('[\n  {"data": {"text": "a"}}\n  {"data": {}}\n]', '{"data": {}}', None, "invalid JSON"),
    (
        '[\n  {"data": {"note": "a"}, "annotations": [{"result": []}]}\n]',
        "note",
        "[0].data.text",
        "'text' must be a string (missing)",
    ),
    ("[\n  1\n]", "1", "[0]", "task must be an object"),
    ('{"text": "a"}', "text", None, "expected a Label Studio export"),
]

BIOC_BAD_CASES = {
    "outside": (
        ("passages", 1, "annotations", 0, "locations", 0, "offset"),
        3,
        "outside the passage [45, 114)",
    ),
    "mismatch": (("passages", 1, "annotations", 0, "text"), "Sjogren syndrome", "does not match"),
    "type": (("passages", 1, "annotations", 0, "infons", "type"), None, "'type' must be a string"),
    "discontinuous": (("passages", 1, "annotations", 0, "locations"), "two", "discontinuous"),
    "passage offset": (("passages", 0, "offset"), "0", "'offset' must be an integer"),
}


def _bioc_bad(case: str) -> tuple[str, str, str]:
    path, value, _ = BIOC_BAD_CASES[case]
    collection = _bioc_collection()
    target = collection["documents"][0]
    for step in path[:-1]:
        target = target[step]
    if case == "discontinuous":
        value = [{"offset": 75, "length": 7}, {"offset": 83, "length": 8}]
    target[path[-1]] = value
    field = "documents[0]." + "".join(
        f"[{s}]" if isinstance(s, int) else f".{s}" for s in path
    ).lstrip(".")
    text = json.dumps(collection, indent=2, ensure_ascii=False)
    return text, field, BIOC_BAD_CASES[case][2]


PUBTATOR_BAD = [
    ("1|t|Aspirin reduces fever.\n1\t0\t7\tAspirine\tChemical\n", 2, "mention", "does not match"),
    ("1|t|Aspirin reduces fever.\n1\tx1\t7\tAspirin\tChemical\n", 2, "start", "not an offset"),
    ("1|t|Aspirin reduces fever.\n2\t0\t7\tAspirin\tChemical\n", 2, "pmid", "not the document's"),
    ("1|t|Aspirin reduces fever.\n1\t16\t99\tfever\tDisease\n", 2, "end", "outside the document"),
    ("1|t|Aspirin.\n1|a|Fever.\n1\t6\t10\tn. F\tX\n", 3, "start", "crosses from the title"),
    ("1|t|Aspirin.\n1\t0\t7\tAspirin\tChem ical\n", 2, "type", "whitespace"),
    ("1|t|Aspirin.\n1\t0\t7\tAspirin\n", 2, None, "found 4 columns"),
    (
        "1|t|Aspirin reduces fever.\n1\t0\t7\tAspirin\tChemical\n1\t3\t10\tirin re\tX\n",
        3,
        None,
        "overlaps the entity [0, 7) Chemical",
    ),
    ("1|a|Fever.\n", 1, None, "without its title line"),
    ("1\t0\t7\tAspirin\tChemical\n", 1, None, "expected a title line"),
    (b"1|t|Aspirin.\n1|a|Fi\xffevre.\n", 2, None, "invalid UTF-8"),
]


@pytest.mark.parametrize(("content", "needle", "field", "fragment"), LS_BAD)
def test_labelstudio_refusals_name_line_and_field(tmp_path, content, needle, field, fragment):
    path = _write(tmp_path, "bad.json", content)
    with pytest.raises(CorpusError) as excinfo:
        read_corpus(path, "labelstudio")
    issue = excinfo.value.issues[0]
    line = _line_of(content, *needle) if isinstance(needle, tuple) else _line_of(content, needle)
    assert (issue.path, issue.line, issue.field) == (str(path), line, field)
    assert fragment in issue.message


@pytest.mark.parametrize("case", sorted(BIOC_BAD_CASES))
def test_bioc_refusals_name_line_and_field(tmp_path, case):
    content, field, fragment = _bioc_bad(case)
    path = _write(tmp_path, "bad.json", content)
    with pytest.raises(CorpusError) as excinfo:
        read_bioc(path)
    (issue,) = excinfo.value.issues
    assert (issue.path, issue.field) == (str(path), field)
    assert fragment in issue.message
    needle = {
        "outside": '"offset": 3',
        "mismatch": '"Sjogren syndrome"',
        "type": '"type": null',
        "discontinuous": '"locations": [',
        "passage offset": '"offset": "0"',
    }[case]
    assert issue.line == _line_of(content, needle, 3 if case == "discontinuous" else 1)


@pytest.mark.parametrize(("content", "line", "field", "fragment"), PUBTATOR_BAD)
def test_pubtator_refusals_name_line_and_field(tmp_path, content, line, field, fragment):
    path = _write(tmp_path, "bad.pubtator", content)
    with pytest.raises(CorpusError) as excinfo:
        read_corpus(path)
    issue = excinfo.value.issues[0]
    assert (issue.path, issue.line, issue.field) == (str(path), line, field)
    assert fragment in issue.message


@pytest.mark.parametrize(
    ("name", "content", "fragment"),
    [
        ("e.json", "[]", "empty corpus"),
        ("e.json", "  \n", "empty corpus"),
        (
            "e.json",
            json.dumps([{"data": {"text": "a"}, "predictions": [{"result": []}]}]),
            "1 tasks without a completed annotation",
        ),
        ("e.json", '{"source": "x", "documents": []}', "empty corpus"),
        ("e.pubtator", "\n\n", "empty corpus"),
        ("e.pubtator", "1|t|\n1|a|\n", "empty corpus"),
    ],
)
def test_empty_corpora_are_refused(tmp_path, name, content, fragment):
    fmt = "bioc" if "documents" in content else None
    with pytest.raises(CorpusError, match=fragment):
        read_corpus(_write(tmp_path, name, content), fmt)


def test_json_readers_refuse_invalid_utf8_and_trailing_content(tmp_path):
    bad = _write(tmp_path, "u.json", b'[\n{"data": {"text": "caf\xc3"}}\n]')
    with pytest.raises(CorpusError, match="invalid UTF-8") as excinfo:
        read_labelstudio(bad)
    assert excinfo.value.issues[0].line == 2
    extra = _write(tmp_path, "t.json", '{"documents": []}\n{"documents": []}\n')
    with pytest.raises(CorpusError, match="unexpected content after") as excinfo:
        read_bioc(extra)
    assert excinfo.value.issues[0].line == 2
    missing = _write(tmp_path, "m.json", '{"source": "x"}')
    with pytest.raises(CorpusError, match="no 'documents'"):
        read_bioc(missing)


def test_bioc_refuses_what_it_would_otherwise_drop(tmp_path):
    collection = _bioc_collection()
    title = collection["documents"][0]["passages"][0]
    title["sentences"] = [
        {"offset": 0, "text": "Sjögren", "annotations": [title["annotations"][0]]}
    ]
    with pytest.raises(CorpusError, match="annotate the passage or its sentences, not both"):
        read_bioc(_write(tmp_path, "both.json", json.dumps(collection)))
    deep = '{"documents": [' + "[" * 100_000 + "]" * 100_000 + "]}"
    with pytest.raises(CorpusError, match="nested too deeply"):
        read_bioc(_write(tmp_path, "deep.json", deep))
    assert detect_format(tmp_path / "deep.json") == "bioc"


def test_a_json_value_over_the_line_limit_is_refused(tmp_path):
    huge = json.dumps([{"data": {"text": "a" * (9 << 20)}, "annotations": [{"result": []}]}])
    with pytest.raises(CorpusError, match="longer than 8 MiB"):
        read_labelstudio(_write(tmp_path, "huge.json", huge))


def test_json_stream_reads_the_same_across_any_chunk_boundary(tmp_path, monkeypatch):
    ls = _write(tmp_path, "ls.json", json.dumps(LS_EXPORT, indent=2, ensure_ascii=False))
    bioc = _write(tmp_path, "bioc.json", json.dumps(_bioc_collection(), ensure_ascii=False))
    bad_text, _, _ = _bioc_bad("outside")
    bad = _write(tmp_path, "bad.json", bad_text)
    expected = [_pairs(read_labelstudio(ls)), _pairs(read_bioc(bioc))]
    with pytest.raises(CorpusError) as excinfo:
        read_bioc(bad)
    expected_issue = excinfo.value.issues[0]
    for chunk in (1, 2, 3, 7, 64):
        monkeypatch.setattr(JsonStream, "CHUNK", chunk)
        assert [_pairs(read_labelstudio(ls)), _pairs(read_bioc(bioc))] == expected
        with pytest.raises(CorpusError) as excinfo:
            read_bioc(bad)
        assert excinfo.value.issues[0] == expected_issue


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(
    data=st.one_of(
        st.binary(max_size=300),
        st.text(alphabet='[]{}":,0123456789 \nabt|\t', max_size=200).map(str.encode),
    )
)
def test_new_readers_refuse_or_read_any_bytes(data):
    with tempfile.TemporaryDirectory() as tmp:
        for reader in (read_labelstudio, read_bioc, read_pubtator):
            path = Path(tmp) / "x"
            path.write_bytes(data)
            try:
                corpus = reader(path)
            except CorpusError as exc:
                assert exc.issues and all(i.path == str(path) for i in exc.issues)
                continue
            for s in corpus.sentences:
                for m in s.mentions:
                    assert 0 <= m.start < m.end <= len(s.word_spans)


# --------------------------------------------------------------------------- detection


CONLL = "a\tB-X\nb\tO\n\n"
JSONL = '{"text": "a b", "entities": [{"start": 0, "end": 1, "label": "X"}]}\n'
LS = json.dumps(
    [
        {
            "data": {"text": "a b"},
            "annotations": [
                {
                    "result": [
                        {
                            "type": "labels",
                            "value": {"start": 0, "end": 1, "text": "a", "labels": ["X"]},
                        }
                    ]
                }
            ],
        }
    ]
)
BIOC = json.dumps(
    {
        "source": "s",
        "date": "d",
        "key": "k",
        "infons": {"note": '{"documents"}'},
        "documents": [
            {
                "id": "1",
                "passages": [
                    {
                        "offset": 0,
                        "text": "a b",
                        "annotations": [
                            {
                                "infons": {"type": "X"},
                                "locations": [{"offset": 0, "length": 1}],
                                "text": "a",
                            }
                        ],
                    }
                ],
            }
        ],
    },
    indent=1,
)
PUBTATOR_AB = "7|t|a b\n7|a|\n7\t0\t1\ta\tX\n"


@pytest.mark.parametrize(
    ("name", "content", "fmt"),
    [
        ("x.json", LS, "labelstudio"),
        ("x.json", BIOC, "bioc"),
        ("x.JSON", JSONL, "jsonl"),
        ("x.json", "\ufeff\n" + LS, "labelstudio"),
        ("x.txt", PUBTATOR_AB, "pubtator"),
        ("x.txt", CONLL, "conll"),
        ("x.pubtator", PUBTATOR_AB, "pubtator"),
        ("noext", LS, "labelstudio"),
        ("noext", BIOC, "bioc"),
        ("noext", JSONL, "jsonl"),
        ("noext", PUBTATOR_AB, "pubtator"),
        ("noext", CONLL, "conll"),
    ],
)
def test_detect_format_by_extension_then_content(tmp_path, name, content, fmt):
    path = _write(tmp_path, name, content)
    assert detect_format(path) == fmt
    corpus = read_corpus(path)
    assert _pairs(corpus) == [(["a", "b"], [Mention(0, 1, "X")])]


def test_detect_format_keeps_each_extension_to_its_formats(tmp_path):
    conll_in_json = _write(tmp_path, "x.json", CONLL)
    assert detect_format(conll_in_json) == "jsonl"  # and the JSONL reader says what is wrong
    with pytest.raises(CorpusError, match="invalid JSON"):
        read_corpus(conll_in_json)
    assert detect_format(_write(tmp_path, "y.txt", JSONL)) == "conll"
    spooled = _write(tmp_path, "spool", LS)  # an upload, named by its client
    assert detect_format(spooled, name="train.json") == "labelstudio"
    assert detect_format(spooled, name="train.tsv") == "conll"


def test_unknown_format_lists_the_five(tmp_path):
    with pytest.raises(CorpusError, match="valid: conll, jsonl, labelstudio, bioc, pubtator"):
        read_corpus(_write(tmp_path, "c.tsv", CONLL), format="brat")
    assert FORMATS == ("conll", "jsonl", "labelstudio", "bioc", "pubtator")


# --------------------------------------------------------------------------- predictions

TEXTS = ["Cisplatin caused renal failure .", "Fever and\nrash.", ""]


def _entities() -> list[list[Entity]]:
    return [
        [
            Entity(0, 9, "Cisplatin", "Chemical", 0.9, 0.95, 0.947),
            Entity(17, 30, "renal failure", "Disease", 0.8, 0.9, 0.889),
        ],
        [Entity(0, 5, "Fever", "Disease", 0.6, 0.7, 0.857)],
        [],
    ]


def test_predictions_to_bioc_read_back(tmp_path):
    collection = predictions_to_bioc(TEXTS, _entities(), model="m-1")
    assert collection["infons"] == {"model": "m-1"}
    assert [d["id"] for d in collection["documents"]] == ["0", "1", "2"]
    ann = collection["documents"][0]["passages"][0]["annotations"][1]
    assert ann == {
        "id": "1",
        "infons": {"type": "Disease", "confidence": "0.8"},  # BioC infons are strings
        "text": "renal failure",
        "locations": [{"offset": 17, "length": 13}],
    }
    # bioc-py (PyPI bioc 2.1) reads it as it is
    from bioc import biocjson

    read = biocjson.loads(json.dumps(collection))
    first = read.documents[0].passages[0]
    assert first.text == TEXTS[0] and read.infons == {"model": "m-1"}
    assert [
        (a.text, a.infons, a.locations[0].offset, a.locations[0].length) for a in first.annotations
    ] == [
        ("Cisplatin", {"type": "Chemical", "confidence": "0.9"}, 0, 9),
        ("renal failure", {"type": "Disease", "confidence": "0.8"}, 17, 13),
    ]
    path = _write(tmp_path, "p.json", json.dumps(collection))
    assert [s.char_mentions() for s in read_bioc(path)] == [
        [(0, 9, "Chemical"), (17, 30, "Disease")],
        [(0, 5, "Disease")],
    ]


def test_bioc_written_by_bioc_py_with_sentence_level_annotations(tmp_path):
    """Issue 19: bioc-py writes "text": "" on a passage whose sentences carry the text and
    the annotations; that was refused ("annotate the passage or its sentences, not both")."""
    from bioc import (
        BioCAnnotation,
        BioCCollection,
        BioCDocument,
        BioCLocation,
        BioCPassage,
        BioCSentence,
        biocjson,
    )

    collection, document, passage = BioCCollection(), BioCDocument(), BioCPassage()
    document.id, passage.offset = "d1", 0
    for offset, text, spans in (
        (0, "Cisplatin caused renal failure .", [(0, 9, "Chemical"), (17, 30, "Disease")]),
        (33, "Fever resolved .", [(33, 38, "Disease")]),
    ):
        sentence = BioCSentence()
        sentence.offset, sentence.text = offset, text
        for k, (start, end, label) in enumerate(spans):
            ann = BioCAnnotation()
            ann.id, ann.infons["type"] = f"{offset}-{k}", label
            ann.text = text[start - offset : end - offset]
            ann.add_location(BioCLocation(start, end - start))
            sentence.add_annotation(ann)
        passage.add_sentence(sentence)
    document.add_passage(passage)
    collection.add_document(document)
    written = biocjson.dumps(collection)
    assert '"text": ""' in written.replace('"text":""', '"text": ""')  # as bioc-py writes it
    corpus = read_bioc(_write(tmp_path, "biocpy.json", written))
    assert [s.char_mentions() for s in corpus] == [
        [(0, 9, "Chemical"), (17, 30, "Disease")],
        [(0, 5, "Disease")],
    ]


def test_bioc_document_level_annotations_are_refused_never_dropped(tmp_path):
    collection = predictions_to_bioc(TEXTS[:1], _entities()[:1], model="m")
    doc = collection["documents"][0]
    doc["annotations"] = [doc["passages"][0]["annotations"].pop()]
    with pytest.raises(CorpusError) as caught:
        read_bioc(_write(tmp_path, "doclevel.json", json.dumps(collection)))
    assert "documents[0].annotations" in str(caught.value)
    assert "1 document-level annotations" in str(caught.value)


def test_xml_named_txt_is_named_not_read_as_conll(tmp_path):
    xml = '<?xml version="1.0" encoding="UTF-8"?>\n<collection><source>x</source></collection>\n'
    with pytest.raises(CorpusError, match=r"an XML file \(BioC XML\?\) named .txt") as caught:
        read_corpus(_write(tmp_path, "collection.txt", xml))
    assert "collection.txt:1" in str(caught.value)
    # a CoNLL file whose first token is "<" is still CoNLL
    assert read_corpus(_write(tmp_path, "lt.txt", "<\tO\n5\tO\n\n")).sentences[0].words == [
        "<",
        "5",
    ]


def test_predictions_to_labelstudio_are_pre_annotations(tmp_path):
    tasks = predictions_to_labelstudio(TEXTS, _entities(), model_version="m-1")
    assert [t["data"]["text"] for t in tasks] == TEXTS
    (prediction,) = tasks[0]["predictions"]
    assert prediction["model_version"] == "m-1" and prediction["score"] == 0.8  # the lowest
    assert prediction["result"][0] == {
        "id": "e0",
        "from_name": "label",
        "to_name": "text",
        "type": "labels",
        "value": {"start": 0, "end": 9, "text": "Cisplatin", "labels": ["Chemical"]},
        "score": 0.9,
    }
    assert "score" not in tasks[2]["predictions"][0]  # no entity, no score
    assert "annotations" not in tasks[0]
    # pre-annotations are not gold: as a dataset they are refused, not read as mentions
    path = _write(tmp_path, "pre.json", json.dumps(tasks))
    with pytest.raises(CorpusError, match="3 tasks without a completed annotation"):
        read_labelstudio(path)


def test_predictions_to_pubtator_read_back(tmp_path):
    text = predictions_to_pubtator(TEXTS, _entities())
    assert text.startswith(
        "0|t|Cisplatin caused renal failure .\n0|a|\n"
        "0\t0\t9\tCisplatin\tChemical\t-\n0\t17\t30\trenal failure\tDisease\t-\n\n"
        "1|t|Fever and rash.\n"
    )
    corpus = read_pubtator(_write(tmp_path, "p.pubtator", text))
    assert [s.char_mentions() for s in corpus] == [
        [(0, 9, "Chemical"), (17, 30, "Disease")],
        [(0, 5, "Disease")],
    ]


# --------------------------------------------------------------------------- CLI


def test_cli_convert_both_ways_and_reports_bad_input(tmp_path, capsys, caplog):
    src = _write(tmp_path, "toy.tsv", TOY_CONLL)
    assert cli.main(["convert", str(src), str(tmp_path / "toy.json"), "--to", "labelstudio"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary == {
        "src": str(src),
        "dst": str(tmp_path / "toy.json"),
        "from": "conll",
        "to": "labelstudio",
        "sentences": 4,
        "mentions": 7,
        "types": ["Chemical", "Disease"],
    }
    assert cli.main(["convert", str(tmp_path / "toy.json"), str(tmp_path / "toy.pubtator")]) == 0
    assert json.loads(capsys.readouterr().out)["from"] == "labelstudio"
    back = tmp_path / "back.txt"
    assert cli.main(["convert", str(tmp_path / "toy.pubtator"), str(back), "--to", "conll"]) == 0
    assert back.read_text(encoding="utf-8") == TOY_CONLL + "\n"
    bad = _write(tmp_path, "bad.pubtator", "1|t|Aspirin.\n1\t0\t7\tAspirine\tChemical\n")
    assert cli.main(["convert", str(bad), str(tmp_path / "x.tsv")]) == 2
    assert f"{bad}:2 (mention)" in caplog.text
    assert not (tmp_path / "x.tsv").exists()


class _FakeExtractor:
    """An engine that finds the same entities whatever it reads."""

    id = "fake-model"
    manifest = MappingProxyType({})
    info = SimpleNamespace(
        model_id="fake-model", backend="torch", precision="fp32", provider="cpu", types=("X",)
    )
    predictor = SimpleNamespace(annotate=lambda texts, styles=None: _entities()[: len(texts)])
    relations = None  # no relation scorer


@pytest.mark.parametrize("fmt", ["json", "bioc", "pubtator", "labelstudio"])
def test_cli_annotate_format(monkeypatch, capsys, fmt):
    monkeypatch.setattr(cli, "_extractor", lambda args: _FakeExtractor())
    argv = ["annotate", "--model", "m", "--min-confidence", "0.85", "--no-linking", "--format", fmt]
    argv += TEXTS[:2]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    if fmt == "pubtator":
        assert out == (
            "0|t|Cisplatin caused renal failure .\n0|a|\n0\t0\t9\tCisplatin\tChemical\t-\n\n"
            "1|t|Fever and rash.\n1|a|\n\n"
        )
        return
    body = json.loads(out)
    if fmt == "json":
        assert body["model"]["id"] == "fake-model"
        assert [[e["text"] for e in r["entities"]] for r in body["results"]] == [["Cisplatin"], []]
    elif fmt == "bioc":
        docs = body["documents"]
        assert [len(d["passages"][0]["annotations"]) for d in docs] == [1, 0]
        assert body["infons"]["model"] == "fake-model"
    else:
        assert [len(t["predictions"][0]["result"]) for t in body] == [1, 0]
        assert body[0]["predictions"][0]["model_version"] == "fake-model"


# --------------------------------------------------------------------------- service


@pytest.fixture(scope="module")
def formats_service(tmp_path_factory, tiny_encoder):
    """An install whose dataset was uploaded as Label Studio (train), BioC (dev) and PubTator
    (test) files, with a model trained on it and served."""
    from fastapi.testclient import TestClient
    from service_helpers import JOB, TRAIN, auth, serve_model_of, service_env

    from api.main import create_app
    from mslm_settings import Settings
    from worker.runner import run_training_job

    tmp = tmp_path_factory.mktemp("formats-svc")
    env = service_env(tmp / "home", tiny_encoder)
    settings_ = Settings(**{k.removeprefix("MSLM_").lower(): v for k, v in env.items()})
    toy = _write(tmp, "toy.tsv", TOY_CONLL)
    convert(toy, tmp / "train.json", dst_format="labelstudio")
    convert(toy, tmp / "dev.json", dst_format="bioc")
    convert(toy, tmp / "test.txt", dst_format="pubtator")
    with TestClient(create_app(settings_)) as c:
        files = {
            split: (
                f"{split}{ext}",
                (tmp / f"{split}{ext}").read_bytes(),
                "application/octet-stream",
            )
            for split, ext in (("train", ".json"), ("dev", ".json"), ("test", ".txt"))
        }
        r = c.post("/v1/datasets", headers=auth(TRAIN), files=files, data={"name": "formats"})
        assert r.status_code == 201, r.text
        dataset = r.json()
        job = c.post(
            "/v1/jobs",
            headers=auth(TRAIN),
            json={"dataset_id": dataset["id"], **JOB, "export": {"onnx": False}},
        ).json()
        assert run_training_job(job["id"], settings_) == "succeeded"
        serve_model_of(c, job["id"])
    return settings_, dataset


def test_service_reads_uploads_in_every_format_and_annotates_in_each(formats_service):
    from fastapi.testclient import TestClient
    from service_helpers import ANNOTATE, auth

    from api.main import create_app

    settings_, dataset = formats_service
    assert {k: v["format"] for k, v in dataset["files"].items()} == {
        "train": "labelstudio",
        "dev": "bioc",
        "test": "pubtator",
    }
    assert all(dataset["stats"][split]["mentions"] == 7 for split in ("train", "dev", "test"))
    text = "Cisplatin caused renal failure in the patient ."
    texts = [text, "No sign of diabetes or cancer today ."]
    with TestClient(create_app(settings_)) as c:

        def post(**extra):
            return c.post("/v1/annotate", headers=auth(ANNOTATE), json={"texts": texts, **extra})

        plain = post().json()
        expected = [
            [(e["start"], e["end"], e["type"]) for e in r["entities"]] for r in plain["results"]
        ]
        assert any(expected), "the toy model finds entities"
        model_id = plain["model"]["id"]

        bioc = post(format="bioc")
        assert bioc.status_code == 200 and bioc.headers["content-type"] == "application/json"
        collection = bioc.json()
        assert collection["infons"]["model"] == model_id
        assert [
            [
                (
                    a["locations"][0]["offset"],
                    a["locations"][0]["offset"] + a["locations"][0]["length"],
                    a["infons"]["type"],
                )
                for a in d["passages"][0]["annotations"]
            ]
            for d in collection["documents"]
        ] == expected

        ls = post(format="labelstudio").json()
        assert [t["data"]["text"] for t in ls] == texts
        assert [
            [
                (r["value"]["start"], r["value"]["end"], r["value"]["labels"][0])
                for r in t["predictions"][0]["result"]
            ]
            for t in ls
        ] == expected
        assert ls[0]["predictions"][0]["model_version"] == model_id
        regions = [r for t in ls for r in t["predictions"][0]["result"]]
        assert {(r["from_name"], r["to_name"]) for r in regions} == {("label", "text")}
        # the names of the project's own labelling config (issue 19)
        names = {"from_name": "ner", "to_name": "note"}
        named = post(format="labelstudio", labelstudio=names).json()
        regions = [r for t in named for r in t["predictions"][0]["result"]]
        assert regions and {(r["from_name"], r["to_name"]) for r in regions} == {("ner", "note")}
        bad = post(format="labelstudio", labelstudio={"from_name": ""})
        assert bad.status_code == 422

        pub = post(format="pubtator")
        assert pub.status_code == 200
        assert pub.headers["content-type"] == "text/plain; charset=utf-8"
        lines = [line.split("\t") for line in pub.text.splitlines() if "\t" in line]
        assert sorted((int(p), int(s), int(e), t) for p, s, e, _, t, _ in lines) == sorted(
            (i, s, e, t) for i, ents in enumerate(expected) for s, e, t in ents
        )
        assert pub.text.startswith(f"0|t|{text}\n0|a|\n")

        # thresholds apply before rendering, in every format
        no_disease = {"min_confidence_per_type": {"Disease": 1.01}}
        assert "Disease" not in post(format="pubtator", **no_disease).text
        assert "Disease" not in json.dumps(post(format="bioc", **no_disease).json())

        bad = post(format="xml")
        assert bad.status_code == 422
        assert bad.headers["content-type"].startswith("application/problem+json")

        doc = c.get("/openapi.json").json()["paths"]["/v1/annotate"]["post"]
        content = doc["responses"]["200"]["content"]
        assert {"application/json", "text/plain"} <= set(content)
        assert "BioC" in doc["responses"]["200"]["description"]


# ------------------------------------------------------------------ one registration a format
def test_the_format_tables_come_from_the_registry(tmp_path):
    """Issue 32: a format is declared once, by its module (``corpus.registry``); the names, the
    extensions, the stored suffixes, the sniffer, the prediction formats of the library, the CLI
    and the API all follow it, and a corpus stored under a format's suffix reads back as it."""
    from api.schemas import AnnotateRequest
    from mslm_core.corpus import EXTENSIONS, PREDICTION_FORMATS, SUFFIXES, formats, write_corpus
    from mslm_core.render import PREDICTION_FORMATS as EVERY_PREDICTION_FORMAT
    from mslm_core.render import PREDICTIONS, render_predictions

    declared = formats.formats()
    assert tuple(declared) == FORMATS
    assert {e: f.name for f in declared.values() for e in f.extensions} == EXTENSIONS
    assert {name: f.suffix for name, f in declared.items()} == SUFFIXES
    corpus = read_corpus(_write(tmp_path, "c.tsv", CONLL))
    for name, suffix in SUFFIXES.items():
        stored = tmp_path / f"{name}{suffix}"
        write_corpus(corpus, stored, name)
        assert detect_format(stored) == name
    rendering = [n for n, f in declared.items() if f.predictions is not None]
    assert tuple(rendering) == PREDICTION_FORMATS
    # one table of every prediction format: the service's json (the default), the corpus
    # formats', FHIR
    assert ("json", *PREDICTION_FORMATS, "fhir") == EVERY_PREDICTION_FORMAT == tuple(PREDICTIONS)
    enum = AnnotateRequest.model_json_schema()["properties"]["format"]["enum"]
    assert enum == list(EVERY_PREDICTION_FORMAT)
    for name in PREDICTIONS:
        assert render_predictions(name, TEXTS, _entities(), "m")
    with pytest.raises(ValueError, match="unknown prediction format 'brat'"):
        render_predictions("brat", TEXTS, _entities(), "m")


def test_a_new_format_is_one_registration(monkeypatch, tmp_path):
    """Registering a format makes it sniffable and readable by name; a second registration of
    a name or of an extension another format implies is refused."""
    from mslm_core.corpus import formats
    from mslm_core.corpus.conll import fill_conll, write_conll
    from mslm_core.corpus.model import SentenceList

    monkeypatch.setattr(formats, "_FORMATS", formats.formats())

    def fill_marked(path: str, sink) -> None:
        lines = Path(path).read_text().splitlines()
        assert lines[0] == "#marked"
        plain = tmp_path / "plain.tsv"
        plain.write_text("\n".join(lines[1:]) + "\n")
        fill_conll(str(plain), sink)

    marked = formats.Format(
        "marked",
        fill_marked,
        write_conll,
        extensions=(".marked",),
        suffix=".marked",
        sniff=lambda head: head.startswith(b"#marked"),
        sniff_rank=5,
    )
    formats.register(marked)
    text = "#marked\n" + CONLL
    assert formats.sniff(text.encode()) == "marked"
    sink = SentenceList()
    formats.fill("marked", str(_write(tmp_path, "x.marked", text)), sink)
    assert sink.corpus("x").sentences == read_corpus(_write(tmp_path, "c.tsv", CONLL)).sentences
    with pytest.raises(ValueError, match="registered twice"):
        formats.register(marked)
    with pytest.raises(ValueError, match=r"\.tsv already implies conll"):
        formats.register(
            formats.Format("other", fill_conll, write_conll, (".tsv",), ".tsv", sniff=None)
        )


def test_every_format_describes_itself_where_it_is_offered(tmp_path, tiny_encoder):
    """The prediction formats, the notes formats and the file outputs each carry their help in
    their catalogue; the API's document and the command's help show every one of them, so
    none is offered without a word (FHIR was missing from two hand-written lists)."""
    from fastapi.testclient import TestClient
    from service_helpers import make_settings

    from api.main import create_app
    from mslm_core.cli import build_parser
    from mslm_core.notes import NOTES
    from mslm_core.render import OUTPUTS, PREDICTIONS

    catalogues = {
        "predictions": {n: p.help for n, p in PREDICTIONS.items()},
        "notes": {n: f.help for n, f in NOTES.items()},
        "outputs": {n: o.help for n, o in OUTPUTS.items()},
    }
    for catalogue in catalogues.values():
        assert all(catalogue.values()), catalogue
    with TestClient(create_app(make_settings(tmp_path, tiny_encoder))) as client:
        document = client.get("/openapi.json").json()

    def descriptions(node) -> list[str]:
        if isinstance(node, dict):
            own = [node["description"]] if isinstance(node.get("description"), str) else []
            return own + [d for v in node.values() for d in descriptions(v)]
        if isinstance(node, list):
            return [d for v in node for d in descriptions(v)]
        return []

    described = " ".join(descriptions(document))
    annotate = build_parser()._subparsers._group_actions[0].choices["annotate"]
    annotate_help = " ".join(annotate.format_help().split())
    for kind, catalogue in catalogues.items():
        for name, words in catalogue.items():
            assert f"{name}: {words}" in described, (kind, name)
            if kind != "outputs":  # annotation jobs' outputs are mslm bulk's (the client's)
                assert f"{name}: {' '.join(words.split())}" in annotate_help, (kind, name)
