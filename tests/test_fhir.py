"""FHIR R4 in and out (issue 61): DocumentReferences as notes, results as a Bundle of
Condition, MedicationStatement, Observation, Procedure and Provenance — each resource checked
against the R4(B) models of fhir.resources and against HL7's R4 JSON schema
(``tests/hl7_schema.py``: fetched once, pinned by sha256)."""

from __future__ import annotations

import base64
import json
import urllib.error

import hl7_schema
import pytest
from fastapi.testclient import TestClient
from service_helpers import ANNOTATE, auth, make_settings

from api.main import create_app
from mslm_core.fhir import SPAN_EXTENSION, bundle, note_resources
from mslm_core.notes import Note, NoteProblem, detect_note_format, read_notes
from mslm_core.types import Assertion, Entity, LinkedConcept

R4 = pytest.importorskip("fhir.resources.R4B")


def _validate(resource: dict) -> None:
    """The resource as fhir.resources' R4B model reads it (a ValidationError when it is not
    valid), unchanged by the round trip, and valid under HL7's R4 JSON schema."""
    from fhir.resources.R4B import get_fhir_model_class

    model = get_fhir_model_class(resource["resourceType"]).model_validate(resource)
    assert (
        model.model_dump(mode="json", exclude_none=True)["resourceType"] == resource["resourceType"]
    )
    try:
        hl7_schema.schema()
    except (urllib.error.URLError, TimeoutError) as exc:  # no registry: the models' check only
        pytest.skip(f"HL7's R4 JSON schema could not be fetched ({exc})")
    assert hl7_schema.errors(resource) == []


def test_the_hl7_schema_catches_what_r4_forbids():
    """The schema check is a real one: a wrong type, an unknown field, a missing subject, a
    code outside its value set and a Bundle entry that is no valid resource are refused,
    each with where."""
    condition = {
        "resourceType": "Condition",
        "subject": {"reference": "Patient/p1"},
        "code": {"text": "fever"},
    }
    _validate(condition)
    assert hl7_schema.errors({**condition, "onsetString": 1}) == [
        "onsetString: 1 is not of type 'string'"
    ]
    assert hl7_schema.errors({**condition, "spanText": "x"}) == [
        "(root): Additional properties are not allowed ('spanText' was unexpected)"
    ]
    assert hl7_schema.errors({k: v for k, v in condition.items() if k != "subject"}) == [
        "(root): 'subject' is a required property"
    ]
    assert hl7_schema.errors({"resourceType": "Bundle", "type": "archive"})[0].startswith(
        "type: 'archive' is not one of"
    )
    broken = {"resourceType": "Condition", "code": {"text": "x"}}
    found = hl7_schema.errors(
        {"resourceType": "Bundle", "type": "collection", "entry": [{"resource": broken}]}
    )
    assert [e.split(":")[0] for e in found] == ["entry/0/resource"]


def _entity(start, text, kind, **assertion) -> Entity:
    a = Assertion(
        **{
            k: False
            for k in ("negated", "possible", "hypothetical", "historical", "family", "allergy")
        }
        | assertion
    )
    return Entity(start, start + len(text), text, kind, 0.9, 0.9, 0.9, assertion=a)


NOTE = "No fever. History of appendectomy. Started aspirin. Troponin 0.4 ng/mL. Mother had cancer."


def _entities() -> list[Entity]:
    fever = _entity(3, "fever", "Problem", negated=True)
    fever = Entity(
        fever.start,
        fever.end,
        fever.text,
        fever.type,
        0.9,
        0.9,
        0.9,
        assertion=fever.assertion,
        concept=LinkedConcept("D005334", "Fever", 1.0, "MeSH", code="D005334"),
    )
    return [
        fever,
        _entity(NOTE.index("appendectomy"), "appendectomy", "Procedure", historical=True),
        _entity(NOTE.index("aspirin"), "aspirin", "Drug"),
        _entity(NOTE.index("Troponin"), "Troponin", "Test"),
        _entity(NOTE.index("0.4 ng/mL"), "0.4 ng/mL", "Result"),
        _entity(NOTE.index("cancer"), "cancer", "Problem", family=True),
    ]


def test_a_note_s_resources_are_valid_r4_and_say_what_the_note_says():
    resources = note_resources("note-1", _entities(), "m-1")
    for r in resources:
        _validate(r)
    kinds = [r["resourceType"] for r in resources]
    # the Result makes no resource of its own; the mother's cancer is not the subject's
    assert kinds == ["Condition", "Procedure", "MedicationStatement", "Observation", "Provenance"]
    condition, procedure, medication, observation, provenance = resources
    assert condition["verificationStatus"]["coding"][0]["code"] == "refuted"
    assert condition["code"]["coding"] == [
        {"system": "http://id.nlm.nih.gov/mesh", "code": "D005334", "display": "Fever"}
    ]
    assert condition["evidence"][0]["detail"][0]["reference"] == "DocumentReference/note-1"
    span = {
        x["url"]: next(v for k, v in x.items() if k.startswith("value"))
        for x in condition["extension"][0]["extension"]
    }
    assert condition["extension"][0]["url"] == SPAN_EXTENSION
    assert NOTE[span["start"] : span["end"]] == span["text"] == "fever"
    assert procedure["status"] == "completed" and medication["status"] == "unknown"
    assert observation["code"]["text"] == "Troponin"
    assert provenance["target"] == [
        {"reference": f"{r['resourceType']}/{r['id']}"} for r in resources[:-1]
    ]
    assert provenance["agent"][0]["who"]["display"] == "mslm model m-1"


def test_the_bundle_is_a_valid_r4_collection():
    out = bundle(
        [NOTE, "aspirin"],
        [_entities(), [_entity(0, "aspirin", "Drug", negated=True)]],
        "m-1",
        ["a", "b"],
    )
    _validate(out)
    kinds = [e["resource"]["resourceType"] for e in out["entry"]]
    assert kinds.count("Provenance") == 2
    last = out["entry"][-2]["resource"]
    assert last["status"] == "not-taken" and last["derivedFrom"] == [
        {"reference": "DocumentReference/b"}
    ]
    assert all(e["fullUrl"] == f"urn:uuid:{e['resource']['id']}" for e in out["entry"])


def _document(doc_id: str, text: str, charset: str = "utf-8") -> dict:
    data = base64.b64encode(text.encode(charset)).decode()
    return {
        "resourceType": "DocumentReference",
        "id": doc_id,
        "status": "current",
        "subject": {"reference": "Patient/p1"},
        "content": [
            {"attachment": {"contentType": f"text/plain; charset={charset}", "data": data}}
        ],
    }


def test_document_references_and_bundles_of_them_are_notes(tmp_path):
    docs = [_document("d1", "Fièvre, toux.", "latin-1"), _document("d2", "No chest pain.")]
    by_url = {
        "resourceType": "DocumentReference",
        "id": "d3",
        "status": "current",
        "content": [{"attachment": {"url": "https://ehr.example/d3"}}],
    }
    collection = {
        "resourceType": "Bundle",
        "type": "collection",
        "entry": [
            {"resource": d} for d in [*docs, by_url, {"resourceType": "Patient", "id": "p1"}]
        ],
    }
    path = tmp_path / "bundle.json"
    path.write_text(json.dumps(collection))
    assert detect_note_format(path) == "fhir"
    read = list(read_notes(path, "fhir"))
    assert read[:2] == [Note("d1", "Fièvre, toux."), Note("d2", "No chest pain.")]
    assert isinstance(read[2], NoteProblem) and "url only" in read[2].reason
    assert read[3] == NoteProblem("file, entry 4", "a Patient, not a DocumentReference", "p1")
    ndjson = tmp_path / "docs.ndjson"
    ndjson.write_text("".join(json.dumps(d) + "\n" for d in docs) + "{broken\n")
    read = list(read_notes(ndjson, "fhir"))
    assert [n.id for n in read if isinstance(n, Note)] == ["d1", "d2"]
    assert read[-1].where == "line 3" and read[-1].reason.startswith("not JSON")
    deep = tmp_path / "deep.json"
    deep.write_text('{"resourceType": "Bundle", "entry": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert list(read_notes(deep, "fhir")) == [NoteProblem("file", "JSON nested too deep")]


@pytest.fixture(scope="module")
def served(tmp_path_factory, tiny_encoder, toy_bundle):
    from service_helpers import import_and_serve

    settings = make_settings(tmp_path_factory.mktemp("fhir"), tiny_encoder)
    with TestClient(create_app(settings)) as c:
        import_and_serve(c, settings, toy_bundle)
        yield c, settings


def test_annotate_answers_a_fhir_bundle(served):
    c, _ = served
    r = c.post(
        "/v1/annotate",
        headers=auth(ANNOTATE),
        json={"texts": ["The patient has breast cancer ."], "format": "fhir"},
    )
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/fhir+json")
    body = r.json()
    _validate(body)
    assert body["entry"] and body["entry"][-1]["resource"]["resourceType"] == "Provenance"


def test_fhir_in_fhir_out(served):
    c, _ = served
    docs = [
        _document("d1", "The patient has breast cancer .", "latin-1"),
        _document("d2", "No cancer ."),
    ]
    collection = {"resourceType": "Bundle", "type": "collection"}
    collection["entry"] = [{"resource": d} for d in docs]
    headers = {**auth(ANNOTATE), "content-type": "application/fhir+json"}
    r = c.post("/v1/annotate/fhir", headers=headers, content=json.dumps(collection))
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/fhir+json")
    out = r.json()
    _validate(out)
    resources = [e["resource"] for e in out["entry"]]
    for resource in resources:
        _validate(resource)
    provenances = [x for x in resources if x["resourceType"] == "Provenance"]
    assert [p["entity"][0]["what"]["reference"] for p in provenances] == [
        "DocumentReference/d1",
        "DocumentReference/d2",
    ]
    found = [x for x in resources if x["resourceType"] != "Provenance"]
    assert found and all(x["subject"] == {"reference": "Patient/p1"} for x in found)
    # one DocumentReference alone is a note too; a Patient is a 422 that says where
    r = c.post("/v1/annotate/fhir", headers=headers, content=json.dumps(docs[1]))
    assert r.status_code == 200, r.text
    collection["entry"].append({"resource": {"resourceType": "Patient", "id": "p1"}})
    r = c.post("/v1/annotate/fhir", headers=headers, content=json.dumps(collection))
    assert r.status_code == 422
    assert r.json()["errors"] == [
        {"field": "body (file, entry 3)", "message": "a Patient, not a DocumentReference"}
    ]
    r = c.post(
        "/v1/annotate/fhir", headers=headers, content='{"resourceType": "Bundle", "entry": 7}'
    )
    assert r.status_code == 422 and "not a list" in r.text


def test_a_regimen_and_a_value_become_a_dosage_and_a_value_quantity():
    """The relation step's ties (mslm_core.relations) give MedicationStatement.dosage (dose
    as a UCUM quantity, route as SNOMED CT, timing, as-needed, duration) and
    Observation.valueQuantity, all valid R4."""
    from mslm_core.types import Attachment

    text = "metoprolol 25 mg PO BID for 3 days PRN; troponin < 0.04 ng/mL"

    def at(piece: str, kind: str, head: Entity | None = None, role: str = "") -> Entity:
        start = text.index(piece)
        tie = Attachment(head.start, head.end, role, 0.95) if head is not None else None
        return Entity(start, start + len(piece), piece, kind, 0.9, 0.9, 1.0, head=tie)

    drug, test = at("metoprolol", "Drug"), at("troponin", "Test")
    entities = [
        drug,
        at("25 mg", "Dosage", drug, "dose"),
        at("PO", "Route", drug, "route"),
        at("BID", "Frequency", drug, "frequency"),
        at("for 3 days", "Duration", drug, "duration"),
        test,
        at("< 0.04 ng/mL", "Result", test, "value"),
    ]
    med, obs, _ = note_resources("n1", entities, "m")
    for resource in (med, obs):
        _validate(resource)
    (dosage,) = med["dosage"]
    assert dosage["text"] == "25 mg PO BID for 3 days"
    assert dosage["doseAndRate"] == [
        {
            "doseQuantity": {
                "value": 25.0,
                "unit": "mg",
                "system": "http://unitsofmeasure.org",
                "code": "mg",
            }
        }
    ]
    assert dosage["route"]["coding"][0]["code"] == "26643006"
    assert dosage["timing"]["repeat"] == {
        "frequency": 2,
        "period": 1,
        "periodUnit": "d",
        "boundsDuration": {
            "value": 3.0,
            "unit": "d",
            "system": "http://unitsofmeasure.org",
            "code": "d",
        },
    }
    assert obs["valueQuantity"] == {
        "value": 0.04,
        "comparator": "<",
        "unit": "ng/mL",
        "system": "http://unitsofmeasure.org",
        "code": "ng/mL",
    }
