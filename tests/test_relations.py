"""Relations (a dose tied to its drug, a value to its test), the facts they make, and the
normalisation of their words: mslm_core.relations, facts, normalize, the regimen's parts."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import TOY_CONLL, build_tiny_encoder

from mslm_core import relations as R
from mslm_core.corpus import read_corpus
from mslm_core.errors import CorpusError
from mslm_core.facts import facts_of, relations_of
from mslm_core.normalize import duration, quantity, route, timing, ucum
from mslm_core.types import Attachment, Entity

REGIMENS = [
    ("Metoprolol 25 mg PO twice daily was started .", ["Metoprolol", "25 mg", "PO", "twice daily"]),
    (
        "She received aspirin 81 mg and heparin 5000 units .",
        ["aspirin", "81 mg", "heparin", "5000 units"],
    ),
    (
        "Troponin was 0.4 ng/mL and creatinine 1.4 mg/dL .",
        ["Troponin", "0.4 ng/mL", "creatinine", "1.4 mg/dL"],
    ),
    (
        "Lisinopril 10 mg daily and metformin 500 mg BID .",
        ["Lisinopril", "10 mg", "daily", "metformin", "500 mg", "BID"],
    ),
]
TYPES = {
    "Metoprolol": "Drug",
    "aspirin": "Drug",
    "heparin": "Drug",
    "Lisinopril": "Drug",
    "metformin": "Drug",
    "Troponin": "Test",
    "creatinine": "Test",
    "PO": "Route",
    "twice daily": "Frequency",
    "daily": "Frequency",
    "BID": "Frequency",
}


def _record(text: str, words: list[str]) -> dict:
    """A JSONL record: the words' entities (typed by TYPES, else Dosage or Result), each
    modifier tied to the nearest head before it."""
    entities, at = [], 0
    for w in words:
        start = text.index(w, at)
        at = start + len(w)
        kind = TYPES.get(w) or ("Result" if "/" in w else "Dosage")
        entities.append({"start": start, "end": at, "label": kind})
    relations = []
    for i, e in enumerate(entities):
        if e["label"] in R.ROLES:
            heads = [j for j in range(i) if entities[j]["label"] in R.ROLES[e["label"]][1]]
            relations.append({"modifier": i, "head": heads[-1]})
    return {"text": text, "entities": entities, "relations": relations}


def _entity(text: str, piece: str, kind: str, after: int = 0, head=None) -> Entity:
    start = text.index(piece, after)
    return Entity(start, start + len(piece), piece, kind, 0.9, 0.95, 0.95, head=head)


# -- normalisation ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "written, expected",
    [
        ("0.4 ng/mL", {"number": 0.4, "unit": "ng/mL", "ucum": "ng/mL"}),
        ("25 mg", {"number": 25.0, "unit": "mg", "ucum": "mg"}),
        ("250 mcg", {"number": 250.0, "unit": "mcg", "ucum": "ug"}),
        ("< 0.01", {"number": 0.01, "comparator": "<"}),
        ("120/80 mmHg", {"numbers": [120.0, 80.0], "unit": "mmHg", "ucum": "mm[Hg]"}),
        ("2-5 mg", {"low": 2.0, "high": 5.0, "unit": "mg", "ucum": "mg"}),
        ("12.1 x10^9/L", {"number": 12.1, "unit": "x10^9/L", "ucum": "10*9/L"}),
        ("10 units", {"number": 10.0, "unit": "units", "ucum": "[iU]"}),
        ("2 puffs", {"number": 2.0, "unit": "puffs", "ucum": "{puff}"}),
        ("1,200 mg", {"number": 1200.0, "unit": "mg", "ucum": "mg"}),
        ("positive", {"qualitative": "positive"}),
        ("7.2 on admission", {"number": 7.2}),
    ],
)
def test_a_value_is_a_number_with_a_ucum_unit(written, expected):
    q = quantity(written)
    assert q is not None and q.to_dict() == expected


def test_units_are_checked_against_the_ucum_grammar():
    assert ucum("mg/dL") == "mg/dL"  # valid UCUM as written
    assert ucum("mmol/L") == "mmol/L"
    assert ucum("mcg") == "ug"  # a note's spelling, through the table
    assert ucum("furlongs") is None and ucum("on") is None and ucum("") is None
    assert quantity("no value here") is None


@pytest.mark.parametrize(
    "written, expected",
    [
        ("BID", {"frequency": 2, "period": 1, "period_unit": "d"}),
        ("b.i.d.", {"frequency": 2, "period": 1, "period_unit": "d"}),
        ("twice daily", {"frequency": 2, "period": 1, "period_unit": "d"}),
        ("three times a day", {"frequency": 3, "period": 1, "period_unit": "d"}),
        ("q4h", {"frequency": 1, "period": 4, "period_unit": "h"}),
        ("q4-6h", {"frequency": 1, "period": 4, "period_unit": "h", "period_max": 6}),
        ("every 8 hours", {"frequency": 1, "period": 8, "period_unit": "h"}),
        ("qHS", {"frequency": 1, "period": 1, "period_unit": "d", "when": "HS"}),
        ("q4h PRN", {"frequency": 1, "period": 4, "period_unit": "h", "as_needed": True}),
        ("PRN", {"as_needed": True}),
        ("every other day", {"frequency": 1, "period": 2, "period_unit": "d"}),
        ("weekly", {"frequency": 1, "period": 1, "period_unit": "wk"}),
        ("x1", {"count": 1}),
        ("sometimes", None),
    ],
)
def test_a_frequency_is_a_structured_timing(written, expected):
    assert timing(written) == expected


@pytest.mark.parametrize(
    "written, expected",
    [
        ("for 3 days", "P3D"),
        ("x5 days", "P5D"),
        ("x 48 h", "PT48H"),
        ("2 weeks", "P2W"),
        ("for one month", "P1M"),
        ("5-7 days", "P7D"),
        ("for the next 2 weeks", "P2W"),
        ("x 3 doses", None),
    ],
)
def test_a_duration_is_iso_8601(written, expected):
    assert duration(written) == expected


def test_a_route_is_a_snomed_code():
    assert route("PO") == {
        "system": "http://snomed.info/sct",
        "code": "26643006",
        "display": "Oral route",
    }
    assert route("by mouth")["code"] == "26643006"
    assert route("IV")["code"] == "47625008"
    assert route("inhaled")["code"] == "447694001"
    assert route("SQ")["code"] == "34206005"
    assert route("gently") is None


# -- the facts view -----------------------------------------------------------------------------
def test_the_facts_of_a_hand_made_sentence_are_exact():
    text = "Started metoprolol 25 mg PO twice daily for 3 days; troponin 0.4 ng/mL."
    drug = _entity(text, "metoprolol", "Drug")
    test = _entity(text, "troponin", "Test")

    def tied(piece: str, kind: str, head: Entity, role: str, p: float) -> Entity:
        return _entity(text, piece, kind, head=Attachment(head.start, head.end, role, p))

    ents = [
        drug,
        tied("25 mg", "Dosage", drug, "dose", 0.98),
        tied("PO", "Route", drug, "route", 0.97),
        tied("twice daily", "Frequency", drug, "frequency", 0.96),
        tied("for 3 days", "Duration", drug, "duration", 0.9),
        test,
        tied("0.4 ng/mL", "Result", test, "value", 0.99),
    ]
    assert relations_of(ents) == [
        {"type": "dose", "head": 0, "modifier": 1, "confidence": 0.98},
        {"type": "route", "head": 0, "modifier": 2, "confidence": 0.97},
        {"type": "frequency", "head": 0, "modifier": 3, "confidence": 0.96},
        {"type": "duration", "head": 0, "modifier": 4, "confidence": 0.9},
        {"type": "value", "head": 5, "modifier": 6, "confidence": 0.99},
    ]
    facts = facts_of(ents)

    def part(i: int, tie: float = 1.0, **more) -> dict:
        e = ents[i]
        out = {"entity": i, "text": e.text, "start": e.start, "end": e.end}
        return {**out, "confidence": round(0.9 * tie, 4), **more}

    assert facts == {
        "medications": [
            {
                "drug": part(0),
                "dose": part(1, 0.98, quantity={"number": 25.0, "unit": "mg", "ucum": "mg"}),
                "route": part(2, 0.97, code=route("PO")),
                "frequency": part(
                    3, 0.96, timing={"frequency": 2, "period": 1, "period_unit": "d"}
                ),
                "duration": part(4, 0.9, iso8601="P3D"),
            }
        ],
        "measurements": [
            {
                "test": part(5),
                "value": part(6, 0.99, quantity={"number": 0.4, "unit": "ng/mL", "ucum": "ng/mL"}),
                "unit": "ng/mL",
                "number": 0.4,
                "comparator": None,
                "low": None,
                "high": None,
                "numbers": None,
                "qualitative": None,
            }
        ],
    }


def test_a_drug_without_a_regimen_is_a_medication_and_a_test_without_a_value_is_no_measurement():
    text = "On aspirin; CT pending."
    facts = facts_of([_entity(text, "aspirin", "Drug"), _entity(text, "CT", "Test")])
    assert [m["drug"]["text"] for m in facts["medications"]] == ["aspirin"]
    assert facts["medications"][0]["dose"] is None
    assert facts["measurements"] == []


# -- corpora with relations ---------------------------------------------------------------------
def test_relations_survive_the_jsonl_round_trip(tmp_path):
    from mslm_core.corpus import write_corpus

    src = tmp_path / "regimens.jsonl"
    src.write_text("".join(json.dumps(_record(t, w)) + "\n" for t, w in REGIMENS))
    corpus = read_corpus(src)
    first = corpus.sentences[0]
    assert [first.mentions[m].label for m, _ in first.relations] == ["Dosage", "Route", "Frequency"]
    assert {first.mentions[h].label for _, h in first.relations} == {"Drug"}
    again = tmp_path / "again.jsonl"
    write_corpus(corpus, again)
    assert [s.relations for s in read_corpus(again).sentences] == [
        s.relations for s in corpus.sentences
    ]


def test_a_relation_that_names_no_entity_is_an_error_with_its_line_and_field(tmp_path):
    bad = _record(*REGIMENS[0])
    bad["relations"][1]["head"] = 9
    src = tmp_path / "bad.jsonl"
    src.write_text(json.dumps(_record(*REGIMENS[1])) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(CorpusError) as caught:
        read_corpus(src)
    assert caught.value.issues[0].line == 2
    assert caught.value.issues[0].field == "relations[1].head"
    assert "index of one of the 4 entities" in caught.value.issues[0].message


def test_a_type_map_that_drops_an_end_drops_its_relation(tmp_path):
    from mslm_core.typemap import TypeMap

    src = tmp_path / "regimens.jsonl"
    src.write_text(json.dumps(_record(*REGIMENS[0])) + "\n")
    sentence = read_corpus(src).sentences[0]
    mapped = TypeMap.parse({"Route": None}, "type_map").apply([sentence])[0]
    assert [m.label for m in mapped.mentions] == ["Drug", "Dosage", "Frequency"]
    assert mapped.relations == [(1, 0), (2, 0)]


def test_brat_modify_relations_become_records_with_relations(tmp_path):
    from mslm_core.corpora.brat import document_records, read_brat

    text = "Aspirin 81 mg was given; hemoglobin was 8.2 g/dL.\n"
    (tmp_path / "d.txt").write_text(text)
    spans = [("Medication", "Aspirin"), ("Dosage", "81 mg"), ("Diagnostic_procedure", "hemoglobin")]
    spans.append(("Lab_value", "8.2 g/dL"))
    lines = []
    for i, (kind, piece) in enumerate(spans, 1):
        a = text.index(piece)
        lines.append(f"T{i}\t{kind} {a} {a + len(piece)}\t{piece}")
    lines += ["E1\tMedication:T1", "R1\tMODIFY Arg1:T2 Arg2:E1", "R2\tMODIFY Arg1:T4 Arg2:T3"]
    (tmp_path / "d.ann").write_text("\n".join(lines) + "\n")
    records, counts = document_records(read_brat(tmp_path / "d.txt"), [k for k, _ in spans])
    assert records[0]["relations"] == [{"modifier": 1, "head": 0}, {"modifier": 3, "head": 2}]
    assert counts["relations"] == 2


# -- the scorer ---------------------------------------------------------------------------------
def _sentences() -> list[R.Sentence]:
    out = []
    for text, words in REGIMENS * 3:
        r = _record(text, words)
        ents = [(e["start"], e["end"], e["label"]) for e in r["entities"]]
        out.append(R.Sentence(text, ents, [(x["modifier"], x["head"]) for x in r["relations"]]))
    return out


@pytest.fixture(scope="module")
def scorer() -> R.RelationScorer:
    return R.train(R.corpus_examples(_sentences()), seed=1, epochs=60)


def test_the_scorer_ties_each_dose_to_its_own_drug_and_is_the_same_after_saving(scorer, tmp_path):
    text = "Aspirin 81 mg and heparin 5000 units were given."
    ents = [
        _entity(text, "Aspirin", "Drug"),
        _entity(text, "81 mg", "Dosage"),
        _entity(text, "heparin", "Drug"),
        _entity(text, "5000 units", "Dosage"),
    ]
    tied = scorer.attach(text, ents)
    assert [(e.head.start, e.head.role) if e.head else None for e in tied] == [
        None,
        (0, "dose"),
        None,
        (text.index("heparin"), "dose"),
    ]
    assert all(0.5 < e.head.confidence <= 1 for e in tied if e.head)
    scorer.save(tmp_path / "bundle")
    assert sorted(p.name for p in (tmp_path / "bundle").iterdir()) == sorted(R.FILES)
    again = R.RelationScorer.load(tmp_path / "bundle")
    rows = R.corpus_examples(_sentences())[0].rows
    np.testing.assert_allclose(again.scores(rows), scorer.scores(rows), rtol=1e-6)
    # the ONNX graph computes what the weights say
    w = scorer.weights
    by_hand = (
        np.maximum(rows @ w["l1.weight"].T + w["l1.bias"], 0) @ w["l2.weight"].T + w["l2.bias"]
    )
    np.testing.assert_allclose(scorer.scores(rows), by_hand.reshape(-1), rtol=1e-4, atol=1e-5)


def test_the_scorer_beats_nothing_but_is_measured_like_the_baseline(scorer):
    acc = R.accuracy(scorer, R.corpus_examples(_sentences()))
    assert acc["Dosage→Drug"]["accuracy"] == 1.0
    assert acc["Dosage→Drug"]["n"] == 15  # five doses, three times
    assert set(acc) == {"Dosage→Drug", "Route→Drug", "Frequency→Drug", "Result→Test"}


def test_a_scorer_of_another_feature_set_is_refused(tmp_path, scorer):
    from mslm_core.errors import ConfigError

    weights = dict(scorer.weights)
    weights["l1.weight"] = weights["l1.weight"][:, :10]
    with pytest.raises(ConfigError, match="reads 10 features"):
        R.RelationScorer.from_weights(weights)
    with pytest.raises(ConfigError, match="reads 10 features"):
        R.RelationScorer(scorer.graph, {"features": 10})
    (tmp_path / "relations.json").write_text('{"format": "other"}')
    with pytest.raises(ConfigError, match="format 'other'"):
        R.RelationScorer.load(tmp_path)


def test_the_baseline_takes_the_nearest_head_of_a_type_it_may_modify():
    text = "Aspirin 81 mg and heparin 5000 units."
    ents = [
        _entity(text, "Aspirin", "Drug"),
        _entity(text, "81 mg", "Dosage"),
        _entity(text, "heparin", "Drug"),
        _entity(text, "5000 units", "Dosage"),
    ]
    assert R.nearest_head(text, ents) == [(1, 0), (3, 2)]


# -- the regimen's parts ------------------------------------------------------------------------
def test_a_dosage_span_is_cut_into_its_regimen_parts_for_a_model_that_has_them():
    from mslm_core.regimen import doses

    text = "metoprolol 25 mg PO twice daily"
    span = _entity(text, "25 mg PO twice daily", "Dosage")
    found = doses(text, [_entity(text, "metoprolol", "Drug"), span], ("Route", "Frequency"))
    assert [(e.text, e.type) for e in found] == [
        ("metoprolol", "Drug"),
        ("25 mg", "Dosage"),
        ("PO", "Route"),
        ("twice daily", "Frequency"),
    ]
    # a model without those types: the dose only, as before
    assert [e.text for e in doses(text, [span])] == ["25 mg"]


# -- a job trains relations ---------------------------------------------------------------------
def test_a_multi_corpus_job_with_relations_trains_its_scorer_into_the_bundle(tmp_path, toy_corpus):
    from mslm_core.config import TrainConfig
    from mslm_core.pipeline import AnnotationPipeline
    from mslm_core.train import train

    regimens = tmp_path / "regimens.jsonl"
    regimens.write_text("".join(json.dumps(_record(t, w)) + "\n" for t, w in REGIMENS * 2))
    words = [line.split("\t")[0] for line in TOY_CONLL.splitlines() if line.strip()]
    words += [w for t, _ in REGIMENS for w in t.split()]
    encoder = build_tiny_encoder(tmp_path / "enc", words)
    sources = [
        {"name": "regimens", "train": str(regimens), "dev": str(regimens)},
        {"name": "toy", "train": str(toy_corpus), "dev": str(toy_corpus)},
    ]
    cfg = TrainConfig(
        sources=sources,
        base_model=str(encoder),
        epochs=2,
        batch_size=4,
        learning_rate=3e-3,
        warmup_ratio=0.0,
        patience=None,
        seed=5,
        strategy="vanilla",
    )
    out = tmp_path / "bundle"
    train(cfg, out)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["relations"]["corpora"] == ["regimens"]  # toy annotates none
    assert set(R.FILES) <= set(manifest["files"])  # checksummed, verified when loaded
    assert manifest["relations"]["examples"] == 22  # 11 modifiers, twice
    assert {"Dosage→Drug", "Result→Test"} <= set(manifest["relations"]["dev_accuracy"])
    pipe = AnnotationPipeline.from_bundle(out, backend="torch", device="cpu")
    assert pipe.relations is not None
    text = "Metoprolol 25 mg PO twice daily was started ."
    tied = pipe.relations.attach(
        text, [_entity(text, "Metoprolol", "Drug"), _entity(text, "25 mg", "Dosage")]
    )
    assert tied[1].head is not None and tied[1].head.start == 0


def test_relations_with_no_candidate_head_train_a_model_without_a_scorer(tmp_path, caplog):
    # a small subset of a corpus (MACCROBAT2020's first 100 sentences): its relations tie
    # modifiers to heads the schema does not keep, so no modifier has a candidate head
    from mslm_core.config import TrainConfig
    from mslm_core.pipeline import AnnotationPipeline
    from mslm_core.train import train

    text = "Dialysis three times weekly was continued ."
    record = {
        "text": text,
        "entities": [
            {"start": 0, "end": 8, "label": "Procedure"},
            {"start": 9, "end": 27, "label": "Frequency"},
        ],
        "relations": [{"modifier": 1, "head": 0}],
    }
    corpus = tmp_path / "dialysis.jsonl"
    corpus.write_text((json.dumps(record) + "\n") * 4)
    cfg = TrainConfig(
        train=str(corpus),
        dev=str(corpus),
        base_model=str(build_tiny_encoder(tmp_path / "enc", text.split())),
        epochs=1,
        batch_size=4,
        warmup_ratio=0.0,
        patience=None,
        strategy="vanilla",
    )
    out = tmp_path / "bundle"
    with caplog.at_level("WARNING", logger="mslm_core"):
        train(cfg, out)
    assert "none with a candidate head" in caplog.text
    manifest = json.loads((out / "manifest.json").read_text())
    assert "relations" not in manifest and not set(R.FILES) & set(manifest["files"])
    assert AnnotationPipeline.from_bundle(out, backend="torch", device="cpu").relations is None


def test_a_bundle_without_relations_answers_none(toy_bundle):
    from mslm_core.pipeline import AnnotationPipeline

    pipe = AnnotationPipeline.from_bundle(toy_bundle, backend="torch", device="cpu")
    assert pipe.relations is None
    body = pipe.render(["aspirin"], pipe(["aspirin"])).body
    assert body["results"][0]["relations"] == []
    assert set(body["results"][0]["facts"]) == {"medications", "measurements"}


def test_a_modifiers_note_nlp_row_names_its_head_and_its_normalised_value():
    from mslm_core.omop import parse_modifiers, term_modifiers

    text = "metoprolol 25 mg PO BID"
    drug = _entity(text, "metoprolol", "Drug")
    tie = Attachment(drug.start, drug.end, "dose", 0.97)
    dose = parse_modifiers(term_modifiers(_entity(text, "25 mg", "Dosage", head=tie)))
    assert dose["relation"] == "dose" and dose["head"] == "0-10"
    assert dose["relation_confidence"] == "0.9700"
    assert (dose["number"], dose["ucum"]) == ("25", "mg")
    tie = Attachment(drug.start, drug.end, "frequency", 0.9)
    freq = parse_modifiers(term_modifiers(_entity(text, "BID", "Frequency", head=tie)))
    assert (freq["frequency"], freq["period"], freq["period_unit"]) == ("2", "1", "d")
    assert "relation" not in parse_modifiers(term_modifiers(drug))  # a head names no head


def test_relations_survive_the_label_studio_round_trip_and_its_pre_annotations(tmp_path):
    from mslm_core.corpus import write_corpus
    from mslm_core.corpus.labelstudio import predictions_to_labelstudio

    src = tmp_path / "regimens.jsonl"
    src.write_text("".join(json.dumps(_record(t, w)) + "\n" for t, w in REGIMENS))
    corpus = read_corpus(src)
    exported = tmp_path / "tasks.json"
    write_corpus(corpus, exported, format="labelstudio")
    tasks = json.loads(exported.read_text())
    links = [r for r in tasks[0]["annotations"][0]["result"] if r["type"] == "relation"]
    assert links[0] == {"type": "relation", "from_id": "e1", "to_id": "e0", "direction": "right"}
    again = read_corpus(exported, format="labelstudio")
    assert [s.relations for s in again.sentences] == [s.relations for s in corpus.sentences]
    # drawn from the head to the modifier, and left-pointing: the modifier is still the dose
    for r in tasks[0]["annotations"][0]["result"]:
        if r["type"] == "relation":
            r.update(from_id=r["to_id"], to_id=r["from_id"], direction="left")
    exported.write_text(json.dumps(tasks))
    assert read_corpus(exported, format="labelstudio").sentences[0].relations == [
        (1, 0),
        (2, 0),
        (3, 0),
    ]
    text = "Aspirin 81 mg"
    drug = _entity(text, "Aspirin", "Drug")
    dose = _entity(text, "81 mg", "Dosage", head=Attachment(0, 7, "dose", 0.9))
    result = predictions_to_labelstudio([text], [[drug, dose]], "m")[0]["predictions"][0]["result"]
    assert result[-1] == {"type": "relation", "from_id": "e1", "to_id": "e0", "direction": "right"}


def test_a_label_studio_relation_to_no_region_is_counted_as_not_kept(tmp_path, caplog):
    region = {"start": 0, "end": 7, "labels": ["Drug"]}
    task = {
        "data": {"text": "Aspirin 81 mg"},
        "annotations": [
            {
                "result": [
                    {"id": "a", "type": "labels", "value": region},
                    {"type": "relation", "from_id": "zz", "to_id": "a", "direction": "right"},
                ]
            }
        ],
    }
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps([task]))
    assert read_corpus(path, format="labelstudio").sentences[0].relations == []
    assert "results other than labels not kept: 1 relation" in caplog.text


def test_relations_survive_the_bioc_round_trip_json_and_xml_and_its_predictions(tmp_path):
    from mslm_core.corpus import write_corpus
    from mslm_core.corpus.bioc import predictions_to_bioc

    src = tmp_path / "regimens.jsonl"
    src.write_text("".join(json.dumps(_record(t, w)) + "\n" for t, w in REGIMENS))
    corpus = read_corpus(src)
    for name in ("c.bioc.json", "c.xml"):
        write_corpus(corpus, tmp_path / name, format="bioc")
        again = read_corpus(tmp_path / name, format="bioc")
        assert [s.relations for s in again.sentences] == [s.relations for s in corpus.sentences]
    text = "Aspirin 81 mg"
    drug = _entity(text, "Aspirin", "Drug")
    dose = _entity(text, "81 mg", "Dosage", head=Attachment(0, 7, "dose", 0.9))
    passage = predictions_to_bioc([text], [[drug, dose]], "m")["documents"][0]["passages"][0]
    assert passage["relations"] == [
        {
            "id": "R0",
            "infons": {"type": "dose", "confidence": "0.9"},
            "nodes": [{"refid": "1", "role": "modifier"}, {"refid": "0", "role": "head"}],
        }
    ]


def test_a_bundle_whose_scorer_this_version_cannot_read_serves_its_entities(
    toy_bundle, tmp_path, scorer, caplog
):
    import shutil

    from mslm_core.bundle import add_files
    from mslm_core.pipeline import AnnotationPipeline

    bundle = tmp_path / "bundle"
    shutil.copytree(toy_bundle, bundle)
    scorer.save(tmp_path / "scorer")
    meta = json.loads((tmp_path / "scorer" / "relations.json").read_text())
    (tmp_path / "scorer" / "relations.json").write_text(json.dumps({**meta, "features": 7}))
    add_files(bundle, {n: tmp_path / "scorer" / n for n in R.FILES}, {})
    pipe = AnnotationPipeline.from_bundle(bundle, backend="torch", device="cpu")
    assert pipe.relations is None and pipe(["aspirin"]) is not None
    assert "its relation scorer is not served" in caplog.text
    assert "the relation scorer reads 7 features" in caplog.text


def test_a_drugs_line_gives_the_regimen_the_model_missed_and_ties_it(scorer):
    from mslm_core.regimen import chained
    from mslm_core.shorthand import ShorthandFinder

    text = "- Metoprolol 25 mg PO BID\n- Albuterol q4h PRN. Walk daily."
    parts = ("Dosage", "Route", "Frequency", "Duration")
    found = chained(
        text,
        [
            _entity(text, "Metoprolol", "Drug"),
            _entity(text, "25 mg", "Dosage"),
            _entity(text, "Albuterol", "Drug"),
        ],
        parts,
    )
    assert [(e.text, e.type) for e in found] == [
        ("Metoprolol", "Drug"),
        ("25 mg", "Dosage"),
        ("PO", "Route"),
        ("BID", "Frequency"),  # never past the line break
        ("Albuterol", "Drug"),
        ("q4h", "Frequency"),
        ("PRN", "Frequency"),  # never past the full stop: "daily" stays a word
    ]
    assert found[3].confidence == found[0].confidence  # the drug's scores
    # shorthand that stands for no entity ("PRN") stays when it is a regimen's part
    kept = ShorthandFinder({"Drug", "Dosage", "Frequency"}).merged(text, found)
    assert ("PRN", "Frequency") in [(e.text, e.type) for e in kept]
    # a modifier written right after its drug is tied to it even where the scorer would
    # give it no head
    tied = scorer.attach(text, found)
    assert [(e.text, e.head.role) for e in tied if e.head and e.head.start == 2] == [
        ("25 mg", "dose"),
        ("PO", "route"),
        ("BID", "frequency"),
    ]


def test_the_regimen_and_the_value_take_their_heads_context(scorer):
    """In "no aspirin 81 mg" the dose is negated with its drug; a value is its test's (a
    measured test is present); a modifier whose head the context does not reach stays as
    its head is."""
    from mslm_core.context import ContextEngine, default_rules
    from mslm_core.pipeline import AnnotationPipeline

    pipeline = AnnotationPipeline(None, ContextEngine(default_rules()))  # type: ignore[arg-type]
    pipeline.relations = scorer
    text = "No aspirin 81 mg. Started heparin 5000 units. Mother on metformin 500 mg."
    ents = [
        _entity(text, "aspirin", "Drug"),
        _entity(text, "81 mg", "Dosage"),
        _entity(text, "heparin", "Drug"),
        _entity(text, "5000 units", "Dosage"),
        _entity(text, "metformin", "Drug"),
        _entity(text, "500 mg", "Dosage"),
    ]
    out = pipeline.postprocess([text], [ents])[0]
    assert [e.head.start if e.head else None for e in out[1::2]] == [
        text.index(drug) for drug in ("aspirin", "heparin", "metformin")
    ]
    aspirin, dose = out[0].assertion, out[1].assertion
    assert aspirin is not None and aspirin.negated and dose == aspirin  # with its cue
    assert out[2].assertion.present and out[3].assertion.present
    assert out[4].assertion.family and out[5].assertion.family
    # NOTE_NLP: the dose of a drug the note says was not given does not exist either
    from mslm_core.omop import term_exists

    assert [term_exists(e) for e in out] == ["N", "N", "Y", "Y", "N", "N"]
    # without the context step nothing is asserted, tied or not
    plain = AnnotationPipeline(None)  # type: ignore[arg-type]
    plain.relations = scorer
    assert all(e.assertion is None for e in plain.postprocess([text], [ents])[0])
