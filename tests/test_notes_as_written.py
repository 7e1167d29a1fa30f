"""Notes as clinicians write them: lines and lists, headers, vitals and shorthand (issue 59)."""

from __future__ import annotations

import numpy as np
import pytest

from mslm_core import measurements
from mslm_core.context.sections import Sectionizer, default_sections
from mslm_core.corpus.model import Sentence
from mslm_core.findings import findings_with_their_site
from mslm_core.layout import Layout, tidied
from mslm_core.notestyle import NoteStyle, Rates, rewrite_share
from mslm_core.shorthand import Sense, Shorthand, packaged, read_table, write_table
from mslm_core.text import sentence_spans
from mslm_core.types import Entity, Mention


def _sentences(text: str) -> list[str]:
    return [text[a:b] for a, b in sentence_spans(text)]


# -- lines ---------------------------------------------------------------------------------
def test_every_line_of_a_list_is_read_apart():
    text = "MEDICATIONS:\n- Lisinopril 10 mg PO daily\n- Metoprolol 25 mg PO qHS\nAlbuterol PRN"
    assert _sentences(text) == [
        "MEDICATIONS:",
        "- Lisinopril 10 mg PO daily",
        "- Metoprolol 25 mg PO qHS",
        "Albuterol PRN",
    ]
    # lines without a full stop, lower case included: a list is not prose
    assert _sentences("metoprolol 25 mg\nlisinopril 10 mg") == [
        "metoprolol 25 mg",
        "lisinopril 10 mg",
    ]


def test_prose_wrapped_at_a_fixed_width_stays_one_sentence():
    wrapped = (
        "The patient is a 67 year old man who presented to the ED with worsening\n"
        "shortness of breath and chest pain. He denies fever."
    )
    assert _sentences(wrapped) == [wrapped.split(". ")[0] + ".", "He denies fever."]
    # a short line, a line ending in punctuation, a next line in capitals or a bullet: apart
    assert len(_sentences("Pt with worsening\nshortness of breath")) == 2
    assert len(_sentences("x" * 60 + ",\nshortness of breath")) == 2
    assert len(_sentences("a" * 60 + " and\n- shortness of breath")) == 2


# -- layout --------------------------------------------------------------------------------
def _entity(text: str, start: int, end: int, kind: str = "Drug") -> Entity:
    return Entity(start, end, text[start:end], kind, 0.9, 0.9, 0.9)


def test_list_markers_and_edge_punctuation_are_not_part_of_a_span():
    text = "- Lisinopril 10 mg\n1. Amoxicillin 500 mg,\n* (aspirin)\n2) q.d."
    layout = Layout()
    found = layout.tidy(
        text,
        [
            _entity(text, 0, 12),  # "- Lisinopril"
            _entity(text, 19, 33),  # "1. Amoxicillin"
            _entity(text, 34, 41, "Dosage"),  # "500 mg,"
            _entity(text, 19, 21, "Dosage"),  # "1." alone: a list number
            _entity(text, 42, 53),  # "* (aspirin)"
            _entity(text, 57, 61, "Dosage"),  # "q.d." keeps its full stop
        ],
    )
    assert [e.text for e in found] == ["Lisinopril", "Amoxicillin", "500 mg", "aspirin", "q.d."]
    assert all(text[e.start : e.end] == e.text for e in found)


@pytest.mark.parametrize(
    ("span", "kept"),
    [
        ("Degenerative changes of", "Degenerative changes"),
        ("thickening of the", "thickening"),
        ("Graves disease s/", "Graves disease"),
        ("pain and", "pain"),
        ("hepatitis A", "hepatitis A"),  # a capital: a name's part
        ("vitamin D", "vitamin D"),
        ("of", "of"),  # a word alone is the model's to keep or not
    ],
)
def test_a_span_does_not_end_with_a_word_that_ends_no_entity(span, kept):
    text = f"Seen: {span}. Done"
    start = text.index(span)
    assert tidied(text, start, start + len(span)) == (start, start + len(kept))


def test_a_site_in_shorthand_and_its_finding_join_where_spelled_out_they_name_one():
    from mslm_core.shorthand import ShorthandFinder

    finder = ShorthandFinder({"Problem", "Drug", "Test", "Procedure", "Anatomy", "Result"})
    names = {"abdominal pain", "chest pain"}
    is_finding = finder.spelled_out(lambda words: words.lower() in names)
    assert is_finding("abd pain") and is_finding("Abd pain")  # abd: abdomen, abdominal …
    assert is_finding("chest pain") and not is_finding("abd mass") and not is_finding("abd")
    text = "c/o abd pain x2d"
    site, pain = _entity(text, 4, 7, "Anatomy"), _entity(text, 8, 12, "Problem")
    joined = findings_with_their_site(text, [site, pain], is_finding)
    assert [(e.text, e.type) for e in joined] == [("abd pain", "Problem")]


def test_no_entity_crosses_a_line_break_and_headers_are_not_entities():
    text = "PO qHS\n- Metoprolol succinate\nEXTREMITIES: No edema\nHEENT: NCAT"
    layout = Layout()
    found = layout.tidy(
        text,
        [
            _entity(text, 0, 29),  # 'PO qHS\n- Metoprolol succinate'
            _entity(text, 30, 41, "Problem"),  # EXTREMITIES
            _entity(text, 46, 51, "Problem"),  # edema
            _entity(text, 52, 57, "Problem"),  # HEENT
        ],
    )
    assert [e.text for e in found] == ["Metoprolol succinate", "edema"]


def test_headers_are_found_through_ocr_damage():
    sections = Sectionizer(default_sections())
    text = (
        "HISTORY 0F PRESENT ILLNESS: pt with CP\nlMPRESSlON:\nno acute process\n"
        "ASSESSRNENT AND PLAN;\n1. HTN: continue lisinopril\nFOLLOW-UP: PCP in 1 week\n"
        "VS: BP 120/80\nHEENT: NCAT"
    )
    found = [(s.category, s.header) for s in sections.find(text)]
    assert found == [
        ("history_of_present_illness", "HISTORY 0F PRESENT ILLNESS"),
        ("observation_and_plan", "lMPRESSlON"),
        ("observation_and_plan", "ASSESSRNENT AND PLAN"),
        ("follow_up", "FOLLOW-UP"),
        ("labs_and_studies", "VS"),
        ("physical_exam", "HEENT"),
    ]  # "1. HTN:" is a problem-list item, not a header


def test_a_header_may_carry_a_remark_and_a_title_its_page_number():
    text = (
        "0UTPATlENT PR0GRESS N0TE   Page 1 of 2\n"
        "CURRENT OUTPATIENT MEDICATIONS (reviewed 6/12)\n- aspirin 81 mg\n"
        "Allergies (per chart): penicillin\n"
        "Plan (x) to go home"
    )
    layout = Layout()
    assert [text[a:b] for a, b in layout.headers(text)] == [
        "0UTPATlENT PR0GRESS N0TE",
        "CURRENT OUTPATIENT MEDICATIONS",
        "Allergies",
    ]  # a bracket mid-line with text after it is prose, not a remark
    found = layout.tidy(
        text,
        [
            _entity(text, 0, 10, "Problem"),  # 0UTPATlENT
            _entity(text, 58, 69, "Drug"),  # MEDICATIONS
            _entity(text, 88, 95, "Drug"),  # aspirin
        ],
    )
    assert [e.text for e in found] == ["aspirin"]
    # the page of a line that is no title is no header
    assert Layout().headers("Seen today, page 1 of 2") == []


@pytest.mark.parametrize(
    ("line", "header"),
    [
        ("Lungs/pleura: Small bilateral effusions.", "Lungs/pleura:"),
        ("Pancreas, spleen, adrenals: Unremarkable.", "Pancreas, spleen, adrenals:"),
        ("Heart and mediastinum: Normal heart size.", "Heart and mediastinum:"),
        ("RIGHT KIDNEY: 10.2 cm, no hydronephrosis.", "RIGHT KIDNEY:"),
        ("MICU Progress Note HD2", "MICU Progress Note"),
        ("HOSPITAL MEDICINE PROGRESS NOTE - day 3", "HOSPITAL MEDICINE PROGRESS NOTE"),
        ("PSYCHIATRY MED RECONCILIATION", "PSYCHIATRY MED RECONCILIATION"),
        ("MEDICATIONS - HEMODIALYSIS UNIT", "MEDICATIONS - HEMODIALYSIS UNIT"),
        ("S0ClAL: teacher, never smoker", "S0ClAL"),
        ("CARDIOLOGY CLINIC FOLLOW-UP", "CARDIOLOGY CLINIC FOLLOW-UP"),
        ("Incision: C/D/I, minimal drainage", "Incision:"),
        ("Access: L arm AVF, + thrill", "Access:"),
        ("Wound: 2 x 1 cm, clean base", "Wound:"),
    ],
)
def test_organ_labels_titles_and_qualified_headers_are_headers(line, header):
    heads = Layout().headers(f"Seen today.\n{line}")
    assert header in [f"Seen today.\n{line}"[a:b] for a, b in heads]


@pytest.mark.parametrize(
    "line",
    [
        "Chest pain: since 2 days",  # a finding before a colon is no organ label
        "The liver: normal",
        "Liver unremarkable: yes",
        "BP: 120/80",
        "Pt seen today. Progress Note",  # a title stands alone on its line
        "Medications - see list",  # a qualifier after a dash is in capitals
    ],
)
def test_prose_that_looks_like_a_label_is_no_header(line):
    assert Layout().headers(line) == []


# -- vitals and lab values -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "pairs"),
    [
        (
            "VS: BP 168/94, HR 102, RR 18, T 38.9, SpO2 91% RA",
            [("BP", "168/94"), ("HR", "102"), ("RR", "18"), ("T", "38.9"), ("SpO2", "91%")],
        ),
        ("Temp 101.2, Wt 92 kg", [("Temp", "101.2"), ("Wt", "92 kg")]),
        ("troponin 0.4 ng/mL; Cr 1.4", [("troponin", "0.4 ng/mL"), ("Cr", "1.4")]),
        ("BP of 120/80 and HR was 72", [("BP", "120/80"), ("HR", "72")]),
        # the value's place in a course between the label and the value
        ("K nadir 3.0; Cr peaked 2.2", [("K", "3.0"), ("Cr", "2.2")]),
        ("O2 sat 89% on 2L", [("O2 sat", "89%")]),
        # a one-letter label needs a value in its range; a ratio is a pressure's only
        ("T 2 DM, K 3/4, P 1", []),
        ("pain 7/10", []),
        ("UA bland, FENa 0.4%; FeUrea 28%", [("FENa", "0.4%"), ("FeUrea", "28%")]),
        # echo measures and clinical scores, "max" between as in a course
        (
            "E/e' 16. TAPSE 1.8 cm, RVSP 45",
            [("E/e'", "16"), ("TAPSE", "1.8 cm"), ("RVSP", "45")],
        ),
        (
            "PHQ-9 17 today, GAD-7 12; CHA2DS2-VASc 5; CIWA max 6; NIHSS 7",
            [
                ("PHQ-9", "17"),
                ("GAD-7", "12"),
                ("CHA2DS2-VASc", "5"),
                ("CIWA", "6"),
                ("NIHSS", "7"),
            ],
        ),
    ],
)
def test_vitals_and_lab_values_are_a_test_and_its_result(text, pairs):
    found = measurements.find(text)
    assert [(text[slice(*m.label)], text[slice(*m.value)]) for m in found] == pairs


def test_a_measurement_replaces_what_the_model_read_over_it():
    text = "VS: BP 168/94, HR 102"
    model = [_entity(text, 0, 2, "Problem"), _entity(text, 4, 13, "Result")]  # "VS", "BP 168/9"
    out = measurements.merged(text, model, measurements.find(text))
    assert [(e.text, e.type) for e in out] == [
        ("VS", "Problem"),
        ("BP", "Test"),
        ("168/94", "Result"),
        ("HR", "Test"),
        ("102", "Result"),
    ]


# -- shorthand -----------------------------------------------------------------------------
def test_the_packaged_shorthand_table_knows_what_notes_abbreviate():
    table = packaged()
    assert table.dominant("SOB").long == "shortness of breath"
    assert table.dominant("htn").long == "hypertension"
    assert table.dominant("N/V").long == "nausea/vomiting"
    assert table.dominant("nkda").long == "no known drug allergies"
    assert table.dominant("RA").long == "room air"  # not rheumatoid arthritis, in notes
    assert table.dominant("zzq") is None


def test_a_shorthand_table_reads_back_what_it_wrote(tmp_path):
    table = Shorthand(
        [
            Sense("sob", "shortness of breath", 1.0, (("SOB", 16), ("sob", 4)), ("a",)),
            Sense("cp", "chest pain", 0.9, (("CP", 3),), ("a", "b")),
        ]
    )
    path = tmp_path / "t.tsv"
    assert write_table(table, path, "test") == 2
    again = read_table(path)
    assert again.senses == table.senses
    path.write_text("short\tlong\n")
    with pytest.raises(Exception, match=r"t\.tsv:1"):
        read_table(path)


def _sentence(words: str, spans: list[tuple[int, int, str]]) -> Sentence:
    return Sentence.from_words(words.split(), [Mention(a, b, t) for a, b, t in spans])


def test_note_style_rewrites_text_and_carries_every_mention_over():
    style = NoteStyle(
        rates=Rates(shorthand=1.0, telegraphic=1.0, full_stop=1.0, upper=0, lower=0, bullet=0)
    )
    sentence = _sentence(
        "The patient was admitted with shortness of breath and a history of hypertension .",
        [(5, 8, "Problem"), (12, 13, "Problem")],
    )
    out = style(sentence, np.random.default_rng(0))
    assert [m.label for m in out.mentions] == ["Problem", "Problem"]
    assert [" ".join(out.words[m.start : m.end]).lower() for m in out.mentions] == ["sob", "htn"]
    assert "the" not in [w.lower() for w in out.words] and out.words[-1] != "."
    assert "h / o" in out.text.lower()  # "history of", outside a mention


def test_held_out_shorthand_is_never_written():
    style = NoteStyle(
        rates=Rates(shorthand=1.0, upper=0, lower=0, bullet=0), held_out=frozenset({"sob"})
    )
    sentence = _sentence("shortness of breath today", [(0, 3, "Problem")])
    for seed in range(20):
        out = style(sentence, np.random.default_rng(seed))
        assert out.words[:3] == ["shortness", "of", "breath"]


def test_a_share_of_sentences_is_rewritten_the_same_way_every_time():
    sentences = [_sentence("patient with hypertension .", [(2, 3, "Problem")]) for _ in range(200)]
    once, n = rewrite_share(sentences, 0.3, seed=7)
    again, m = rewrite_share(sentences, 0.3, seed=7)
    assert n == m and 40 <= n <= 80
    assert [s.text for s in once] == [s.text for s in again]
    assert sum(s.text != "patient with hypertension ." for s in once) > 0
    for s in once:  # every rewritten sentence still holds its one Problem
        assert [m.label for m in s.mentions] == ["Problem"]
    assert rewrite_share(sentences, 0.0, seed=7) == (sentences, 0)


def test_the_shorthand_held_out_of_training_is_the_check_set_s():
    import json
    from pathlib import Path

    from mslm_core.notestyle import HELD_OUT

    split = Path(__file__).resolve().parents[1] / "benchmarks/data/note-style/split.json"
    assert set(json.loads(split.read_text())["held_out_shorthand"]) == HELD_OUT


def test_shorthand_that_negates_itself():
    from mslm_core.context import ContextEngine

    text = "NKDA. VS: BP 120/80, afebrile. Pneumonia vs atelectasis."
    found = ContextEngine.default().apply(
        text,
        [_entity(text, 0, 4, "Problem"), _entity(text, 31, 40, "Problem")],
    )
    assert [(e.text, e.assertion.negated, e.assertion.possible) for e in found] == [
        ("NKDA", True, False),  # its own cue
        ("Pneumonia", False, True),  # "vs" between two findings: a differential
    ]
    # "VS:" labels vital signs: no "versus"
    text = "VS: fever 38.9"
    (fever,) = ContextEngine.default().apply(text, [_entity(text, 4, 9, "Problem")])
    assert fever.assertion.present


def test_a_list_item_is_read_with_its_header():
    from mslm_core.predict.windows import sentences_of

    text = "MEDICATIONS:\n- Lisinopril 10 mg\n- Metoprolol 25 mg\n\n- aspirin\nAllergies:\nPCN"
    sentences, where = sentences_of([text])
    assert sentences == [
        ["MEDICATIONS", ":"],
        ["MEDICATIONS", ":", "-", "Lisinopril", "10", "mg"],
        ["MEDICATIONS", ":", "-", "Metoprolol", "25", "mg"],
        ["-", "aspirin"],  # a blank line ends the list
        ["Allergies", ":"],
        ["Allergies", ":", "PCN"],
    ]
    assert [o.context for o in where] == [0, 2, 2, 0, 0, 2]


def test_shorthand_is_found_and_typed_as_notes_write_it():
    from mslm_core.shorthand import ShorthandFinder

    finder = ShorthandFinder({"Problem", "Drug", "Test", "Procedure", "Anatomy", "Result"})
    text = "CV: RRR. Pt c/o SOB and CP, denies N/V. Hx HTN, DM2. BLE edema. On ASA. s/p CABG."
    assert [(text[a:b], k) for a, b, k in finder.find(text)] == [
        ("CV", "Anatomy"),
        ("RRR", "Result"),
        ("SOB", "Problem"),
        ("CP", "Problem"),
        ("N/V", "Problem"),
        ("HTN", "Problem"),
        ("DM2", "Problem"),
        ("BLE", "Anatomy"),
        ("ASA", "Drug"),
        ("CABG", "Procedure"),
    ]
    # the model's "HTN" typed Test is retyped; its span over "CP" stands, a finding as the
    # short form it ends is; its Drug over "ASA" stands (not a finding's short form); nothing
    # found on "SOB" gets one; a header ("CV:") gets none
    htn, cp, asa = text.index("HTN"), text.index("CP,"), text.index("ASA")
    model = [
        _entity(text, htn, htn + 3, "Test"),
        _entity(text, cp - 4, cp + 2, "Anatomy"),
        _entity(text, asa - 3, asa + 3, "Test"),
    ]
    merged = finder.merged(text, model, heads=[(0, 2)])
    kinds = {e.text: (e.type, round(e.confidence, 2)) for e in merged}
    assert kinds["HTN"] == ("Problem", 0.9)
    assert kinds["SOB"] == ("Problem", 0.85) and "CV" not in kinds
    assert kinds["and CP"] == ("Problem", 0.9) and "CP" not in kinds
    assert kinds["On ASA"] == ("Test", 0.9)  # only a finding retypes the span it edges
    # a finding in shorthand that begins a span of another type: the span is a finding
    staged = "CKD stage 3b, on HD."
    got = finder.merged(staged, [_entity(staged, 0, 12, "Result")])
    assert [(e.text, e.type) for e in got] == [("CKD stage 3b", "Problem"), ("HD", "Procedure")]
    # a model without the types finds nothing
    assert ShorthandFinder({"Chemical", "Disease"}).kind == {}


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Seen by PT/OT and SLP, no deficits.", ["PT", "OT", "SLP"]),
        ("6. PT/OT: WBAT RLE, working w/ PT BID.", ["PT", "OT", "PT"]),
        ("Started PT and OT on day 2; PT recommends home w/ home PT.", ["PT", "OT", "PT", "PT"]),
        ("Seen by PT, OT not needed.", ["PT", "OT"]),
        ("PT/INR 14.2/1.1. PT 14.2 sec. PT states she fell. Pt seen, f/u w/ pt.", []),
        ("CT/PT scan", []),
    ],
)
def test_therapies_in_shorthand_are_procedures_where_the_words_say_therapy(text, found):
    from mslm_core.shorthand import ShorthandFinder, therapies

    assert [text[a:b] for a, b in therapies(text)] == found
    finder = ShorthandFinder({"Problem", "Drug", "Test", "Procedure", "Anatomy", "Result"})
    procedures = [(text[a:b], k) for a, b, k in finder.find(text) if text[a:b] in found]
    assert procedures == [(t, "Procedure") for t in found]
    # a model without procedures gets none
    assert not any(k == "Procedure" for *_, k in ShorthandFinder({"Problem", "Test"}).find(text))


def test_a_site_in_shorthand_is_cut_from_the_finding_or_test_it_begins_or_ends():
    from mslm_core.shorthand import ShorthandFinder

    finder = ShorthandFinder({"Problem", "Drug", "Test", "Procedure", "Anatomy", "Result"})
    text = "BLE edema. +TTP RUQ. RUQ US ordered. Trace LLE edema. LV: normal."
    spans = ("BLE edema", "Problem"), ("TTP RUQ", "Test"), ("RUQ US", "Test")
    model = [_entity(text, text.index(t), text.index(t) + len(t), k) for t, k in spans]
    trace = text.index("Trace LLE edema")
    model += [
        _entity(text, trace, trace + 15, "Problem"),
        _entity(text, text.index("LV"), text.index("LV") + 3, "Problem"),
    ]
    merged = [(e.text, e.type) for e in finder.merged(text, model)]
    assert merged == [
        ("BLE", "Anatomy"),
        ("edema", "Problem"),  # the rest keeps the model's type
        ("TTP", "Problem"),  # and is then read as shorthand itself
        ("RUQ", "Anatomy"),
        ("RUQ", "Anatomy"),
        ("US", "Test"),
        ("Trace LLE edema", "Problem"),  # a site inside a span is the model's to say
        ("LV", "Anatomy"),  # nothing but punctuation left: the site alone
    ]
    kept = {e.text: e.confidence for e in finder.merged(text, model)}
    assert kept["edema"] == 0.9 and kept["BLE"] == 0.85


def test_a_connector_in_shorthand_is_never_the_first_or_last_word_of_an_entity():
    from mslm_core.shorthand import ShorthandFinder

    finder = ShorthandFinder({"Problem", "Drug", "Test", "Procedure", "Anatomy", "Result"})
    text = "PMH: breast ca s/p lumpectomy. AKI 2/2 volume depletion. Plan: r/o ACS. w/o"
    spans = [("breast ca s/p", "Problem"), ("2/2 volume depletion", "Problem")]
    spans += [("r/o ACS", "Problem"), ("w/o", "Result")]
    model = [_entity(text, text.index(t), text.index(t) + len(t), k) for t, k in spans]
    merged = [e.text for e in finder.merged(text, model) if e.type == "Problem"]
    assert merged == ["breast ca", "AKI", "volume depletion", "ACS"]
    assert "w/o" not in [e.text for e in finder.merged(text, model)]


def test_every_connector_the_shorthand_table_types_stands_for_no_entity():
    from mslm_core.shorthand import CONNECTORS, NONE, read_types

    typed = read_types()
    assert {c: typed[c] for c in CONNECTORS if c in typed} == dict.fromkeys(
        (c for c in CONNECTORS if c in typed), NONE
    )
    assert len([c for c in CONNECTORS if c in typed]) >= 10


def test_a_threshold_is_no_measured_value():
    text = "Transfuse if Hgb < 7. Goal INR 2-3, today 2.3. LVEF 30-35%. DP pulse 2+."
    found = [(text[slice(*m.label)], text[slice(*m.value)]) for m in measurements.find(text)]
    assert found == [("LVEF", "30-35%")]
    # "PRN" right before a label makes a condition; a PRN drug before a vital does not
    text = "CIWA <8 x24h; lorazepam 1 mg PO q4h PRN CIWA > 10, hydralazine PRN SBP > 160"
    text += "\nalbuterol PRN, HR 88"
    found = [(text[slice(*m.label)], text[slice(*m.value)]) for m in measurements.find(text)]
    assert found == [("CIWA", "<8"), ("HR", "88")]


def test_a_lone_small_number_is_no_result():
    text = "Plan: 2. CHF 2/2 CAD. Na 134. Walks well x 3"
    ents = [
        _entity(text, 6, 7, "Result"),  # "2" the list number
        _entity(text, 13, 16, "Result"),  # "2/2"
        _entity(text, 22, 24, "Test"),  # Na
        _entity(text, 25, 28, "Result"),  # 134: three digits
        _entity(text, 43, 44, "Result"),  # "3", no test just before it
    ]
    assert [e.text for e in measurements.without_lone_results(text, ents)] == ["Na", "134"]


def test_a_list_number_after_a_line_that_ends_in_a_test_is_no_result():
    text = "2. Check BMP\n3. Hypokalemia, K 3.1 today. Seen on 01/14/2023, since 2022 at 0500."
    text += " BNP 2022"
    ents = [_entity(text, text.index("BMP"), text.index("BMP") + 3, "Test")]
    ents += [_entity(text, 13, 14, "Result")]  # "3", the list number of the next line
    k = text.index("K 3.1")
    ents += [_entity(text, k, k + 1, "Test"), _entity(text, k + 2, k + 5, "Result")]
    for word in ("01/14/2023", "2022", "0500"):  # a date, a year and a clock time
        ents.append(_entity(text, text.index(word), text.index(word) + len(word), "Result"))
    at = text.index("BNP")
    ents += [_entity(text, at, at + 3, "Test"), _entity(text, at + 4, at + 8, "Result")]
    kept = [(e.text, e.start) for e in measurements.without_lone_results(text, ents)]
    assert kept == [("BMP", 9), ("K", k), ("3.1", k + 2), ("BNP", at), ("2022", at + 4)]


def _span(text: str, word: str, nth: int = 0) -> tuple[int, int]:
    at = -1
    for _ in range(nth + 1):
        at = text.index(word, at + 1)
    return at, at + len(word)


def test_a_word_of_course_or_a_sign_is_a_result_only_after_its_test():
    text = "Cardiomegaly, stable. Weight stable. UOP 1.2 L, improving. Pain, +rebound, ↑ to 80 mg"
    ents = [
        _entity(text, *_span(text, "stable"), "Result"),  # no test before it
        _entity(text, *_span(text, "Weight"), "Test"),
        _entity(text, *_span(text, "stable", 1), "Result"),  # the weight's
        _entity(text, *_span(text, "improving"), "Result"),  # 1.2 L is a Result, not a Test
        _entity(text, *_span(text, "+"), "Result"),
        _entity(text, *_span(text, "↑"), "Result"),
    ]
    kept = [(e.text, e.start) for e in measurements.without_lone_results(text, ents)]
    weight = text.index("Weight")
    assert kept == [("Weight", weight), ("stable", weight + len("Weight "))]


def test_a_finding_s_degree_is_its_severity_not_part_of_it():
    from mslm_core.findings import findings_without_their_severity

    text = "Severe chest pain, mildly dilated LV, small bowel obstruction. Trace edema."
    spans = ["Severe chest pain", "mildly dilated", "small bowel obstruction", "Trace edema"]
    ents = [_entity(text, text.index(t), text.index(t) + len(t), "Problem") for t in spans]
    found = findings_without_their_severity(text, ents, severity=True)
    assert [(e.text, e.type) for e in found] == [
        ("Severe", "Severity"),
        ("chest pain", "Problem"),
        ("mildly", "Severity"),
        ("dilated", "Problem"),
        ("small bowel obstruction", "Problem"),
        ("Trace", "Severity"),
        ("edema", "Problem"),
    ]
    assert all(text[e.start : e.end] == e.text for e in found)
    without = findings_without_their_severity(text, ents, severity=False)
    assert [e.text for e in without] == [
        "chest pain",
        "dilated",
        "small bowel obstruction",
        "edema",
    ]
    lone = [_entity(text, 0, 6, "Problem")]  # "Severe" alone: a degree, of no finding here
    assert _read(findings_without_their_severity(text, lone, severity=True)) == [
        ("Severe", "Severity")
    ]
    assert findings_without_their_severity(text, lone, severity=False) == []
    listed = "mild, severe pain"  # the model's Severity before: the next word still is one
    ents = [_entity(listed, 0, 4, "Severity"), _entity(listed, 6, 17, "Problem")]
    found = findings_without_their_severity(listed, ents, severity=True)
    assert [(e.text, e.type) for e in found] == [
        ("mild", "Severity"),
        ("severe", "Severity"),
        ("pain", "Problem"),
    ]
    ents = [_entity(listed, 6, 12, "Severity"), _entity(listed, 6, 17, "Problem")]
    found = findings_without_their_severity(listed, ents, severity=True)
    assert [e.text for e in found] == ["severe", "pain"]  # the model's own, not twice


def test_a_bound_is_a_result_only_where_a_test_measured_it():
    text = "Transfuse if Hgb < 7. Call for fever > 101.5. Troponin < 0.01. Gain of more than 3 lbs"
    spans = [("Hgb", "Test"), ("< 7", "Result"), ("fever", "Problem"), ("> 101.5", "Result")]
    spans += [("Troponin", "Test"), ("< 0.01", "Result"), ("more than 3 lbs", "Result")]
    ents = [_entity(text, text.index(t), text.index(t) + len(t), k) for t, k in spans]
    kept = [e.text for e in measurements.without_thresholds(text, ents)]
    assert kept == ["Hgb", "fever", "Troponin", "< 0.01"]
    # the comparator before the span the model read: the same bound
    text = "Return for fever over 100.4, chills.\nBP above 180 at home; weight gain > 3 lb"
    spans = [("fever", "Problem"), ("100.4", "Result"), ("BP", "Test"), ("180", "Result")]
    spans += [("weight gain", "Problem"), ("3 lb", "Result")]
    ents = [_entity(text, text.index(t), text.index(t) + len(t), k) for t, k in spans]
    kept = [e.text for e in measurements.without_thresholds(text, ents)]
    assert kept == ["fever", "BP", "180", "weight gain"]
    # a comparator on the line before is not this value's; a value's own words are no bound
    text = "Keep SBP >\n120 today. HR 70 over 90 beats. Temp 38.9 above baseline"
    spans = [("120", "Result"), ("HR", "Test"), ("70", "Result"), ("38.9", "Result")]
    ents = [_entity(text, text.index(t), text.index(t) + len(t), k) for t, k in spans]
    assert measurements.without_thresholds(text, ents) == ents


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("Cr 3.1 (↓ from 3.8; baseline 1.8), Phos 5.2", ["3.1", "3.8", "1.8", "5.2"]),
        ("Hgb 6.8 on arrival (baseline ~13), BUN 58", ["6.8", "13", "58"]),
        ("TTE: EF 20% (prior 30% in 2022)", ["20%", "30%"]),
        ("Na 133 (corrected 136)", ["133", "136"]),
        ("Cr 2.4 (from 3.6 on admit, baseline 1.2)", ["2.4", "3.6", "1.2"]),
        ("BNP 2,310 (prior 2,100)", ["2,310", "2,100"]),
        ("Cr 1.9 (on lisinopril 20 mg)", ["1.9"]),  # no earlier value: nothing added
        ("Cr 1.9\n(baseline 1.7)", ["1.9"]),  # on the next line: not this result's
    ],
)
def test_an_earlier_value_in_brackets_after_a_result_is_a_result(text, values):
    ents = [e for m in measurements.find(text) for e in m.entities(text)]
    found = measurements.with_reference_values(text, ents)
    assert [e.text for e in found if e.type == "Result"] == values
    assert [e.text for e in found if e.type == "Test"] == [e.text for e in ents if e.type == "Test"]


def test_an_earlier_value_follows_a_result_only():
    text = "Lisinopril 10 mg (increased from 20 mg) and Cr 1.9 (baseline 1.7)"
    ents = [_entity(text, 0, 10, "Drug"), _entity(text, 11, 16, "Dosage")]
    at = text.index("20 mg")
    ents.append(_entity(text, at, at + 5, "Dosage"))  # the model's "20 mg": a dose, kept
    ents += [e for m in measurements.find(text) for e in m.entities(text)]
    found = measurements.with_reference_values(text, sorted(ents, key=lambda e: e.start))
    assert [(e.text, e.type) for e in found] == [
        ("Lisinopril", "Drug"),
        ("10 mg", "Dosage"),
        ("20 mg", "Dosage"),
        ("Cr", "Test"),
        ("1.9", "Result"),
        ("1.7", "Result"),
    ]


def test_a_drug_on_hold_does_not_make_the_next_value_a_threshold():
    text = "Metformin 1,000 mg PO BID -- on hold, Cr 2.1"
    assert [text[slice(*m.value)] for m in measurements.find(text)] == ["2.1"]
    assert measurements.find("hold lisinopril for Cr > 2.1") == []


def test_normal_exam_shorthand_is_a_result():
    text = "Gen: NAD, A&Ox3. CV: RRR. Lungs: CTAB. Abd: soft, NT/ND. HEENT: MMM. ARRRGH, CTABS"
    ents = [_entity(text, 10, 15, "Problem"), _entity(text, 21, 24, "Test")]  # A&Ox3, RRR
    found = measurements.with_exam_shorthand(text, ents)
    assert [(e.text, e.type) for e in found] == [
        ("A&Ox3", "Result"),
        ("RRR", "Result"),
        ("CTAB", "Result"),
        ("soft", "Result"),  # a word after its organ's label
        ("NT/ND", "Result"),
        ("MMM", "Result"),
    ]
    text = (
        "Neck: supple\nResp: clear bilat\nGI: SOFT\nAbd: soft tissue mass\nsoft stools, clear fluid"
    )
    ents = [_entity(text, 6, 12, "Anatomy"), _entity(text, 45, 61, "Problem")]
    found = measurements.with_exam_shorthand(text, ents)
    assert [(e.text, e.type) for e in found] == [
        ("supple", "Result"),
        ("clear", "Result"),
        ("SOFT", "Result"),
        ("soft tissue mass", "Problem"),  # the model's, as it was
    ]
    text = "Calves soft, non-tender. Abd nondistended. Neuro: nonfocal. AVF patent; vein"
    text += " patent and compressible. PFO, patent foramen ovale"
    found = measurements.with_exam_shorthand(text, [_entity(text, 13, 23, "Problem")])
    assert [(e.text, e.type) for e in found] == [
        ("non-tender", "Result"),
        ("nondistended", "Result"),
        ("nonfocal", "Result"),
        ("patent", "Result"),
        ("patent", "Result"),
        ("compressible", "Result"),
    ]


def test_a_diet_or_a_restriction_holds_no_entity():
    text = "Low salt diet (2 g), fluid limit 1.5 L/day. Limit salt to 2 g a day and fluids to 2 L"
    text += " a day. Diet high in salt. Restrict fluid 1 L/day. Tolerated diet, Hgb 9.2"
    words = ["salt", "2 g", "1.5 L/day", "fluids", "2 L a day", "Diet", "fluid", "Hgb", "9.2"]
    at = 0
    model = []
    for w in words:
        at = text.index(w, at)
        model.append(_entity(text, at, at + len(w), "Result"))
        at += len(w)
    kept = measurements.without_diets(text, model)
    assert [e.text for e in kept] == ["Hgb", "9.2"]  # "tolerated diet" is no restriction


def test_a_measure_to_watch_is_a_test():
    text = "Check your weight every morning. VNA to check weight. Daily weights. weight gain"
    model = [_entity(text, 69, 80, "Problem")]  # "weight gain", the model's
    found = measurements.with_watched_tests(text, model)
    assert [(e.text, e.type) for e in found] == [
        ("weight", "Test"),
        ("weight", "Test"),
        ("weights", "Test"),
        ("weight gain", "Problem"),
    ]
    assert measurements.with_watched_tests("bear weight", []) == []


def test_a_tests_value_in_words_is_a_result():
    """A qualitative value right after a Test (a site between it and the value, or "was")
    is a Result where nothing was found over it; not in a condition, not after a non-test."""
    text = "UA neg, CT head negative. lipase was nl. CT if hCG neg. fever neg. Cr normal"

    def at(word: str, kind: str, after: int = 0) -> Entity:
        start = text.index(word, after)
        return _entity(text, start, start + len(word), kind)

    ents = [
        at("UA", "Test"),
        at("CT", "Test"),
        at("head", "Anatomy"),
        at("lipase", "Test"),
        at("hCG", "Test"),
        at("fever", "Problem"),
        at("Cr", "Test"),
        at("normal", "Result"),  # the model's stands
    ]
    got = measurements.with_qualitative_results(text, ents)
    results = [(e.text, e.confidence) for e in got if e.type == "Result"]
    assert results == [
        ("neg", measurements.CONFIDENCE),
        ("negative", measurements.CONFIDENCE),
        ("nl", measurements.CONFIDENCE),
        ("normal", 0.9),
    ]


def test_a_problem_lists_title_is_its_problem():
    from mslm_core.findings import TITLE_CONFIDENCE, problem_list_titles

    text = (
        "# Hypokalemia: K nadir 3.0\n#Anemia - iron studies sent\n# AKI\n"
        "# Dispo: home\n  # Gout\nHypokalemia: resolved"
    )
    found = {"hypokalemia", "anemia", "aki", "gout"}
    aki = text.index("AKI")
    model = [_entity(text, aki, aki + 3, "Problem")]
    got = problem_list_titles(text, model, lambda words: words.lower() in found)
    assert [(e.text, e.type, e.confidence) for e in got] == [
        ("Hypokalemia", "Problem", TITLE_CONFIDENCE),
        ("Anemia", "Problem", TITLE_CONFIDENCE),
        ("AKI", "Problem", 0.9),  # the model's, as it was
        ("Gout", "Problem", TITLE_CONFIDENCE),
    ]  # "Dispo" names no finding; a line without "#" is no list item


def test_procedures_in_shorthand_the_inventory_lacks_are_found(tmp_path):
    from mslm_core.errors import ConfigError
    from mslm_core.shorthand import ShorthandFinder, read_more

    finder = ShorthandFinder({"Problem", "Drug", "Test", "Procedure", "Anatomy", "Result"})
    text = "PSH: appy, L TKA 2019, s/p lap chole, C-section x2. Foley in place; AVF patent. PAD"
    assert [(text[a:b], k) for a, b, k in finder.find(text)] == [
        ("appy", "Procedure"),
        ("TKA", "Procedure"),
        ("lap chole", "Procedure"),
        ("C-section", "Procedure"),
        ("Foley", "Procedure"),
        ("AVF", "Procedure"),
        ("PAD", "Problem"),
    ]
    assert not finder.find("a pad under the heel")  # a spelling as written: capitals
    text = "24F w/ DM1 p/w n/v/d; FHx breast CA, colon CA. FENa 0.4%, FeUrea 28%; echo 2021: HFrEF"
    assert [(text[a:b], k) for a, b, k in finder.find(text)] == [
        ("DM1", "Problem"),
        ("n/v/d", "Problem"),
        ("breast CA", "Problem"),
        ("colon CA", "Problem"),
        ("FENa", "Test"),
        ("FeUrea", "Test"),
        ("echo", "Test"),
        ("HFrEF", "Problem"),
    ]
    assert not [k for *_, k in finder.find("Ca 8.9, CA 19-9 pending") if k == "Problem"]
    text = "Monitor off abx. Pressors if MAP < 65; avoid benzos. MgSO4 2 g IV, NaHCO3 drip"
    assert [(text[a:b], k) for a, b, k in finder.find(text) if k == "Drug"] == [
        ("abx", "Drug"),
        ("Pressors", "Drug"),
        ("benzos", "Drug"),
        ("MgSO4", "Drug"),
        ("NaHCO3", "Drug"),
    ]
    # contrast media, given or withheld, are drugs; the word in its other uses is not
    text = "CT A/P with IV contrast; CT head w/o contrast. AKI after contrast. No IV contrast"
    assert [text[a:b] for a, b, k in finder.find(text) if k == "Drug"] == ["contrast"] * 4
    text = "In contrast to prior, noncontrast CT head; contrast-enhanced MRI; contrast ratio"
    assert not [k for *_, k in finder.find(text) if k == "Drug"]
    assert not ShorthandFinder({"Problem", "Test"}).find("with IV contrast")  # no Drug type
    text = "Cont LR 1 L today; LR @ 100 mL/h, LR bolus. Pupils: LR brisk"  # lactated Ringer's
    assert [(a, k) for a, b, k in finder.find(text) if text[a:b] == "LR"] == [
        (5, "Drug"),
        (19, "Drug"),
        (34, "Drug"),
    ]
    # a short form with a sense that is imaging, before a body region: that imaging
    text = "CTA head/neck w/o LVO; CTA of the chest if wide. Lungs: CTA bilat. Lungs CTA, RRR"
    assert [k for a, b, k in finder.find(text) if text[a:b] == "CTA"] == ["Test", "Test"] + [
        "Result"
    ] * 2
    # "cath" is the heart's catheterization, a Test, but with a device's word next to it
    text = "s/p cath w/ stent; arrange cath. Foley cath in place, straight cath, cath site c/d/i"
    assert [k for a, b, k in finder.find(text) if text[a:b] == "cath"] == ["Test"] * 2 + [
        "Procedure"
    ] * 3
    assert "chole" not in [text[a:b] for a, b, _ in finder.find("choledocholithiasis")]
    assert not ShorthandFinder({"Problem", "Test"}).find("s/p appy")  # no Procedure type
    # a spelling typed '-' stands for no entity: a model's entity that is it alone is dropped
    no_entity = ShorthandFinder({"Problem", "Procedure"}, more={"ddx": "-", "appy": "Procedure"})
    text = "ddx: appy vs ddx of colitis"
    model = [_entity(text, 0, 3, "Problem"), _entity(text, 20, 27, "Problem")]
    assert [(e.text, e.type) for e in no_entity.merged(text, model)] == [
        ("appy", "Procedure"),
        ("colitis", "Problem"),
    ]
    assert "ddx" not in [text[a:b] for a, b, _ in no_entity.find(text)]
    bad = tmp_path / "more.tsv"
    bad.write_text("spellings\ttype\tlong_form\nTKA\tProcedure\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"more\.tsv:2: 3 tab-separated"):
        read_more(bad)


def test_regimen_words_are_no_entity_and_a_dose_after_a_drug_is_a_dosage():
    from mslm_core.regimen import doses, parse

    text = "Calcitriol 0.25 mcg PO daily; Metoprolol 25 mg PO BID x5 days"
    r = parse(text, text.index("25 mg"))
    assert (r.route, r.frequency, r.duration) == ("PO", "BID", "x5 days")
    ents = [
        _entity(text, 0, 10, "Drug"),
        _entity(text, 11, 19, "Result"),  # "0.25 mcg" after a drug: a dose
        _entity(text, 20, 28, "Result"),  # "PO daily": no entity
        _entity(text, 30, 40, "Drug"),
        _entity(text, 41, 61, "Dosage"),  # "25 mg PO BID x5 days" → "25 mg"
    ]
    assert [(e.text, e.type) for e in doses(text, ents)] == [
        ("Calcitriol", "Drug"),
        ("0.25 mcg", "Dosage"),
        ("Metoprolol", "Drug"),
        ("25 mg", "Dosage"),
    ]


def test_a_site_and_its_symptom_are_one_finding_where_they_name_one():
    from mslm_core.findings import findings_with_their_site

    text = "c/o chest pain and RUQ pain"
    ents = [
        _entity(text, 4, 9, "Anatomy"),
        _entity(text, 10, 14, "Problem"),
        _entity(text, 19, 22, "Anatomy"),
        _entity(text, 23, 27, "Problem"),
    ]
    joined = findings_with_their_site(text, ents, lambda t: t.lower() == "chest pain")
    assert [(e.text, e.type) for e in joined] == [
        ("chest pain", "Problem"),
        ("RUQ", "Anatomy"),
        ("pain", "Problem"),
    ]
    # a finding the model split in two, its site read as a finding of its own: one where the
    # two name one ("abdominal" + "pain"), two where they name none ("fever" + "chills")
    text = "abdominal pain, fever chills"
    ents = [_entity(text, a, b, "Problem") for a, b in [(0, 9), (10, 14), (16, 21), (22, 28)]]
    joined = findings_with_their_site(text, ents, lambda t: t.lower() == "abdominal pain")
    assert [e.text for e in joined] == ["abdominal pain", "fever", "chills"]


def test_no_measurement_or_dose_crosses_a_line_break():
    from mslm_core.regimen import DOSE

    text = "Na 134, K\n4. BP 120/\n80. Cr 1.2\nmg daily"
    found = [(text[slice(*m.label)], text[slice(*m.value)]) for m in measurements.find(text)]
    assert found == [("Na", "134"), ("Cr", "1.2")]
    assert [m.group() for m in DOSE.finditer("take 10\nmg, then 5 mg")] == ["5 mg"]


def test_shorthand_of_a_clinical_type_is_linked_by_what_notes_mean():
    from mslm_core.linking.builtin import DEFAULT_VOCABULARY, load_linker

    linker = load_linker(DEFAULT_VOCABULARY)
    text = "CP and SOB"
    ents = [_entity(text, 0, 2, "Problem"), _entity(text, 7, 10, "Problem")]
    cp, sob = linker.apply_all([text], [ents])[0]
    assert (cp.concept.name, sob.concept.name) == ("Chest Pain", "Dyspnea")
    # a PubMed corpus's type reads it as its abstracts do
    (disease,) = linker.apply_all([text], [[_entity(text, 0, 2, "Disease")]])[0]
    assert disease.concept is None or disease.concept.name != "Chest Pain"


def test_the_check_set_leaves_out_the_types_it_does_not_annotate(tmp_path):
    """benchmarks/note_style.py scores a model's entities of the check set's types only: a
    route or a frequency (GUIDELINES.md: not annotated) is neither right nor wrong, counted
    apart; one of them on a header still counts as on a header."""
    from note_style import score

    from harness.notestyle import parse

    path = tmp_path / "notes-x.md"
    path.write_text(
        "### x-001 | med_list\n<<MEDS:>>\n[[Metoprolol|Drug]] [[25 mg|Dosage]] PO BID\n",
        encoding="utf-8",
    )
    note = parse(path)[0]
    text = note.text

    def entity(words: str, kind: str) -> Entity:
        start = text.index(words)
        return Entity(start, start + len(words), words, kind, 0.9, 0.9, 1.0)

    judged = [entity("Metoprolol", "Drug"), entity("25 mg", "Dosage")]
    extra = [entity("PO", "Route"), entity("BID", "Frequency"), entity("MEDS", "Route")]
    plain = score(lambda texts: [judged], [note])
    more = score(lambda texts: [judged + extra], [note])
    assert plain["entities"]["strict"]["f1"] == more["entities"]["strict"]["f1"] == 1.0
    assert more["unjudged_types"] == {"Frequency": 1, "Route": 2}
    assert (
        more["layout"]["entities_on_a_header"] == 1 and plain["layout"]["entities_on_a_header"] == 0
    )


def test_a_test_or_drug_named_exactly_as_a_finding_is_a_problem():
    from mslm_core.findings import findings_by_name

    names = {("hives", "Problem"), ("weight gain", "Problem"), ("drainage", "Test")}
    names |= {("fever", "Problem"), ("fever", "Test")}  # a name of both kinds
    names |= {("HD", "Problem")}

    def names_a(text: str, kind: str) -> bool:
        return (text, kind) in names

    text = "hives, weight gain; no drainage. fever. HD today. cough"
    ents = [
        _entity(text, *_span(text, "hives"), "Drug"),
        _entity(text, *_span(text, "weight gain"), "Test"),
        _entity(text, *_span(text, "drainage"), "Problem"),  # never a Problem away
        _entity(text, *_span(text, "fever"), "Test"),  # its own kind's name too
        _entity(text, *_span(text, "HD"), "Procedure"),  # shorthand: the table's
        _entity(text, *_span(text, "cough"), "Test"),  # named as nothing
    ]
    kinds = [(e.text, e.type) for e in findings_by_name(ents, names_a)]
    assert kinds == [
        ("hives", "Problem"),
        ("weight gain", "Problem"),
        ("drainage", "Problem"),
        ("fever", "Test"),
        ("HD", "Procedure"),
        ("cough", "Test"),
    ]


def _found(text: str, *spans: tuple[str, str]) -> list[Entity]:
    """The model's entities: each (words, type) at its first place after the one before."""
    out, at = [], 0
    for words, kind in spans:
        at = text.index(words, at)
        out.append(_entity(text, at, at + len(words), kind))
        at += len(words)
    return out


def _read(entities: list[Entity]) -> list[tuple[str, str]]:
    return [(e.text, e.type) for e in entities]


@pytest.mark.parametrize(
    ("text", "model", "read"),
    [
        (
            "EXAM: CT A/P with IV contrast",
            [("CT A/P", "Result")],
            [("CT", "Test"), ("A/P", "Anatomy")],
        ),
        ("XR L foot w/o gas", [("XR L foot", "Anatomy")], [("XR", "Test"), ("L foot", "Anatomy")]),
        (
            "XR left hip and pelvis, 3 views",
            [],
            [("XR", "Test"), ("left hip", "Anatomy"), ("pelvis", "Anatomy")],
        ),
        (
            "CHEST X-RAY, 2 VIEWS",
            [("CHEST X-RAY", "Test")],
            [("CHEST", "Anatomy"), ("X-RAY", "Test")],
        ),
        ("MRI of the brain", [("MRI", "Test")], [("MRI", "Test"), ("brain", "Anatomy")]),
        ("RUQ US ordered", [], [("RUQ", "Anatomy"), ("US", "Test")]),
        (
            "CT ABD0MEN/PELVlS WlTH lV C0NTRAST",
            [],
            [("CT", "Test"), ("ABD0MEN", "Anatomy"), ("PELVlS", "Anatomy")],
        ),
        ("CTA head/neck", [], [("CTA", "Test"), ("head", "Anatomy"), ("neck", "Anatomy")]),
        # no region after it: not a study of one; A/P as the plan's header
        ("CT surgery consulted. US citizen. A/P: AKI", [], []),
    ],
)
def test_an_imaging_study_and_its_regions_are_a_test_and_sites(text, model, read):
    """As the guidelines annotate "chest CT": the study a Test, each region an Anatomy,
    whatever the model read over them as one span; what it read right is kept as it was."""
    ents = measurements.with_imaging_sites(text, _found(text, *model))
    assert _read(ents) == read
    kept = [e for e in ents if e.confidence == 0.9]  # the model's own, not replaced
    assert _read(kept) == [r for r in read if r in model]


@pytest.mark.parametrize(
    ("text", "model", "read"),
    [
        ("KCl 40 mEq PO daily", [("40 mEq PO daily", "Result")], [("40 mEq", "Dosage")]),
        ("KCl 40 mEq PO x2", [("40 mEq", "Result")], [("40 mEq", "Dosage")]),
        ("MgSO4 2 g IV", [("2 g IV", "Result")], [("2 g", "Dosage")]),
        (
            "glargine ↑ from 20 units to 26 units",
            [("20 units", "Result"), ("26 units", "Result")],
            [("20 units", "Dosage"), ("26 units", "Dosage")],
        ),
        # a value in a lab's unit, a volume or with more than a regimen after it stays a Result
        ("Na 134 mEq/L", [("134 mEq/L", "Result")], [("134 mEq/L", "Result")]),
        ("UOP 600 mL", [("600 mL", "Result")], [("600 mL", "Result")]),
        (
            "UOP 600 mL overnight",
            [("600 mL overnight", "Result")],
            [("600 mL overnight", "Result")],
        ),
    ],
)
def test_a_dose_read_as_a_result_is_a_dosage(text, model, read):
    from mslm_core import regimen

    assert _read(regimen.doses(text, _found(text, *model))) == read


def test_words_of_no_entity_are_dropped_and_pain_spreads_to_a_site():
    text = (
        "TECHNIQUE: Axial images, coronal reformats. XR CHEST PA AND LATERAL. NS 1 L bolus. "
        "recheck TSH. Podiatry saw pt. Vascular surgery 4 wks. CP radiates to L arm. "
        "s/p radiation 2012. Cardiology note reviewed. s/p surgery 2 days ago."
    )
    model = _found(
        text,
        ("Axial images", "Test"),
        ("coronal reformats", "Test"),
        ("LATERAL", "Result"),
        ("bolus", "Procedure"),
        ("recheck", "Procedure"),
        ("TSH", "Test"),
        ("Podiatry", "Procedure"),
        ("Vascular surgery", "Procedure"),
        ("CP", "Problem"),
        ("radiates", "Problem"),
        ("radiation", "Procedure"),  # a therapy: no site after it
        ("Cardiology", "Procedure"),  # no visit, no time: left to the model
        ("surgery", "Procedure"),  # done two days ago: no service
    )
    assert _read(measurements.without_words_of_no_entity(text, model)) == [
        ("TSH", "Test"),
        ("CP", "Problem"),
        ("L arm", "Anatomy"),
        ("radiation", "Procedure"),
        ("Cardiology", "Procedure"),
        ("surgery", "Procedure"),
    ]


def test_sizes_weights_distances_and_times_are_no_results_without_their_test():
    text = "10 lb weight gain. walking 50 ft. Wall thickening to 5 mm. lactate; insulin w/ 2h "
    text += "overlap. TAPSE 1.8 cm"
    model = _found(
        text,
        ("10 lb", "Result"),
        ("50 ft", "Result"),
        ("5 mm", "Result"),
        ("lactate", "Test"),
        ("2h", "Result"),
        ("TAPSE", "Test"),
        ("1.8 cm", "Result"),
    )
    assert _read(measurements.without_lone_results(text, model)) == [
        ("lactate", "Test"),
        ("TAPSE", "Test"),
        ("1.8 cm", "Result"),
    ]


def test_a_lab_a_plan_orders_again_or_waits_for_is_a_test():
    text = "recheck K this PM; f/u lipase. repeat INR, repeat lactate. narrow per cx. "
    text += "C diff not sent. Kept the K at bedside. per pt request"
    model = _found(text, ("INR", "Test"), ("lactate", "Drug"))
    found = measurements.with_ordered_tests(text, model)
    assert _read(found) == [
        ("K", "Test"),
        ("lipase", "Test"),
        ("INR", "Test"),
        ("lactate", "Test"),  # over the model's drug
        ("cx", "Test"),
        ("C diff", "Test"),
    ]
    assert [e.confidence for e in found if e.text == "INR"] == [0.9]  # the model's, kept


def test_a_drug_is_known_by_its_class_stem_or_by_the_dose_after_it():
    from mslm_core import regimen

    text = "ondansetron 4 mg IV, Metoprolol 25 mg; iron sucrose 200 mg IV. goal UF 3-4 L. protein"
    model = _found(
        text,
        ("Metoprolol", "Drug"),
        ("25 mg", "Dosage"),
        ("iron sucrose", "Test"),
        ("200 mg", "Dosage"),
        ("UF", "Procedure"),
        ("3-4 L", "Dosage"),
    )
    found = regimen.drugs_before_doses(text, regimen.drugs_by_stem(text, model))
    assert _read(found) == [
        ("ondansetron", "Drug"),  # -setron, found by its stem
        ("Metoprolol", "Drug"),
        ("25 mg", "Dosage"),
        ("iron sucrose", "Drug"),  # before its dose
        ("200 mg", "Dosage"),
        ("UF", "Procedure"),  # before a volume: not given
        ("3-4 L", "Dosage"),
    ]
    assert found[0].confidence == regimen.STEM_CONFIDENCE


def test_imaging_findings_and_procedures_are_found_by_name_off_headers():
    from mslm_core.findings import imaging_findings, procedures_by_name

    text = "MEDICATIONS - HEMODIALYSIS UNIT\nNo free air. adjacent fat stranding. s/p L hip "
    text += "replacement and cholecystectomy; HD today. Baker cyst."
    header = [(0, 31)]
    model = _found(text, ("cholecystectomy", "Procedure"), ("HD", "Procedure"))
    found = procedures_by_name(text, imaging_findings(text, model, header), header)
    assert _read(found) == [
        ("free air", "Problem"),
        ("fat stranding", "Problem"),
        ("hip replacement", "Procedure"),
        ("cholecystectomy", "Procedure"),
        ("HD", "Procedure"),
        ("cyst", "Problem"),
    ]


def test_a_site_and_what_is_said_of_it_are_cut_apart_unless_they_name_one_finding():
    from mslm_core.findings import findings_cut_from_their_site, findings_without_their_severity

    text = "R hip fracture. Calves soft. leg edema. knee pain. R hip dressing c/d/i. Moderate OA"
    model = _found(
        text,
        ("R hip fracture", "Problem"),
        ("Calves soft", "Problem"),
        ("leg edema", "Problem"),
        ("knee pain", "Problem"),
        ("R hip dressing", "Procedure"),
        ("Moderate", "Problem"),
        ("OA", "Problem"),
    )
    cut = findings_cut_from_their_site(text, model, lambda words: words == "leg edema")
    assert _read(findings_without_their_severity(text, cut, severity=True)) == [
        ("R hip", "Anatomy"),
        ("fracture", "Problem"),
        ("Calves", "Anatomy"),
        ("soft", "Result"),
        ("leg edema", "Problem"),  # named as one finding
        ("knee pain", "Problem"),  # pain is not cut from its site
        ("R hip", "Anatomy"),
        ("Moderate", "Severity"),
        ("OA", "Problem"),
    ]


@pytest.mark.parametrize("word", ["asymptomatic", "contraindicated", "physiologic", "stable"])
def test_a_word_said_of_a_finding_is_no_finding_alone(word):
    from mslm_core.findings import findings_without_their_severity

    text = f"{word}. {word} angina"
    model = _found(text, (word, "Problem"), (f"{word} angina", "Problem"))
    assert _read(findings_without_their_severity(text, model, severity=False)) == [
        (f"{word} angina", "Problem")
    ]
