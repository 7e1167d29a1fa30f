"""Issue 19: what we read and write, checked with the third-party tools users run —
``bioc`` (bioc.pubtator, biocjson), ``pubtator-loader``, ``label-studio-sdk``'s
``LabelInterface`` — and the original PubTator releases of NCBI-disease and BC5CDR (read from
the pinned cache of ``benchmarks/harness/clinical.py`` when it holds them)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from mslm_core import cli
from mslm_core.corpus import (
    Mention,
    parse_type_map,
    read_corpus,
    scan_corpus,
    write_corpus,
)
from mslm_core.corpus.labelstudio import predictions_to_labelstudio
from mslm_core.corpus.pubtator import predictions_to_pubtator
from mslm_core.errors import CorpusError
from mslm_core.types import Entity

# A document in the shape of the original NCBI-disease release: its four classes, a composite
# identifier, an OMIM identifier, and (line 6) the flaw of the training file's line 3248: a
# mention column whose quotes were written as spaces.
TITLE = "Generalized epilepsy with febrile seizures plus and Wilson disease."
ABSTRACT = 'Families with generalized epilepsy and febrile seizures " plus " were studied.'
COMPOSITE = "D004829+D003294"
NCBI_LIKE = f"""10923035|t|{TITLE}
10923035|a|{ABSTRACT}
10923035\t0\t47\tGeneralized epilepsy with febrile seizures plus\tSpecificDisease\t{COMPOSITE}
10923035\t52\t66\tWilson disease\tDiseaseClass\tOMIM:277900
10923035\t82\t132\tgeneralized epilepsy and febrile seizures   plus  \tSpecificDisease\t{COMPOSITE}
10923035\t68\t76\tFamilies\tModifier\t-

"""
NCBI_CLASSES = (
    "SpecificDisease=Disease,DiseaseClass=Disease,Modifier=Disease,CompositeMention=Disease"
)


@pytest.fixture()
def ncbi_like(tmp_path) -> Path:
    path = tmp_path / "ncbi.txt"
    path.write_text(NCBI_LIKE, encoding="utf-8")
    return path


def test_the_known_bad_line_is_refused_with_a_hint_or_repaired_on_request(ncbi_like, caplog):
    with pytest.raises(CorpusError) as refused:
        read_corpus(ncbi_like)
    (issue,) = refused.value.issues
    assert (issue.line, issue.field) == (5, "mention")
    assert "--trust-offsets" in issue.message
    with caplog.at_level(logging.WARNING):
        corpus = read_corpus(ncbi_like, trust_offsets=True)
    assert "line 5: the mention column differs" in caplog.text
    assert "plus" not in caplog.text  # no corpus text in the log: a corpus may be patient data
    title, abstract = corpus.sentences
    assert abstract.text[abstract.char_mentions()[1][0] : abstract.char_mentions()[1][1]] == (
        'generalized epilepsy and febrile seizures " plus "'
    )
    assert [m.concept for m in title.mentions] == ["D004829+D003294", "OMIM:277900"]
    assert [m.concept for m in abstract.mentions] == [None, "D004829+D003294"]  # "-": none


def test_a_type_map_renames_the_classes_when_reading_and_scanning(ncbi_like):
    mapping = parse_type_map(NCBI_CLASSES)
    corpus = read_corpus(ncbi_like, type_map=mapping, trust_offsets=True)
    assert corpus.types == ["Disease"] and corpus.n_mentions == 4
    summary = scan_corpus(ncbi_like, type_map=mapping, trust_offsets=True)
    assert summary.types == ["Disease"] and summary.stats == corpus.stats()
    for bad in ("SpecificDisease", "A=B C", "=Disease"):
        with pytest.raises(ValueError, match="type map item"):
            parse_type_map(bad)


def test_concepts_do_not_change_what_a_mention_is():
    """Evaluation compares spans and types: a concept never makes two mentions differ."""
    assert Mention(0, 2, "Disease", "D003920") == Mention(0, 2, "Disease")
    assert sorted([Mention(3, 4, "X", "b"), Mention(0, 1, "X", "a")])[0].concept == "a"


def test_concepts_survive_every_format_that_holds_them(ncbi_like, tmp_path):
    original = read_corpus(ncbi_like, trust_offsets=True)
    want = [[(m.start, m.end, m.label, m.concept) for m in s.mentions] for s in original]
    src = ncbi_like
    for fmt, suffix in (("jsonl", ".jsonl"), ("bioc", ".json"), ("pubtator", ".pubtator")):
        dst = tmp_path / f"via{suffix}"
        write_corpus(read_corpus(src, trust_offsets=True), dst, fmt)
        again = read_corpus(dst, fmt)
        assert [[(m.start, m.end, m.label, m.concept) for m in s.mentions] for s in again] == want
        src = dst


def test_bioc_py_reads_our_identifiers(ncbi_like, tmp_path):
    from bioc import biocjson, pubtator

    corpus = read_corpus(ncbi_like, trust_offsets=True)
    write_corpus(corpus, tmp_path / "c.json", "bioc")
    with open(tmp_path / "c.json", encoding="utf-8") as fh:
        collection = biocjson.load(fh)
    infons = [a.infons for d in collection.documents for p in d.passages for a in p.annotations]
    assert [i.get("identifier") for i in infons] == [
        "D004829+D003294",
        "OMIM:277900",
        None,
        "D004829+D003294",
    ]
    assert all(isinstance(v, str) for i in infons for v in i.values())  # infons are strings
    write_corpus(corpus, tmp_path / "c.pubtator", "pubtator")
    with open(tmp_path / "c.pubtator", encoding="utf-8") as fh:
        docs = pubtator.load(fh)
    assert [a.id for d in docs for a in d.annotations] == [
        "D004829+D003294",
        "OMIM:277900",
        "-",
        "D004829+D003294",
    ]


def test_pubtator_loader_reads_our_corpora_and_predictions(ncbi_like, tmp_path):
    """pubtator-loader (PyPI 0.1.4) refused our 5-column lines; it reads six."""
    from pubtator_loader import PubTatorCorpusReader

    corpus = read_corpus(ncbi_like, trust_offsets=True)
    write_corpus(corpus, tmp_path / "c.pubtator", "pubtator")
    docs = PubTatorCorpusReader(str(tmp_path / "c.pubtator")).load_corpus()
    got = [
        (e.start_index, e.end_index, e.text_segment, e.semantic_type_id)
        for d in docs
        for e in d.entities
    ]
    assert got == [
        (a, b, s.text[a:b], label) for s in corpus.sentences for a, b, label in s.char_mentions()
    ]
    assert [e.entity_id for d in docs for e in d.entities][:2] == ["D004829+D003294", "OMIM:277900"]
    texts = ["Cisplatin caused renal failure .", "Fever and rash ."]
    entities = [
        [Entity(0, 9, "Cisplatin", "Chemical", 0.9, 0.95, 0.95)],
        [Entity(0, 5, "Fever", "Disease", 0.6, 0.7, 0.86)],
    ]
    (tmp_path / "p.pubtator").write_text(predictions_to_pubtator(texts, entities))
    docs = PubTatorCorpusReader(str(tmp_path / "p.pubtator")).load_corpus()
    assert [
        (e.text_segment, e.semantic_type_id, e.entity_id) for d in docs for e in d.entities
    ] == [
        ("Cisplatin", "Chemical", "-"),
        ("Fever", "Disease", "-"),
    ]


LABEL_CONFIG = """<View>
  <Labels name="{from_name}" toName="{to_name}">
    <Label value="Chemical"/><Label value="Disease"/>
  </Labels>
  <Text name="{to_name}" value="$text"/>
</View>"""


@pytest.mark.parametrize(("from_name", "to_name"), [("label", "text"), ("ner", "note")])
def test_label_studio_validates_our_pre_annotations(from_name, to_name):
    """label-studio-sdk's own check of a prediction against a labelling config; the names
    follow the project's config (per request: labelstudio.from_name / to_name)."""
    from label_studio_sdk.label_interface import LabelInterface

    texts = ["Cisplatin caused renal failure .", "Nothing here ."]
    entities = [
        [
            Entity(0, 9, "Cisplatin", "Chemical", 0.9, 0.95, 0.95),
            Entity(17, 30, "renal failure", "Disease", 0.8, 0.9, 0.89),
        ],
        [],
    ]
    interface = LabelInterface(LABEL_CONFIG.format(from_name=from_name, to_name=to_name))
    tasks = predictions_to_labelstudio(texts, entities, "m-1", from_name=from_name, to_name=to_name)
    for task in tasks:
        (prediction,) = task["predictions"]
        assert interface.validate_prediction(prediction, return_errors=True) in ([], True)
        assert interface.validate_prediction(prediction) is True
    # the validator is not a rubber stamp: names the config does not have are refused
    wrong = predictions_to_labelstudio(texts, entities, "m-1", from_name="other", to_name=to_name)
    assert interface.validate_prediction(wrong[0]["predictions"][0]) is False


def test_cli_convert_type_map_and_trust_offsets(ncbi_like, tmp_path, capsys):
    out = tmp_path / "ncbi.jsonl"
    assert cli.main(["convert", str(ncbi_like), str(out)]) == 2  # the known-bad line
    code = cli.main(
        ["convert", str(ncbi_like), str(out), "--trust-offsets", "--type-map", NCBI_CLASSES]
    )
    assert code == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["types"] == ["Disease"] and summary["mentions"] == 4
    first = json.loads(out.read_text().splitlines()[0])
    assert first["entities"][1] == {
        "start": 52,
        "end": 66,
        "label": "Disease",
        "concept": "OMIM:277900",
    }
    assert cli.main(["convert", str(ncbi_like), str(out), "--type-map", "Disease"]) == 2


# -- the original releases, when the pinned cache holds them ------------------------------------
CACHE = Path(os.environ.get("MSLM_CORPUS_CACHE", Path.home() / ".cache" / "mslm" / "corpora"))


def _original(name: str, path: str) -> Path:
    found = CACHE / name / path
    if not found.exists():
        pytest.skip(
            f"{name} is not in {CACHE} (python benchmarks/bench.py fetch {name}; GitHub access "
            "or --from-git needed)"
        )
    return found


@pytest.mark.parametrize(
    ("path", "documents", "mentions"),
    [("NCBItrainset_corpus.txt", 593, 5145), ("NCBItestset_corpus.txt", 100, 960)],
)
def test_the_original_ncbi_disease_release(path, documents, mentions):
    corpus_file = _original("NCBI-disease-PubTator", path)
    if path.startswith("NCBItrain"):
        with pytest.raises(CorpusError, match="--trust-offsets") as refused:
            read_corpus(corpus_file)
        assert [i.line for i in refused.value.issues] == [3248]
    corpus = read_corpus(corpus_file, trust_offsets=True, type_map=parse_type_map(NCBI_CLASSES))
    assert len(corpus) == 2 * documents and corpus.n_mentions == mentions
    assert corpus.types == ["Disease"]
    concepts = [m.concept for s in corpus for m in s.mentions]
    assert all(concepts) and any("OMIM" in c for c in concepts)
    assert any("+" in c or "|" in c for c in concepts)  # composite identifiers kept whole


@pytest.mark.parametrize(
    ("split", "mentions"), [("Training", 9385), ("Development", 9591), ("Test", 9809)]
)
def test_the_original_bc5cdr_release(split, mentions, caplog):
    corpus_file = _original(
        "BC5CDR-PubTator", f"CDRdatasetPreprocessing/CDR_{split}Set.PubTator.txt"
    )
    with caplog.at_level(logging.WARNING):
        corpus = read_corpus(corpus_file)
    assert len(corpus) == 1000 and corpus.n_mentions == mentions
    assert corpus.types == ["Chemical", "Disease"]
    assert "relation lines not kept" in caplog.text  # the CID lines, counted
    concepts = [m.concept for s in corpus for m in s.mentions]
    assert sum(c is None for c in concepts) < 0.01 * len(concepts)  # "-1" is an id here
    assert any(c and "|" in c for c in concepts)  # composite mentions keep their ids


# -- BioC XML, through the bioc library ------------------------------------------------------------
BIOC_XML = """<?xml version='1.0' encoding='utf-8' standalone='yes'?>
<!DOCTYPE collection SYSTEM "BioC.dtd">
<collection>
  <source>PubTator</source><date>2024</date><key>BioC.key</key>
  <document>
    <id>10923035</id>
    <passage>
      <infon key="type">title</infon>
      <offset>0</offset>
      <text>Wilson disease after cisplatin.</text>
      <annotation id="1">
        <infon key="type">Disease</infon><infon key="MESH">D006527</infon>
        <location offset="0" length="14"/><text>Wilson disease</text>
      </annotation>
      <annotation id="2">
        <infon key="type">Chemical</infon><infon key="identifier">D002945</infon>
        <location offset="21" length="9"/><text>cisplatin</text>
      </annotation>
    </passage>
    <passage>
      <infon key="type">abstract</infon>
      <offset>32</offset>
      <text>No renal failure was seen.</text>
      <annotation id="3">
        <infon key="type">Disease</infon>
        <location offset="35" length="13"/><text>renal failure</text>
      </annotation>
    </passage>
  </document>
</collection>
"""


@pytest.mark.parametrize("name", ["pubtator.xml", "noext", "export.json"])
def test_bioc_xml_is_read_through_bioc(tmp_path, name):
    path = tmp_path / name
    path.write_text(BIOC_XML, encoding="utf-8")
    corpus = read_corpus(path)
    assert [s.text for s in corpus] == [
        "Wilson disease after cisplatin.",
        "No renal failure was seen.",
    ]
    assert [[(a, b, label, c) for a, b, label, c in s.linked_char_mentions()] for s in corpus] == [
        [(0, 14, "Disease", "D006527"), (21, 30, "Chemical", "D002945")],
        [(3, 16, "Disease", None)],
    ]
    assert scan_corpus(path).stats == corpus.stats()


def test_bioc_xml_we_write_is_read_by_bioc_and_by_us(tmp_path):
    from bioc import biocxml

    src = tmp_path / "in.xml"
    src.write_text(BIOC_XML, encoding="utf-8")
    corpus = read_corpus(src)
    write_corpus(corpus, tmp_path / "out.xml", "bioc")
    with open(tmp_path / "out.xml", encoding="utf-8") as fh:
        collection = biocxml.load(fh)
    annotations = [a for d in collection.documents for p in d.passages for a in p.annotations]
    assert [(a.infons["type"], a.infons.get("identifier"), a.text) for a in annotations] == [
        ("Disease", "D006527", "Wilson disease"),
        ("Chemical", "D002945", "cisplatin"),
        ("Disease", None, "renal failure"),
    ]
    again = read_corpus(tmp_path / "out.xml")
    assert [s.linked_char_mentions() for s in again] == [s.linked_char_mentions() for s in corpus]


def test_bioc_xml_refusals_name_where(tmp_path):
    xxe = BIOC_XML.replace(
        '<!DOCTYPE collection SYSTEM "BioC.dtd">',
        '<!DOCTYPE collection [<!ENTITY leak SYSTEM "file:///etc/hostname">]>',
    ).replace("<source>PubTator</source>", "<source>&leak;</source>")
    cases = {
        "entities": (xxe, "XML entity declarations are not accepted", 2),
        "broken": (
            BIOC_XML.replace("</passage>\n    <passage>", "<passage>", 1),
            "invalid XML",
            None,
        ),
        "bad type": (BIOC_XML.replace(">Chemical<", ">Chem ical<"), "documents[0]", None),
    }
    for label, (content, says, line) in cases.items():
        path = tmp_path / f"{label.replace(' ', '-')}.xml"
        path.write_text(content, encoding="utf-8")
        with pytest.raises(CorpusError) as refused:
            read_corpus(path)
        text = str(refused.value)
        assert says in text, (label, text)
        if line is not None:
            assert refused.value.issues[0].line == line


def test_label_studio_validates_the_corpora_we_write(ncbi_like, tmp_path):
    """A corpus written for Label Studio import: each annotation passes the SDK's own check
    against a config with the corpus's types."""
    from label_studio_sdk.label_interface import LabelInterface

    corpus = read_corpus(ncbi_like, trust_offsets=True, type_map=parse_type_map(NCBI_CLASSES))
    write_corpus(corpus, tmp_path / "tasks.json", "labelstudio")
    tasks = json.loads((tmp_path / "tasks.json").read_text())
    config = LABEL_CONFIG.format(from_name="label", to_name="text").replace(
        '<Label value="Chemical"/>', ""
    )
    interface = LabelInterface(config)
    assert len(tasks) == 2
    for task in tasks:  # (the SDK's validate_task calls validate_annotation without one)
        assert all(task["data"].get(o.value_name) for o in interface.objects)
        for annotation in task["annotations"]:
            assert interface.validate_annotation(annotation) is True
    # a type the config does not have is refused by the SDK
    other = LabelInterface(config.replace('value="Disease"', 'value="Chemical"'))
    assert other.validate_annotation(tasks[0]["annotations"][0]) is False
