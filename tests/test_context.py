"""The ConText engine (mslm_core.context): trigger directions, scopes, terminators,
pseudo-triggers, sentence and line limits, exact offsets, rules files and the renderers."""

from __future__ import annotations

import json

import pytest

from mslm_core.context import ContextEngine, default_rules, load_rules, rules_for
from mslm_core.context.rules import parse_rules
from mslm_core.corpus.bioc import predictions_to_bioc
from mslm_core.corpus.labelstudio import predictions_to_labelstudio
from mslm_core.errors import ConfigError
from mslm_core.types import ASSERTION_ATTRIBUTES, Entity

DEFAULT = ContextEngine.default()


def ents(text: str, *spans: str | tuple[str, int] | tuple[str, int, str]) -> list[Entity]:
    """Entities at the first (or ``nth``) occurrence of each span; type Disease unless given."""
    out = []
    for span in spans:
        word, nth, etype = (span, 0, "Disease") if isinstance(span, str) else (*span, "Disease")[:3]
        at = -1
        for _ in range(nth + 1):
            at = text.index(word, at + 1)
        out.append(Entity(at, at + len(word), word, etype, 0.9, 0.95, 0.95))
    return out


def context(text: str, *spans, engine: ContextEngine = DEFAULT) -> dict[str, set[str]]:
    """entity text → the attributes set on it (``{"present"}`` when none)."""
    out = {}
    for e in engine.apply(text, ents(text, *spans)):
        a = e.assertion
        found = {k for k in ASSERTION_ATTRIBUTES if getattr(a, k)}
        out[e.text] = found or {"present"}
    return out


def engine_of(*rules: dict, max_scope: int | None = None) -> ContextEngine:
    return ContextEngine(parse_rules({"max_scope": max_scope, "rules": list(rules)}, "test"))


NEG_FWD = {"literal": "no", "category": "NEGATED_EXISTENCE", "direction": "FORWARD"}


# -- the issue's three sentences ----------------------------------------------------------------
def test_the_three_clinical_sentences():
    text = "No evidence of pneumonia or pulmonary embolism."
    assert context(text, "pneumonia", "pulmonary embolism") == {
        "pneumonia": {"negated"},
        "pulmonary embolism": {"negated"},
    }
    text = "Mother had breast cancer; patient denies chest pain."
    assert context(text, "breast cancer", "chest pain") == {
        "breast cancer": {"family"},
        "chest pain": {"negated"},
    }
    text = (
        "Rule out myocardial infarction. History of type 2 diabetes mellitus, on metformin "
        "500 mg BID."
    )
    got = context(
        text, "myocardial infarction", "type 2 diabetes mellitus", ("metformin", 0, "Chemical")
    )
    assert got == {
        "myocardial infarction": {"hypothetical"},
        "type 2 diabetes mellitus": {"historical"},
        "metformin": {"present"},
    }


# -- directions -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Patient denies pneumonia.", {"negated"}),  # forward
        ("Pneumonia was ruled out.", {"negated"}),  # backward
        ("Pneumonia unlikely.", {"negated"}),  # backward (negspacy's following negations)
        ("Possible pneumonia.", {"possible"}),
        ("Pneumonia cannot be excluded.", {"possible"}),  # a pseudo-negation that is uncertainty
        ("If he develops pneumonia, return to clinic.", {"hypothetical"}),
        ("He has a family history of pneumonia.", {"family"}),
        ("Pneumonia in his father at 60.", {"family"}),  # backward family
        ("Status post pneumonia in 2019.", {"historical"}),
        ("Patient presents with pneumonia.", {"present"}),
    ],
)
def test_trigger_kinds_of_the_default_rules(text, expected):
    word = "pneumonia" if "pneumonia" in text else "Pneumonia"
    assert context(text, word) == {word: expected}


def test_bidirectional_reaches_both_sides():
    both = engine_of(
        {"literal": "declined", "category": "NEGATED_EXISTENCE", "direction": "BIDIRECTIONAL"}
    )
    text = "Chemotherapy declined by patient, and radiotherapy."
    assert context(text, "Chemotherapy", "radiotherapy", engine=both) == {
        "Chemotherapy": {"negated"},
        "radiotherapy": {"negated"},
    }
    forward = engine_of(
        {"literal": "declined", "category": "NEGATED_EXISTENCE", "direction": "FORWARD"}
    )
    assert context(text, "Chemotherapy", engine=forward) == {"Chemotherapy": {"present"}}


# -- scope ----------------------------------------------------------------------------------------
def test_scope_stops_at_the_sentence_and_at_a_line_break():
    text = "No fever. Cough for two days.\nRash on both arms"
    assert context(text, "fever", "Cough", "Rash") == {
        "fever": {"negated"},
        "Cough": {"present"},
        "Rash": {"present"},
    }
    text = "Denies:\nchest pain"  # a list item on the next line is its own unit
    assert context(text, "chest pain") == {"chest pain": {"present"}}


def test_max_scope_counts_words_not_punctuation():
    engine = engine_of(NEG_FWD, max_scope=3)
    text = "no a - b - c - target here"  # 'target' is the 4th word after the trigger
    assert context(text, "target", engine=engine) == {"target": {"present"}}
    text = "no a - b - target here"  # the 3rd word, punctuation between them
    assert context(text, "target", engine=engine) == {"target": {"negated"}}
    rule = {**NEG_FWD, "max_scope": 1}  # a rule's own max_scope wins over the set's
    assert context("no big target", "target", engine=engine_of(rule, max_scope=10)) == {
        "target": {"present"}
    }


def test_a_long_list_after_a_negation_is_negated_within_the_default_scope():
    text = "Denies fever, chills, night sweats, nausea, vomiting or diarrhea."
    got = context(text, "fever", "chills", "night sweats", "nausea", "vomiting", "diarrhea")
    assert set(map(frozenset, got.values())) == {frozenset({"negated"})}


def test_a_list_carries_the_negation_past_the_word_limit_but_a_clause_does_not():
    """Issue 31: "denies fever, chills, …" past max_scope words keeps its negation to the
    list's end; a longer stretch after a separator is a new clause, and the scope ends."""
    text = (
        "Patient denies fever, chills, nausea, vomiting, diarrhea, abdominal pain, dysuria, "
        "hematuria, or rash."
    )
    assert context(text, "rash", "hematuria") == {"rash": {"negated"}, "hematuria": {"negated"}}
    text = "No fever, chills or sweats, and the patient reports a productive cough since May."
    got = context(text, "sweats", "cough")
    assert got == {"sweats": {"negated"}, "cough": {"present"}}
    engine = engine_of(NEG_FWD, max_scope=2)
    assert context("no a , b , c , d", "d", engine=engine) == {"d": {"negated"}}
    assert context("no a b c d", "d", engine=engine) == {"d": {"present"}}


def test_a_shorter_cue_whose_scope_runs_the_other_way_is_kept():
    """Issue 31: "EXTREMITIES: No edema" lost its negation to the longer ': no' (backward)."""
    assert context("EXTREMITIES: No edema.", "edema") == {"edema": {"negated"}}
    assert context("Pain: no", "Pain") == {"Pain": {"negated"}}


def test_an_entity_holding_the_trigger_is_not_modified_by_it():
    text = "No-reflow phenomenon after stenting."
    assert context(text, "No-reflow phenomenon") == {"No-reflow phenomenon": {"present"}}


# -- terminators ----------------------------------------------------------------------------------
def test_terminators_end_the_scope_of_their_category_only():
    text = "Patient denies fever but reports cough."
    assert context(text, "fever", "cough") == {"fever": {"negated"}, "cough": {"present"}}
    rules = [
        NEG_FWD,
        {"literal": "history of", "category": "HISTORICAL", "direction": "FORWARD"},
        {"literal": "but", "category": "NEGATED_EXISTENCE", "direction": "TERMINATE"},
    ]
    engine = engine_of(*rules)
    text = "history of no asthma but eczema"
    assert context(text, "asthma", "eczema", engine=engine) == {
        "asthma": {"negated", "historical"},
        "eczema": {"historical"},  # 'but' ends the negation, not the history
    }
    backward = engine_of(
        {"literal": "was ruled out", "category": "NEGATED_EXISTENCE", "direction": "BACKWARD"},
        {"literal": "but", "category": "ALL", "direction": "TERMINATE"},
    )
    text = "asthma but eczema was ruled out"
    assert context(text, "asthma", "eczema", engine=backward) == {
        "asthma": {"present"},
        "eczema": {"negated"},
    }


def test_terminated_by_another_category():
    rule = {**NEG_FWD, "terminated_by": ["POSSIBLE_EXISTENCE"]}
    possible = {"literal": "possible", "category": "POSSIBLE_EXISTENCE", "direction": "FORWARD"}
    text = "no rash , possible eczema"
    assert context(text, "rash", "eczema", engine=engine_of(rule, possible)) == {
        "rash": {"negated"},
        "eczema": {"possible"},
    }
    assert context(text, "eczema", engine=engine_of(NEG_FWD, possible)) == {
        "eczema": {"negated", "possible"}
    }


# -- pseudo-triggers ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "word"),
    [
        ("There was no increase in edema.", "edema"),
        ("Not only fever but also rash.", "fever"),
        ("Gram negative bacteremia.", "bacteremia"),
        ("No change in the effusion.", "effusion"),
    ],
)
def test_pseudo_triggers_negate_nothing(text, word):
    assert "negated" not in context(text, word)[word]


def test_not_ruled_out_is_uncertain_not_negated():
    assert context("Sepsis has not been ruled out.", "Sepsis") == {"Sepsis": {"possible"}}
    assert context("Sepsis was ruled out.", "Sepsis") == {"Sepsis": {"negated"}}


# -- issue 31: the error classes found on discharge notes ---------------------------------------
@pytest.mark.parametrize(
    ("text", "word", "expected"),
    [
        # pseudo-triggers: a negation word that negates nothing
        ("No further workup for syncope.", "syncope", {"present"}),
        ("No further episodes of syncope.", "syncope", {"negated"}),
        ("Not only fever but also rash.", "rash", {"present"}),
        ("Diseases including, but not limited to, diabetes.", "diabetes", {"present"}),
        ("Back pain with or without spinal claudication.", "spinal claudication", {"present"}),
        ("Developmental disorder not otherwise specified.", "Developmental disorder", {"present"}),
        ("This medication did not relieve his dyspnea.", "dyspnea", {"present"}),
        ("Pain not relieved by morphine.", "Pain", {"present"}),
        ("He could not tolerate the nausea.", "nausea", {"present"}),
        # terminators: what the patient has ends a negation's scope
        ("Negative for fever, positive for cough.", "cough", {"present"}),
        ("Denies fever, reports cough.", "cough", {"present"}),
        ("Denies fever but has cough.", "cough", {"present"}),
        # words that are not negations here
        ("Pneumonia versus atelectasis.", "atelectasis", {"possible"}),
        ("Pneumonia versus atelectasis.", "Pneumonia", {"possible"}),
        ("Chest clear, mild wheezing on the right.", "wheezing", {"present"}),
        # pseudo-triggers and terminators of the other categories
        ("Follow up as soon as possible for the rash.", "rash", {"present"}),
        ("Possible pneumonia, confirmed by CT, and effusion.", "effusion", {"present"}),
        ("Tylenol if needed and ice for the pain.", "pain", {"present"}),
        ("HISTORY OF PRESENT ILLNESS: The patient reports chest pain.", "chest pain", {"present"}),
        ("Plan discussed with family, patient reports headache.", "headache", {"present"}),
        ("Her family physician noted a rash.", "rash", {"present"}),
        # uncertainty as case reports write it
        (
            "Biopsy findings suggesting a mitochondrial disorder.",
            "mitochondrial disorder",
            {"possible"},
        ),
        ("A diagnosis of hepatoblastoma was considered.", "hepatoblastoma", {"possible"}),
        # resolved problems are in the past
        ("Her pneumonia has resolved.", "pneumonia", {"historical"}),
        ("Resolved pneumonia.", "pneumonia", {"historical"}),
        # a history ends where the presentation begins
        ("With a history of asthma presented with dyspnea.", "dyspnea", {"present"}),
        ("With a history of asthma presented with dyspnea.", "asthma", {"historical"}),
        # instructions are hypothetical
        ("Return if fever recurs.", "fever", {"hypothetical"}),
        ("Should you develop chest pain, call 911.", "chest pain", {"hypothetical"}),
        ("Call for worsening shortness of breath.", "shortness of breath", {"hypothetical"}),
        # allergies
        ("Allergic to penicillin.", "penicillin", {"allergy"}),
        ("Penicillin allergy.", "Penicillin", {"allergy"}),
        ("No known allergies. Pneumonia present.", "Pneumonia", {"present"}),
    ],
)
def test_the_error_classes_of_issue_31(text, word, expected):
    assert context(text, word) == {word: expected}


NOTE = """HISTORY OF PRESENT ILLNESS: 58 y/o man with chest pain since Monday.
PAST MEDICAL HISTORY:
1. Diabetes mellitus
2. Hypertension
FAMILY HISTORY: Mother with breast cancer.
ALLERGIES: penicillin
MEDICATIONS: metformin.
ROS: Denies fever, chills, nausea, vomiting, diarrhea, constipation, dysuria, hematuria, or rash.
A/P: Chest pain, rule out myocardial infarction. Stable. Social history: smoker."""


def test_sections_name_every_entity_and_set_what_they_say():
    spans = [
        "chest pain",
        "Diabetes mellitus",
        "Hypertension",
        "breast cancer",
        ("penicillin", 0, "Drug"),
        ("metformin", 0, "Drug"),
        "rash",
        "myocardial infarction",
        "smoker",
    ]
    out = {e.text: e for e in DEFAULT.apply(NOTE, ents(NOTE, *spans))}
    sections = {k: e.section for k, e in out.items()}
    assert sections == {
        "chest pain": "history_of_present_illness",
        "Diabetes mellitus": "past_medical_history",
        "Hypertension": "past_medical_history",
        "breast cancer": "family_history",
        "penicillin": "allergy",
        "metformin": "medications",
        "rash": "review_of_systems",
        "myocardial infarction": "observation_and_plan",
        "smoker": "social_history",  # a header after a sentence's end, with its colon
    }
    flags = {
        k: {a for a in ASSERTION_ATTRIBUTES if getattr(e.assertion, a)} for k, e in out.items()
    }
    assert flags["chest pain"] == set() and flags["metformin"] == set()
    assert flags["Diabetes mellitus"] == flags["Hypertension"] == {"historical"}
    assert flags["breast cancer"] == {"family"}
    assert flags["penicillin"] == {"allergy"}
    assert flags["rash"] == {"negated"}  # the list keeps its negation to its end
    assert flags["myocardial infarction"] == {"hypothetical"}
    # the header is the cue, with its exact offsets, after the triggers
    cue = out["Diabetes mellitus"].assertion.cues[-1]
    assert (cue.attribute, cue.text) == ("historical", "PAST MEDICAL HISTORY")
    assert NOTE[cue.start : cue.end] == cue.text
    # a header that is a trigger too is named once
    assert [c.text for c in out["breast cancer"].assertion.cues].count("FAMILY HISTORY") <= 1


def test_a_header_is_a_header_only_where_headers_stand():
    text = "The plan was discussed with the family history of the patient.\nPlan: aspirin"
    found = [(s.category, s.header) for s in DEFAULT.sectionizer.find(text)]
    assert found == [("observation_and_plan", "Plan")]
    # no colon mid-line, or a word that merely starts like a header: no section
    assert DEFAULT.sectionizer.find("He takes medications daily. Planning: soon") == []
    out = DEFAULT.apply("Asthma.", ents("Asthma.", "Asthma"))
    assert out[0].section is None  # before any header


def test_a_family_finding_under_a_history_header_is_not_the_patients_past():
    text = "PMH: asthma; mother with breast cancer."
    got = context(text, "asthma", "breast cancer")
    assert got == {"asthma": {"historical"}, "breast cancer": {"family"}}


def test_a_site_adds_sections_and_what_they_set(tmp_path):
    site = tmp_path / "site.json"
    site.write_text(
        json.dumps(
            {
                "sections": [{"literal": "Antecedents", "category": "past_medical_history"}],
                "section_attributes": {"obstetric_history": "historical"},
            }
        )
    )
    engine = ContextEngine(rules_for(site))
    text = "Antecedents: asthma\nExam: wheezing"
    got = {e.text: e for e in engine.apply(text, ents(text, "asthma", "wheezing"))}
    assert got["asthma"].section == "past_medical_history" and got["asthma"].assertion.historical
    assert got["wheezing"].section == "physical_exam" and got["wheezing"].assertion.present
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"sections": [{"literal": "Antecedents", "category": "Bad Name"}]}))
    with pytest.raises(ConfigError, match=r"bad.json: sections\[0\].*'category'"):
        rules_for(bad)
    bad.write_text(json.dumps({"sections": [], "section_attributes": {"x": "sad"}}))
    with pytest.raises(ConfigError, match=r"section_attributes.x: must be one of negated"):
        rules_for(bad)


# -- offsets and notes ----------------------------------------------------------------------------
def test_a_multi_sentence_note_keeps_offsets_and_names_each_cue_exactly():
    text = (
        "HPI: 64 y/o woman.  Denies chest pain.\n\nPMH: history of asthma; "
        "mother with breast cancer.\r\nPlan: rule out pulmonary embolism – héparine 😷 if "
        "confirmed. No   evidence of DVT."
    )
    spans = ["chest pain", "asthma", "breast cancer", "pulmonary embolism", "DVT"]
    given = ents(text, *spans)
    out = DEFAULT.apply(text, given)
    assert [(e.start, e.end, e.text, e.type, e.confidence) for e in out] == [
        (e.start, e.end, e.text, e.type, e.confidence) for e in given
    ]
    got = {e.text: e.assertion for e in out}
    assert got["chest pain"].negated and got["asthma"].historical
    assert got["breast cancer"].family and not got["breast cancer"].historical
    assert got["pulmonary embolism"].hypothetical and got["DVT"].negated
    for e in out:
        for cue in e.assertion.cues:
            assert text[cue.start : cue.end] == cue.text
    assert [c.text for c in got["DVT"].cues] == ["No   evidence of"]
    assert [c.text for c in got["asthma"].cues] == ["history of", "PMH:"]  # nearest first


def test_cues_are_nearest_first_and_every_attribute_keeps_its_cue():
    text = "Possible history of asthma."
    (e,) = DEFAULT.apply(text, ents(text, "asthma"))
    assert e.assertion.possible and e.assertion.historical and not e.assertion.negated
    assert [(c.attribute, c.text) for c in e.assertion.cues] == [
        ("historical", "history of"),
        ("possible", "Possible"),
    ]
    # the longer phrase wins: 'no history of' negates, it does not make a history
    assert context("No history of asthma.", "asthma") == {"asthma": {"negated"}}


def test_no_entities_and_empty_text():
    assert DEFAULT.apply("", []) == []
    assert DEFAULT.apply("No fever.", []) == []
    (e,) = DEFAULT.apply("fever", ents("fever", "fever"))
    assert e.assertion.present and e.assertion.cues == ()


def test_allowed_and_excluded_types():
    rule = {**NEG_FWD, "allowed_types": ["Disease"]}
    text = "no aspirin or asthma"
    got = context(text, ("aspirin", 0, "Chemical"), "asthma", engine=engine_of(rule))
    assert got == {"aspirin": {"present"}, "asthma": {"negated"}}
    rule = {**NEG_FWD, "excluded_types": ["Disease"]}
    got = context(text, ("aspirin", 0, "Chemical"), "asthma", engine=engine_of(rule))
    assert got == {"aspirin": {"negated"}, "asthma": {"present"}}


# -- rules files ----------------------------------------------------------------------------------
def test_the_default_rules_name_their_sources_and_licences():
    document = json.loads(
        (
            __import__("importlib.resources").resources.files("mslm_core.context") / "rules.json"
        ).read_text(encoding="utf-8")
    )
    sources = {s["id"]: s for s in document["sources"]}
    assert set(sources) == {"mslm", "medspacy", "negspacy", "pyConTextNLP"}
    assert sources["medspacy"]["licence"] == "MIT" and sources["negspacy"]["licence"] == "MIT"
    assert sources["pyConTextNLP"]["licence"] == "Apache-2.0"
    for s in ("medspacy", "negspacy", "pyConTextNLP"):
        assert len(sources[s]["commit"]) == 40 and sources[s]["repository"].startswith("https://")
    assert {r["source"] for r in document["rules"]} == set(sources)
    rules = default_rules()
    assert len(rules) == len(document["rules"]) > 300 and rules.max_scope == 8


def test_bad_rules_files_say_file_rule_and_field(tmp_path):
    def bad(document: object | str) -> str:
        path = tmp_path / "rules.json"
        path.write_text(document if isinstance(document, str) else json.dumps(document))
        with pytest.raises(ConfigError) as info:
            load_rules(path)
        return str(info.value)

    assert f"{tmp_path / 'rules.json'}:3: not JSON" in bad(
        '{"rules": [\n  {"literal": "no",\n  }]}'
    )
    msg = bad({"rules": [NEG_FWD, {**NEG_FWD, "direction": "SIDEWAYS"}]})
    assert "rules[1] ('no')" in msg and "'direction'" in msg and "SIDEWAYS" in msg
    assert "unknown field(s) ['scope']" in bad({"rules": [{**NEG_FWD, "scope": 3}]})
    msg = bad({"rules": [{**NEG_FWD, "pattern": [{"LOWER": "no", "OP": "+"}]}]})
    assert "'pattern[0].OP'" in msg and 'only "?"' in msg
    assert "'category'" in bad({"rules": [{**NEG_FWD, "category": "ALL"}]})  # ALL: terminators
    assert "'max_scope'" in bad({"rules": [{**NEG_FWD, "max_scope": 0}]})
    assert "'max_scope'" in bad({"max_scope": "8", "rules": []})
    assert "'literal'" in bad({"rules": [{**NEG_FWD, "literal": " ; "[:1]}]})
    assert '"rules" list' in bad({"rule": []})
    with pytest.raises(ConfigError, match="cannot read"):
        load_rules(tmp_path / "missing.json")


def test_a_site_file_extends_or_replaces_ours(tmp_path):
    site = tmp_path / "site.json"
    site.write_text(
        json.dumps(
            {
                "rules": [
                    # ours: 'denies' negates; this site says it does not (a pseudo-trigger)
                    {"literal": "denies", "category": "NEGATED_EXISTENCE", "direction": "PSEUDO"},
                    {"literal": "query", "category": "POSSIBLE_EXISTENCE", "direction": "FORWARD"},
                ]
            }
        )
    )
    extended = ContextEngine(rules_for(site, "extend"))
    assert context("Query pneumonia.", "pneumonia", engine=extended) == {"pneumonia": {"possible"}}
    assert context("Patient denies fever.", "fever", engine=extended) == {"fever": {"present"}}
    assert context("No fever.", "fever", engine=extended) == {"fever": {"negated"}}  # ours stay
    replaced = ContextEngine(rules_for(site, "replace"))
    assert len(replaced.rules) == 2
    assert context("No fever.", "fever", engine=replaced) == {"fever": {"present"}}
    with pytest.raises(ConfigError, match="extend or replace"):
        rules_for(site, "merge")


def test_a_pattern_expands_to_every_phrase_it_matches():
    (rule,) = parse_rules(
        {
            "rules": [
                {
                    "literal": "rule out",
                    "category": "HYPOTHETICAL",
                    "direction": "FORWARD",
                    "pattern": [
                        {"LOWER": {"IN": ["rule", "ruling"]}},
                        {"LOWER": {"IN": ["the patient", "him"]}, "OP": "?"},
                        {"LOWER": "out"},
                    ],
                }
            ]
        },
        "t",
    ).rules
    assert set(rule.phrases) == {
        (verb, *who, "out")
        for verb in ("rule", "ruling")
        for who in ((), ("the", "patient"), ("him",))
    }


def test_negex_only_keeps_negation_triggers():
    negex = default_rules().only(["NEGATED_EXISTENCE"], ["FORWARD", "BACKWARD", "BIDIRECTIONAL"])
    assert {
        (r.category, r.direction in ("FORWARD", "BACKWARD", "BIDIRECTIONAL")) for r in negex.rules
    } == {("NEGATED_EXISTENCE", True)}
    engine = ContextEngine(negex)
    # no pseudo-triggers: NegEx alone negates 'no increase'; ConText does not
    assert context("No increase in edema.", "edema", engine=engine) == {"edema": {"negated"}}
    assert context("No increase in edema.", "edema") == {"edema": {"present"}}


# -- renderers ------------------------------------------------------------------------------------
def test_bioc_and_label_studio_carry_the_context():
    text = "Patient denies chest pain. Has asthma."
    out = DEFAULT.apply(text, ents(text, "chest pain", "asthma"))
    bioc = predictions_to_bioc([text], [out], "m1")
    first, second = bioc["documents"][0]["passages"][0]["annotations"]
    assert first["infons"]["negated"] == "true" and first["infons"]["family"] == "false"
    start = text.index("denies")
    assert first["infons"]["cues"] == f"negated@{start}-{start + len('denies')}"
    assert second["infons"]["negated"] == "false" and second["infons"]["cues"] == ""
    assert all(isinstance(v, str) for a in (first, second) for v in a["infons"].values())
    (task,) = predictions_to_labelstudio([text], [out], "m1")
    regions = task["predictions"][0]["result"]
    assert regions[0]["meta"] == {"text": ['negated: "denies"']}
    assert "meta" not in regions[1]
    # without context (MSLM_CONTEXT off) nothing is added
    plain = ents(text, "chest pain")
    assert (
        "negated"
        not in predictions_to_bioc([text], [plain], "m1")["documents"][0]["passages"][0][
            "annotations"
        ][0]["infons"]
    )
    assert "assertion" not in plain[0].to_dict()
    assert out[0].to_dict()["assertion"]["cues"][0]["text"] == "denies"


def test_every_format_that_can_carry_the_section_carries_it():
    text = "HPI: denies chest pain.\nALLERGIES: penicillin"
    out = DEFAULT.apply(text, ents(text, "chest pain", ("penicillin", 0, "Drug")))
    pain, drug = out
    assert pain.to_dict()["section"] == "history_of_present_illness"
    assert drug.to_dict()["assertion"]["allergy"] is True
    bioc = predictions_to_bioc([text], [out], "m1")
    first, second = bioc["documents"][0]["passages"][0]["annotations"]
    assert first["infons"]["section"] == "history_of_present_illness"
    assert second["infons"]["section"] == "allergy" and second["infons"]["allergy"] == "true"
    assert second["infons"]["cues"] == f"allergy@{text.index('ALLERGIES')}-{text.index(':', 24)}"
    (task,) = predictions_to_labelstudio([text], [out], "m1")
    first, second = task["predictions"][0]["result"]
    assert first["meta"] == {"text": ['negated: "denies"', "section: history_of_present_illness"]}
    assert second["meta"] == {"text": ['allergy: "ALLERGIES"', "section: allergy"]}
    # with no header before it, an entity has no section, and the formats say nothing
    plain = DEFAULT.apply("Asthma.", ents("Asthma.", "Asthma"))
    assert "section" not in plain[0].to_dict()
    infons = predictions_to_bioc(["Asthma."], [plain], "m1")["documents"][0]["passages"][0]
    assert "section" not in infons["annotations"][0]["infons"]


def test_a_profile_is_laid_over_the_rules_and_a_site_s_rules_win_over_it(tmp_path):
    """The context profile (ConText's conventions) turns our rule-out triggers into
    pseudo-triggers; a site's rule on the same words wins over the profile's, and an
    engine's profiles are made once."""
    from mslm_core.context import PROFILES, rules_for
    from mslm_core.errors import ConfigError

    text = "Admitted to rule out MI; evaluate for sepsis."
    a, b = text.index("MI"), text.index("sepsis")
    ents = [
        Entity(a, a + 2, "MI", "Problem", 1, 1, 1),
        Entity(b, b + 6, "sepsis", "Problem", 1, 1, 1),
    ]

    def hypothetical(engine: ContextEngine) -> list[bool]:
        return [e.assertion.hypothetical for e in engine.apply(text, ents)]

    assert PROFILES == ("omop", "context")
    omop = ContextEngine.default()
    assert hypothetical(omop) == [True, True]
    assert hypothetical(omop.with_profile("context")) == [False, False]
    assert omop.with_profile("context").with_profile("omop") is omop  # made once
    site = tmp_path / "site.json"
    site.write_text(
        json.dumps(
            {"rules": [{"literal": "rule out", "category": "HYPOTHETICAL", "direction": "FORWARD"}]}
        )
    )
    assert hypothetical(ContextEngine.configured(site, "extend", "context")) == [True, False]
    custom = ContextEngine(rules_for(None))  # rules given as they are: the profile laid over
    assert hypothetical(custom.with_profile("context")) == [False, False]
    with pytest.raises(ConfigError, match="context profile must be one of omop, context"):
        rules_for(None, profile="negex")


def _said(
    text: str, words: list[str], attribute: str, engine: ContextEngine | None = None
) -> list[bool]:
    ents = []
    for w in words:
        at = text.index(w)
        ents.append(Entity(at, at + len(w), w, "Problem", 1, 1, 1))
    engine = engine or ContextEngine.default()
    out = engine.apply(text, sorted(ents, key=lambda e: e.start))
    return [getattr(e.assertion, attribute) for e in out]


def test_a_list_announced_with_a_colon_is_reached_whole_however_long_its_items():
    """Discharge instructions: every item of a conditional list is hypothetical, the items
    longer than a coordinated list's (weight gain of more than three pounds per day) too."""
    text = (
        "Call your doctor for any of the following: fever greater than 101, nausea, severe "
        "calf pain, weight gain of more than three pounds per day, or dizziness. No rash."
    )
    items = ["fever", "nausea", "severe calf pain", "weight gain", "dizziness", "rash"]
    assert _said(text, items, "hypothetical") == [True] * 5 + [False]
    noted = (
        "She will alert the physician if any of the following are noted: nosebleeds, black stools."
    )
    assert _said(noted, ["nosebleeds", "black stools"], "hypothetical") == [True, True]
    # no colon: a coordinated list, whose long stretch is a new clause
    plain = "Denies fever, chills, weight gain of more than three pounds per day and cough."
    assert _said(plain, ["fever", "chills", "cough"], "negated") == [True, True, False]


def test_a_line_ending_with_a_colon_carries_its_trigger_to_the_list_items_below():
    text = (
        "Return to the ER if you develop:\n- chest pain\n- shortness of breath\n2) fainting\n"
        "Diet: low salt with dyspnea noted today.\n- edema"
    )
    found = _said(
        text, ["chest pain", "shortness of breath", "fainting", "dyspnea", "edema"], "hypothetical"
    )
    assert found == [True, True, True, False, False]  # a line that is no item ends the list
    denied = "Patient denies:\n- fever\n- chills"
    assert _said(denied, ["fever", "chills"], "negated") == [True, True]


def test_irrealis_history_without_history_of_and_a_duration_that_is_not_history():
    assert _said(
        "She felt lightheaded as if she was going to pass out.",
        ["lightheaded", "pass out"],
        "hypothetical",
    ) == [False, True]
    assert _said("There is an adjacent old rib fracture.", ["rib fracture"], "historical") == [True]
    assert _said(
        "A 45-year-old man with a 3 years old scar and diabetes.", ["diabetes"], "historical"
    ) == [False]
    assert _said("She had anxiety in the past.", ["anxiety"], "historical") == [True]
    assert _said("She reports a two-day history of fever.", ["fever"], "historical") == [False]
    assert _said("She reports a history of fever.", ["fever"], "historical") == [True]


def test_a_header_inside_a_line_sets_its_attribute_on_that_line_only():
    """A section header found after a sentence's end ("… today. Past medical history: …")
    sets its attribute to its line's end; a header at a line's start reaches the next one."""
    text = (
        "CT chest done today. Past medical history: asthma.\n"
        "There is a right lower lobe pneumonia.\n"
        "Past medical history:\n- diabetes\n\n- hypertension"
    )
    found = _said(text, ["asthma", "pneumonia", "diabetes", "hypertension"], "historical")
    assert found == [True, False, True, True]
    joined = "CT chest done today. Past medical history: asthma. A right lower lobe pneumonia."
    assert _said(joined, ["asthma", "pneumonia"], "historical") == [True, True]  # one line


CONTEXT = ContextEngine.configured(profile="context")


def test_a_trigger_the_entity_runs_past_reaches_its_words_after_the_trigger():
    assert _said("No evidence of obstruction.", ["evidence of obstruction"], "negated") == [True]
    assert _said(
        "Monitor for symptoms of low blood sugar.", ["symptoms of low blood sugar"], "hypothetical"
    ) == [True]
    # an entity inside its trigger, or holding it whole, is still not its own cue's
    assert _said("No evidence of obstruction.", ["evidence"], "negated") == [False]


def test_conditional_instructions_side_effects_and_as_needed_are_hypothetical():
    cases = [
        ("Oxycodone may cause drowsiness and constipation.", ["drowsiness", "constipation"]),
        ("Take acetaminophen as needed for pain.", ["pain"]),
        ("Tylenol if needed for pain.", ["pain"]),  # issue 55: a symptom treated as needed
        (
            "Call 911 right away for trouble breathing or chest pressure.",
            ["trouble breathing", "chest pressure"],
        ),
        (
            "Seek care immediately for slurred speech, facial droop or arm weakness.",
            ["slurred speech", "arm weakness"],
        ),
        ("Report any new numbness or tingling in your feet.", ["new numbness", "tingling"]),
        ("In the event of seizure, turn her on her side.", ["seizure"]),
        ("You may feel tired for a few weeks after surgery.", ["tired"]),
        (
            "Reasons to call your surgeon:\n* Redness spreading\n* Foul-smelling drainage",
            ["Redness", "Foul-smelling drainage"],
        ),
    ]
    for text, words in cases:
        assert _said(text, words, "hypothetical") == [True] * len(words), text
    # what may come is not history, under both profiles; a frequency is no condition
    text = "Once the infection is completely resolved, you may resume exercise."
    for engine in (DEFAULT, CONTEXT):
        assert _said(text, ["infection"], "hypothetical", engine=engine) == [True]
        assert _said(text, ["infection"], "historical", engine=engine) == [False]
    text = "Amoxicillin once daily for the infection, until recently on cefalexin for cellulitis."
    assert _said(text, ["infection", "cellulitis"], "hypothetical") == [False, False]
    # a possibility about the patient, not an instruction; "as needed" alone is no trigger
    assert _said("The patient may have pneumonia.", ["pneumonia"], "hypothetical") == [False]
    assert _said("Albuterol as needed. Wheezing today.", ["Wheezing"], "hypothetical") == [False]
    # an instruction not to act negates the act, not the finding after it
    text = "Do not take ibuprofen because it may worsen your kidney function."
    assert _said(text, ["kidney function"], "negated") == [False]
    assert _said(text, ["kidney function"], "hypothetical") == [True]


def test_suspected_and_likely_at_a_clause_end_are_possible_a_likely_cause_is_not():
    assert _said("Suspected septic arthritis; aspiration.", ["septic arthritis"], "possible") == [
        True
    ]
    assert _said("Pulmonary edema is likely.", ["Pulmonary edema"], "possible") == [True]
    text = "The rash on your arms is likely an allergic reaction."
    assert _said(text, ["rash"], "possible") == [False]


def test_history_told_by_a_date_or_prior_follows_the_context_profile_only():
    """ConText's temporality (began more than two weeks ago) under the context profile; the
    omop profile leaves dates alone (in case reports a date tells the illness's course)."""
    cases = [
        ("She had breast cancer in 2010, treated with lumpectomy.", "breast cancer"),
        ("Pneumonia in January 2020, fully recovered.", "Pneumonia"),
        ("Heroin use in the 1990s, none since.", "Heroin use"),
        ("He used cocaine in his 20s.", "cocaine"),
        ("Prior ORIF of a left femoral neck fracture.", "femoral neck fracture"),
        ("Former smoker.", "smoker"),
    ]
    for text, word in cases:
        assert _said(text, [word], "historical", engine=CONTEXT) == [True], text
        assert _said(text, [word], "historical") == [False], text
    # a time of life is history under both; what remains now is not
    assert _said("As a child he had rheumatic fever.", ["rheumatic fever"], "historical") == [True]
    assert _said("Hepatitis B as a young adult.", ["Hepatitis B"], "historical") == [True]
    text = "He had a prior stroke with mild residual left-sided weakness."
    assert _said(text, ["stroke", "left-sided weakness"], "historical", engine=CONTEXT) == [
        True,
        False,
    ]
    # a radiology request's label is no history
    assert _said(
        "Clinical history: rule out pulmonary embolism.", ["pulmonary embolism"], "historical"
    ) == [False]


def test_a_finding_said_to_be_absent_has_no_past_under_the_context_profile():
    text = "No prior history of seizures. Status post lumpectomy, with no recurrence."
    found = CONTEXT.apply(text, ents(text, "seizures", "recurrence"))
    assert [(e.assertion.negated, e.assertion.historical) for e in found] == [
        (True, False),
        (True, False),
    ]
    assert all(c.attribute != "historical" for e in found for c in e.assertion.cues)
    omop = DEFAULT.apply(text, ents(text, "seizures"))
    assert (omop[0].assertion.negated, omop[0].assertion.historical) == (True, True)


def test_social_history_is_history_and_instructions_are_hypothetical_until_told_otherwise():
    text = (
        "SOCIAL HISTORY:\nSmokes cigarettes daily.\n"
        "DISCHARGE INSTRUCTIONS:\nYou were admitted for pneumonia.\n"
        "Mild bruising around the catheter site.\nNo signs of infection at discharge."
    )
    found = {
        e.text: e.assertion
        for e in DEFAULT.apply(
            text, ents(text, "cigarettes", "pneumonia", "bruising", "signs of infection")
        )
    }
    assert found["cigarettes"].historical
    assert not found["pneumonia"].hypothetical  # told what happened: "you were"
    assert found["bruising"].hypothetical
    assert found["signs of infection"].negated and not found["signs of infection"].hypothetical


def test_an_indication_is_under_consideration_in_the_context_profile():
    text = "Indication: evaluate for appendicitis."
    assert _said(text, ["appendicitis"], "possible", engine=CONTEXT) == [False]
    assert _said(text, ["appendicitis"], "hypothetical", engine=CONTEXT) == [False]
    assert _said(text, ["appendicitis"], "hypothetical") == [True]  # omop: a Rule_out


def test_a_number_is_matched_by_its_shape_and_a_phrase_names_it_one_way(tmp_path):
    rules = parse_rules(
        {
            "rules": [
                {
                    "literal": "in 2010",
                    "category": "HISTORICAL",
                    "direction": "BACKWARD",
                    "pattern": [{"LOWER": "in"}, {"SHAPE": {"IN": ["dddd", "ddddx"]}}],
                },
                {"literal": "x2", "category": "HISTORICAL", "direction": "BACKWARD"},
            ]
        },
        "site.json",
    )
    engine = ContextEngine(rules)
    text = "Asthma in 1999. Gout in 1980s. Flu in 99. Cough x2."
    assert _said(text, ["Asthma", "Gout", "Flu", "Cough"], "historical", engine=engine) == [
        True,
        True,
        False,
        True,
    ]
    with pytest.raises(ConfigError, match=r"rules\[0\].*pattern.*by SHAPE, not by its digits"):
        parse_rules(
            {
                "rules": [
                    {
                        "literal": "in 2010",
                        "category": "HISTORICAL",
                        "direction": "BACKWARD",
                        "pattern": [{"LOWER": {"IN": ["in", "24"]}}, {"SHAPE": "dddd"}],
                    }
                ]
            },
            "site.json",
        )
    with pytest.raises(ConfigError, match=r"SHAPE.*shape of d, x, X"):
        parse_rules(
            {
                "rules": [
                    {
                        "literal": "in 2010",
                        "category": "HISTORICAL",
                        "direction": "BACKWARD",
                        "pattern": [{"LOWER": "in"}, {"SHAPE": "9999"}],
                    }
                ]
            },
            "site.json",
        )
    with pytest.raises(ConfigError, match="one of LOWER"):  # headers are words only
        parse_rules(
            {"sections": [{"literal": "year", "category": "x", "pattern": [{"SHAPE": "dddd"}]}]},
            "site.json",
        )
