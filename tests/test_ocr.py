"""OCR damage mended in what the model reads (mslm_core.ocr), and nothing else touched."""

from __future__ import annotations

import pytest

from mslm_core.ocr import lexicon, mended
from mslm_core.predict.windows import sentences_of


@pytest.mark.parametrize(
    ("scanned", "written"),
    [
        ("c0ugh", "cough"),  # 0 for o
        ("pulrnonary", "pulmonary"),  # rn for m
        ("rnarnmogram", "mammogram"),  # twice
        ("rng", "mg"),  # a unit
        ("G1ucose", "Glucose"),  # 1 for l
        ("lnsulin", "insulin"),  # l for I, in small letters
        ("lNDlCATl0N", "INDICATION"),  # capitals keep their case
        ("ASSESSRNENT", "ASSESSMENT"),
        ("BMl", "BMI"),  # an abbreviation the shorthand inventory knows
        ("HC03", "HC03"),  # two digits in a row: left as a number would be
        ("swe11ing", "swelling"),  # ... unless letters stand on both sides
        ("0SA", "OSA"),
        ("protoco1", "protocol"),
        ("thr0mb0phlebitis", "thrombophlebitis"),
        ("0meprazole", "omeprazole"),
    ],
)
def test_a_scanned_word_is_read_as_it_was_written(scanned: str, written: str) -> None:
    assert mended(scanned) == written


@pytest.mark.parametrize(
    "word",
    [
        # words, whatever their shape
        "turn",
        "modern",
        "Return",
        "HbA1c",
        "A1c",
        "SpO2",
        "mL",
        "Cl",
        "HCl",
        "T1",
        "S1",
        # numbers with their unit, ordinals, names with their number
        "10th",
        "1cm",
        "1st",
        "1year",
        "100m",
        "10g",
        "Table1",
        "sigma1",
        "Day1",
        # genes, stages and codes of the biomedical corpora
        "mGluR1",
        "hMre11",
        "CSF1R",
        "CACNA1A",
        "T1WI",
        "pT1bN0M0",
        "GD1",
        "M1V",
        "RNFL",
        "ARNP",
        "sgk1",
        "CD1a",
        "tsg101",
        "D15",
        "11q",
    ],
)
def test_what_no_scanner_damaged_is_left_alone(word: str) -> None:
    assert mended(word) == word


def test_the_lexicon_holds_english_the_linking_vocabulary_and_the_shorthand() -> None:
    known = lexicon()
    assert {"cough", "pulmonary"} <= known.keys()  # pyspellchecker's English list
    assert known["cough"] > 1  # with its frequency
    assert "metformin" in known and "hypernatremia" in known  # MeSH names and synonyms
    assert "hco3" in known and "bmi" in known  # the shorthand inventory


def test_the_model_reads_the_mended_words_at_the_notes_own_offsets() -> None:
    text = "Pt w/ c0ugh, cont rnetformin 500 rng P0 BlD."
    sentences, where = sentences_of([text])
    assert sentences == [
        ["Pt", "w", "/", "cough", ",", "cont", "metformin", "500", "mg", "P0", "BlD", "."]
    ]
    # the spans are the note's: a mention found on a mended word is the scanned text
    assert [text[a:b] for a, b in where[0].spans][3] == "c0ugh"
    assert [text[a:b] for a, b in where[0].spans][6] == "rnetformin"
