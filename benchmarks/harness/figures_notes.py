"""The measured figures of docs/notes.md, each read from the committed result file it comes
from (see :mod:`harness.figures`).

The note-style check set's files: ``note-style/test.json`` (the recipe's model as the service
reads it, ``reading``, and the note-style recipe's model, ``notestyle``, on the 65 test notes),
``note-style/test-before.json`` (the code before this work, ``before``), and their ``dev``
counterparts on the 34 development notes; the source corpora's test F1 comes from
``clinical/ablations/merged-note-style-0.3-s1.json`` (the note-style model) and
``clinical/summary.json`` (the recipe, three seeds). The lines with no committed file are
:data:`UNMEASURED`.
"""

from __future__ import annotations

from typing import Any

from harness.figures import Fig, Line, Unmeasured, _row, load

PAGE = "docs/notes.md"
TEST = "note-style/test.json"
BEFORE = "note-style/test-before.json"
DEV = "note-style/dev.json"
DEV_BEFORE = "note-style/dev-before.json"
SERVED = "note-style/served-test.json"
SERVED_DEV = "note-style/served-dev.json"
#: the first start's model as trained on an AMD EPYC, with and without the shorthand finder
EPYC = "note-style/served-test-epyc.json"
ALONE = "note-style/served-test-without-shorthand.json"
#: more short forms of our own: that model trained again on an AMD EPYC, with the rules before
#: (commit ab4a6fd) and after them
SHORT_FORMS = "note-style/short-forms/"
RULES = "note-style/note-rules/"
#: the round of rules for studies, doses, plans and sites (that model trained again, fc8f482 before)
WORDS = "note-style/note-words/"
UNMENDED = "note-style/served-test-unmended.json"
# the served model's figures with the words mended, as they were when the mending came (commit
# 08726e2, the same model and rules as the unmended run beside them)
OCR_TEST = "history/08726e2/note-style/served-test.json"
# the served figures before the rules of issue 59's last round (commit d322c71)
BEFORE_TEST = "history/d322c71/note-style/served-test.json"
BEFORE_DEV = "history/d322c71/note-style/served-dev.json"
OCR_DEV = "history/08726e2/note-style/served-dev.json"
UNMENDED_DEV = "note-style/served-dev-unmended.json"
OCR = "ocr.json"
NOTE_STYLE_MODEL = "clinical/ablations/merged-note-style-0.3-s1.json"
CLINICAL = "clinical/summary.json"

LANGUAGE = ("details", "language")
CORPORA = ("MACCROBAT2020", "CHIA", "BC5CDR-IOB", "NCBI-disease-IOB")


#: the table's columns
MODELS = ("before", "reading", "notestyle", "served")


def _model(name: str) -> tuple[str, tuple[str, ...]]:
    """The file and the keys of a model's details on the test notes."""
    source = {"before": BEFORE, "served": SERVED}.get(name, TEST)
    return source, ("details", "models", name)


def _fig(name: str, keys: tuple[str, ...], fmt: str) -> Fig:
    """A figure of a model's details on the test notes (``before``, ``reading``, ``notestyle``)."""
    source, at = _model(name)
    return Fig(source, (*at, *keys), fmt)


def _each(keys: tuple[str, ...], fmt: str) -> list[Fig]:
    """A figure for each of the four columns: before, this reading, the note-style recipe, the
    first start's model."""
    return [_fig(name, keys, fmt) for name in MODELS]


def _scanned(source: str, match: str) -> list[Fig]:
    """The F1 of the check set's scanned notes (strict or overlap) in a served-model file."""
    return [Fig(source, ("details", "models", "served", "per_style", "ocr", match, "f1"), "3")]


def _found_before_after(folder: str) -> list[Fig]:
    """The test notes' shorthand found and typed right, before and after (``folder``)."""
    return [
        Fig(folder + f"{name}.json", ("served", "shorthand_found"), "%1")
        for name in ("test-before", "test")
    ]


def _short_forms(name: str, folder: str = SHORT_FORMS) -> list[Fig]:
    """Strict and overlap F1 of a run of a before and after (the short forms', or the rules'
    of ``folder``)."""
    return [
        Fig(folder + f"{name}.json", ("served", f"{kind}_f1"), "4")
        for kind in ("strict", "overlap")
    ]


def _dev_and_test(data: Any, *keys: str) -> float:
    """A count over the whole check set: the test notes' (``data``) and the development notes'
    (``note-style/dev.json``, read here: the figure names only the test notes' file)."""
    total = 0.0
    for part in (data, load(DEV)):
        for key in keys:
            part = part[key]
        total += float(part)
    return total


def _notes(data: Any) -> float:
    return _dev_and_test(data, "notes")


def _sentences(data: Any) -> float:
    return _dev_and_test(data, "sentences")


def _entities(data: Any) -> float:
    return _dev_and_test(data, "details", "models", "notestyle", "entities", "gold")


def _headers(data: Any) -> float:
    return _dev_and_test(data, "details", "models", "notestyle", "layout", "gold_headers")


_TYPES = ("Dosage", "Result", "Test", "Problem", "Drug", "Anatomy", "Procedure")
_STYLES = ("discharge", "ed_triage", "med_list", "progress", "radiology", "ocr")


def _shorthand(source: str, group: str) -> Fig:
    """The share of a group of the test notes' shorthand found and typed right, in %."""
    return Fig(
        source, ("details", "models", "served", "shorthand", group, "found_and_typed_right"), "%1"
    )


LINES: tuple[Line, ...] = (
    # -- language ---------------------------------------------------------------------------
    _row(
        PAGE,
        "On the check set's",
        Fig(TEST, (*LANGUAGE, "english_notes"), ","),
        Fig(TEST, (*LANGUAGE, "english_lines_judged"), ","),
    ),
    _row(
        PAGE,
        "(the most any reached as another language: ",
        Fig(SERVED, (*LANGUAGE, "english_most_other_probability"), "2"),
        Fig(SERVED, (*LANGUAGE, "other_notes"), ","),
    ),
    _row(
        PAGE,
        "a third of them short and heavy with abbreviations",
        Fig(TEST, (*LANGUAGE, "other_notes_found"), ","),
    ),
    _row(
        PAGE,
        "language (de ",
        *[
            Fig(TEST, (*LANGUAGE, "found_per_language", code), ",")
            for code in ("de", "es", "fr", "it", "nl", "pt")
        ],
        None,  # of 10 each: the notes written in each language (languages.tsv)
    ),
    # -- the check set ----------------------------------------------------------------------
    _row(
        PAGE,
        "synthetic notes written for this project",
        Fig(TEST, _notes, ","),
    ),
    _row(
        PAGE,
        "notes and OCR-damaged text —",
        Fig(TEST, _sentences, ","),
        Fig(TEST, _entities, ","),
    ),
    _row(PAGE, "context attributes, and", Fig(TEST, _headers, ",")),
    _row(
        PAGE,
        "the figures here are the other",
        Fig(TEST, ("notes",), ","),
        Fig(TEST, ("sentences",), ","),
    ),
    _row(
        PAGE,
        "entities). `python benchmarks/note_style.py run",
        Fig(TEST, ("details", "models", "notestyle", "entities", "gold"), ","),
    ),
    # -- the table --------------------------------------------------------------------------
    _row(
        PAGE,
        "| strict F1 / overlap F1 |",
        *[
            f
            for name in MODELS
            for f in (
                _fig(name, ("entities", "strict", "f1"), "3"),
                _fig(name, ("entities", "overlap", "f1"), "3"),
            )
        ],
    ),
    _row(
        PAGE,
        "| entities across a line break |",
        *_each(("layout", "entities_across_a_line_break"), ","),
    ),
    _row(
        PAGE,
        "| entities on a section header (of",
        _fig("notestyle", ("layout", "gold_headers"), ","),
        *_each(("layout", "entities_on_a_header"), ","),
    ),
    _row(
        PAGE,
        "| shorthand found and typed right: seen in training / held out |",
        *[
            _fig(name, ("shorthand", part, "found_and_typed_right"), "2")
            for name in MODELS
            for part in ("seen", "held_out")
        ],
    ),
    _row(
        PAGE,
        "| vitals: test and value exact, the test with no context attribute |",
        *[
            _fig(name, ("vitals", key), "2" if name == "before" else "1")
            for name in MODELS
            for key in ("test_and_result_exact", "test_without_context_attribute")
        ],
    ),
    _row(
        PAGE,
        "| expected calibration error |",
        *_each(("confidence", "expected_calibration_error"), "3"),
    ),
    _row(
        PAGE,
        "| medication lists: right drugs below 0.5 / wrong entities at or above |",
        None,  # 0.5: the confidence threshold
        *[
            _fig(name, ("confidence", "med_lists", key), ",")
            for name in MODELS
            for key in ("right_drugs_below_0.5", "right_drugs", "wrong_at_or_above_0.5", "wrong")
        ],
    ),
    # -- per type and style (strict F1: before → the note-style recipe) ----------------------
    _row(
        PAGE,
        "overlap): Dosage",
        *[
            _fig(name, ("per_type", t, "strict", "f1"), "2")
            for t in _TYPES[:4]
            for name in ("before", "notestyle")
        ],
    ),
    _row(
        PAGE,
        ", Anatomy ",
        *[
            _fig(name, ("per_type", t, "strict", "f1"), "2")
            for t in _TYPES[4:]
            for name in ("before", "notestyle")
        ],
        _fig("notestyle", ("per_style", "discharge", "strict", "f1"), "2"),
    ),
    _row(
        PAGE,
        ", medication lists ",
        *[_fig("notestyle", ("per_style", s, "strict", "f1"), "2") for s in _STYLES[1:]],
    ),
    # -- what does what ---------------------------------------------------------------------
    _row(
        PAGE,
        "a point there (",
        Fig(DEV, ("reading", "strict_f1"), "3"),
        Fig(DEV, ("notestyle", "strict_f1"), "3"),
        Fig(TEST, ("reading", "strict_f1"), "3"),
        Fig(TEST, ("notestyle", "strict_f1"), "3"),
    ),
    _row(
        PAGE,
        "test F1 on MACCROBAT2020, CHIA, BC5CDR and NCBI-disease is",
        *[Fig(NOTE_STYLE_MODEL, ("test", c, "strict", "f1"), "%1") for c in CORPORA],
    ),
    _row(
        PAGE,
        "(three seeds;",
        *[Fig(CLINICAL, ("table", c, "merged", "all", "strict_f1", "mean"), "1") for c in CORPORA],
    ),
    # -- not reached ------------------------------------------------------------------------
    _row(
        PAGE,
        "The goals were strict F1",
        None,  # ≥ 0.80 and ≥ 0.90: the goals
        None,
        Fig(SERVED, ("served", "strict_f1"), "3"),
    ),
    _row(
        PAGE,
        "and 0.879; with the rules above",
        Fig(SERVED, ("served", "overlap_f1"), "3"),
        Fig(RULES + "test.json", ("served", "strict_f1"), "3"),
        Fig(RULES + "test.json", ("served", "overlap_f1"), "3"),
        Fig(WORDS + "test.json", ("served", "strict_f1"), "3"),
        Fig(WORDS + "test.json", ("served", "overlap_f1"), "4"),
    ),
    _row(
        PAGE,
        "shorthand-led findings (92.4 % over all",
        None,  # ≥ 90 %: the goal
        _fig("served", ("shorthand", "all", "found_and_typed_right"), "%1"),
        _fig("served", ("shorthand", "held_out", "found_and_typed_right"), "%1"),
    ),
    # -- what does what, step by step (the steps between were runs of their own)
    _row(
        PAGE,
        "the recipe's model from 0.48 to",
        Fig(DEV_BEFORE, ("before", "strict_f1"), "2"),
        None,  # 0.68 after the layout, doses and measurements: that run left no committed file
        None,  # 0.75 with shorthand as entities: that run left no committed file
    ),
    _row(
        PAGE,
        "found from 51 to 83 %); the rest of the reading to",
        None,  # 51 and 83 %: the shorthand found between the steps, in no committed file
        None,
        Fig(DEV, ("reading", "strict_f1"), "2"),
    ),
    # -- the first start's model
    _row(
        PAGE,
        "are left out of the scores and counted apart:",
        Fig(
            SERVED, lambda d: sum(d["details"]["models"]["served"]["unjudged_types"].values()), ","
        ),
    ),
    _row(
        PAGE,
        "where the model puts 0 entities on a header now",
        Fig("note-style/served-dev.json", ("served", "on_headers"), "0"),
    ),
    _row(
        PAGE,
        "On the development notes it scores",
        Fig("note-style/served-dev.json", ("served", "strict_f1"), "3"),
    ),
    _row(
        PAGE,
        "procedures (F1",
        _fig("notestyle", ("per_type", "Procedure", "strict", "f1"), "2"),
    ),
    _row(
        PAGE,
        "Hypothetical findings stay poor (F1",
        _fig("notestyle", ("context", "hypothetical", "f1"), "2"),
    ),
    # -- scanned text: benchmarks/ocr.py, and the served model with and without the mending
    _row(
        PAGE,
        "it mends 266 of the",
        Fig(OCR, ("scanned_notes_words_changed",), ","),
        Fig(OCR, ("details", "sources", "note-style, scanned notes", "words"), ","),
        Fig(OCR, ("clean_words_changed",), ","),
        Fig(OCR, ("clean_words",), ","),
    ),
    _row(PAGE, "→ `hema`), in 0.4 µs a word", Fig(OCR, ("microseconds_per_word",), "1")),
    _row(
        PAGE,
        "together: strict / overlap ",
        *[
            Fig(f, ("served", k), "3")
            for f in (BEFORE_DEV, SERVED_DEV, BEFORE_TEST)
            for k in ("strict_f1", "overlap_f1")
        ],
        after='title, "nadir" or "peaked" between a test and its value',
    ),
    _row(
        PAGE,
        "→ 0.",
        Fig(SERVED, ("served", "strict_f1"), "3"),
        Fig(SERVED, ("served", "overlap_f1"), "3"),
        after="together: strict / overlap ",
    ),
    _row(
        PAGE,
        "the scanned test notes: 0.854 / 0.897 against",
        *_scanned(OCR_TEST, "strict"),
        *_scanned(OCR_TEST, "overlap"),
        *_scanned(UNMENDED, "strict"),
        *_scanned(UNMENDED, "overlap"),
        Fig(OCR_TEST, ("served", "strict_f1"), "3"),
    ),
    _row(
        PAGE,
        "against 0.809 / 0.863. On the development notes",
        Fig(OCR_TEST, ("served", "overlap_f1"), "3"),
        Fig(UNMENDED, ("served", "strict_f1"), "3"),
        Fig(UNMENDED, ("served", "overlap_f1"), "3"),
        *_scanned(OCR_DEV, "overlap"),
    ),
    _row(
        PAGE,
        "on the scanned ones and 0.865 against 0.862 on all",
        *_scanned(UNMENDED_DEV, "overlap"),
        Fig(OCR_DEV, ("served", "overlap_f1"), "3"),
        Fig(UNMENDED_DEV, ("served", "overlap_f1"), "3"),
        Fig(OCR_DEV, ("served", "strict_f1"), "3"),
    ),
    _row(
        PAGE,
        "): the model reads the mended words as prose",
        Fig(UNMENDED_DEV, ("served", "strict_f1"), "3"),
    ),
    # -- what the model reads of shorthand without the finder (the EPYC build, test notes)
    _row(
        PAGE,
        "of the test notes' shorthand it was shown in training and",
        *(_shorthand(ALONE, group) for group in ("seen", "held_out")),
    ),
    _row(
        PAGE,
        "out of it, where the whole pipeline finds",
        *(_shorthand(EPYC, group) for group in ("seen", "held_out")),
    ),
    _row(
        PAGE,
        "whose strict / overlap F1 there are",
        *(Fig(EPYC, ("served", f"{kind}_f1"), "3") for kind in ("strict", "overlap")),
    ),
    # -- more short forms of our own (before and after, the EPYC build again)
    _row(
        PAGE,
        "strict / overlap F1 0.8283 / 0.8818",
        *_short_forms("dev-before"),
        *_short_forms("dev"),
    ),
    _row(
        PAGE,
        "on the development notes, 0.8235 / 0.8801",
        *_short_forms("test-before"),
        *_short_forms("test"),
    ),
    _row(PAGE, "found and typed right 92.4 → 92.5 % there", *_found_before_after(SHORT_FORMS)),
    # -- rules for what the development notes still missed (before and after, EPYC again)
    _row(PAGE, "(`m-20261207211703`, read before with", *_short_forms("dev-before", RULES)[:1]),
    _row(
        PAGE,
        "/ 0.8862 → 0.8528 / 0.9056 on",
        *_short_forms("dev-before", RULES)[1:],
        *_short_forms("dev", RULES),
        *_short_forms("test-before", RULES),
        *_short_forms("test", RULES),
    ),
    _row(PAGE, "the shorthand found and typed right 92.5 → 93.2 %", *_found_before_after(RULES)),
    # -- studies, doses, plans and sites (before and after, the EPYC build again)
    _row(
        PAGE,
        "rules of commit fc8f482): strict / overlap F1",
        *_short_forms("dev-before", WORDS),
        *_short_forms("dev", WORDS),
    ),
    _row(
        PAGE,
        "development notes, 0.8355 / 0.8910 → 0.8477 / 0.9001",
        *_short_forms("test-before", WORDS),
        *_short_forms("test", WORDS),
    ),
    _row(PAGE, "typed right 93.2 → 94.5 % there", *_found_before_after(WORDS)),
)

#: The page's lines whose decimals are no figure of a committed result file, and why.
UNMEASURED: tuple[Unmeasured, ...] = (
    Unmeasured(PAGE, "bound (`< 7`, `> 101.5`, `more than 3 lbs`)", "examples of bounds"),
    Unmeasured(PAGE, "a problem list's title is its problem", "an example of a problem list"),
    Unmeasured(PAGE, "test (`call for fever > 101.5`, `pressors if MAP < 65`)", "examples"),
    Unmeasured(PAGE, "(`troponin < 0.01`).", "an example of a bound a test gave"),
    Unmeasured(PAGE, "no Result written as a bound that no test measured", "examples of bounds"),
    Unmeasured(PAGE, "`BP 168/94`, `HR 102`", "examples of what the vitals reader takes"),
    Unmeasured(PAGE, "1.8 cm`, `E/e' 16`, `FENa 0.4%`", "examples of echo measures and scores"),
    Unmeasured(PAGE, "salt diet (2 g)`, `Limit salt to 2 g a day", "examples of diets"),
    Unmeasured(PAGE, "`Cr 1.9 (baseline 1.7)`", "examples of earlier values in brackets"),
    Unmeasured(PAGE, "a weight, a distance or a time with no test", "examples of sizes"),
    Unmeasured(PAGE, "`10 lb`, `50 ft`, `w/ 2h overlap`", "examples of sizes and times"),
    Unmeasured(
        PAGE,
        "(it rose 0.0008 with it)",
        "the test notes read between two steps of the round (0.8978 → 0.8986), no file kept",
    ),
    Unmeasured(PAGE, "a drug `on hold, Cr 2.1` makes no threshold", "examples"),
    Unmeasured(PAGE, "not `PT 14.2`, `PT/INR` or a patient", "examples of no therapy"),
    Unmeasured(PAGE, "`Cr 1.4`, `troponin 0.4 ng/mL`", "examples of what the vitals reader takes"),
    Unmeasured(
        PAGE,
        "1,295 clinical short forms and their 2,612 senses",
        "counts of the packaged table mslm_core/data/shorthand.tsv, no result file",
    ),
    Unmeasured(PAGE, "(Grossman Liu et al., *Scientific Data* 2021", "a year and a licence"),
    Unmeasured(PAGE, "0.5 or more, is annotated with a warning", "a setting (the threshold)"),
    Unmeasured(PAGE, "*note-style recipe*: the recipe with `note_style` 0.3", "a setting, a seed"),
    Unmeasured(PAGE, "`note_style` 0.3 and the regimen", "a setting (note_style 0.3)"),
)
