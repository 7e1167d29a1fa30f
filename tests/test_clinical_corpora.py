"""The clinical corpora: pinned fetching (from a git clone here; the same checks apply to
downloads) and the brat readers that turn MACCROBAT2020 and CHIA into gold labels."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from harness.clinical import chia_gold, maccrobat_gold
from mslm_core.corpora import PinnedCorpus, fetch_corpus, pinned, read_brat
from mslm_core.errors import ConfigError


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture()
def clone(tmp_path) -> tuple[Path, str, bytes]:
    repo = tmp_path / "upstream"
    (repo / "data").mkdir(parents=True)
    payload = b"T1\tSign_symptom 0 5\tfever\n"
    (repo / "data" / "a.ann").write_bytes(payload)
    git(repo, "init", "-q")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "data")
    return repo, git(repo, "rev-parse", "HEAD"), payload


def test_fetch_checks_every_file_against_its_pinned_sha256(clone, tmp_path, monkeypatch):
    repo, commit, payload = clone
    good = hashlib.sha256(payload).hexdigest()

    def pin(digest: str) -> None:
        corpus = PinnedCorpus("T", "o/r", commit, {"data/a.ann": digest}, "CC0")
        monkeypatch.setattr(pinned, "corpora", lambda: {"T": corpus})

    pin("0" * 64)
    with pytest.raises(ConfigError, match=r"data/a.ann has sha256 .* pinned 000000000000"):
        fetch_corpus("T", tmp_path / "cache", git_dir=repo)
    assert not (tmp_path / "cache" / "T" / "data" / "a.ann").exists()  # never kept
    pin(good)
    root = fetch_corpus("T", tmp_path / "cache", git_dir=repo)
    assert (root / "data" / "a.ann").read_bytes() == payload
    assert (root / ".complete").read_text().strip() == commit
    (repo / ".git").rename(repo / ".moved")  # a second call reads nothing
    assert fetch_corpus("T", tmp_path / "cache", git_dir=repo) == root
    with pytest.raises(ConfigError, match="unknown corpus 'nope'"):
        fetch_corpus("nope", tmp_path / "cache")


def test_fetch_names_a_clone_without_the_pinned_commit(clone, tmp_path, monkeypatch):
    repo = clone[0]
    corpus = PinnedCorpus("T", "o/r", "f" * 40, {"data/a.ann": "0" * 64}, "CC0")
    monkeypatch.setattr(pinned, "corpora", lambda: {"T": corpus})
    with pytest.raises(ConfigError, match=r"has no data/a.ann at ffffffffffff"):
        fetch_corpus("T", tmp_path / "cache", git_dir=repo)


def test_the_pinned_corpora_are_the_issue_s_commits():
    table = pinned.corpora()
    assert table["MACCROBAT2020"].commit == "f2b522984cc621d5c7e00fbce02ddeee2a5b8077"
    assert table["CHIA"].commit == "ed84384ba70275eac69d273eb5325b321cda1c72"
    assert len(table["MACCROBAT2020"].files) == 401  # every file, each with its sha256
    assert all(len(d) == 64 for d in table["MACCROBAT2020"].files.values())


def write(folder: Path, name: str, text: str, ann: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.txt").write_bytes(text.encode())
    (folder / f"{name}.ann").write_bytes(ann.encode())
    return folder / f"{name}.txt"


def test_brat_offsets_count_crlf_and_entity_texts_may_span_lines(tmp_path):
    text = "No fever\r\nCough and\r\nrash"
    ann = (
        "T1\tCondition 3 8\tfever\n"
        "T2\tCondition 10 25\tCough and\n"  # an entity text holding a line break…
        "rash\n"  # …continues on the next line of the .ann
        "T3\tCondition 10 15;21 25\tCough rash\n"
        "E1\tCondition:T1 \n"
    )
    doc = read_brat(write(tmp_path, "d", text, ann))
    assert doc.entities["T1"].text == "fever"
    assert doc.entities["T2"].text == "Cough and\r\nrash"
    assert (doc.entities["T3"].start, doc.entities["T3"].end) == (10, 25)  # outer extent
    assert doc.events == {"E1": "T1"}
    write(tmp_path, "bad", "x", "T1\tCondition zero 1\tx\n")
    with pytest.raises(ConfigError, match=r"bad.ann:1: not brat standoff"):
        read_brat(tmp_path / "bad.txt")


def test_maccrobat_polarity_and_chia_negation_through_a_scope(tmp_path):
    text = "No fever, possible rash, cough."
    ann = (
        "T1\tSign_symptom 3 8\tfever\nE1\tSign_symptom:T1 \nA1\tPOLARITY E1 NEG\n"
        "T2\tSign_symptom 19 23\trash\nE2\tSign_symptom:T2 \nA2\tPOLARITY E2 UNCERTAIN\n"
        "T3\tSign_symptom 25 30\tcough\nE3\tSign_symptom:T3 \n"
        "T4\tDate 0 2\tNo\n"  # not an event: not scored
    )
    (doc,) = maccrobat_gold(write(tmp_path / "m", "d", text, ann).parent)
    assert [(e.type, e.negated, e.possible) for e in doc.entities] == [
        ("Sign_symptom", True, False),
        ("Sign_symptom", False, True),
        ("Sign_symptom", False, False),
    ]
    text = "No diabetes or asthma; suspected gout; eczema"
    ann = (
        "T1\tNegation 0 2\tNo\nT2\tCondition 3 11\tdiabetes\nT3\tCondition 15 21\tasthma\n"
        "T4\tScope 3 21\tdiabetes or asthma\nR1\tHas_negation Arg1:T4 Arg2:T1\t\n"
        "T5\tMood 23 32\tsuspected\nT6\tCondition 33 37\tgout\nR2\tHas_mood Arg1:T6 Arg2:T5\t\n"
        "T7\tCondition 39 45\teczema\n"
    )
    (doc,) = chia_gold(write(tmp_path / "c", "d", text, ann).parent)
    assert [(text[e.start : e.end], e.negated, e.possible) for e in doc.entities] == [
        ("diabetes", True, False),
        ("asthma", True, False),
        ("gout", False, True),
        ("eczema", False, False),
    ]


# -- BioScope's clinical part and MTSamples (benchmarks/assertion.py) ---------------------------
ANON = """<?xml version="1.0" encoding="utf-8"?>
<Annotation><DocumentSet>
<Document type="Medical_record"><DocID type="CMC_DOCID">7</DocID>
  <DocumentPart type="Impression">
    <sentence id="S1.1">*.</sentence>
    <sentence id="S1.2"><xcope id="X1"><cue type="negation" ref="X1">*</cue> * *</xcope>.</sentence>
    <sentence id="S1.3"><xcope id="X2"><cue type="speculation" ref="X2">*</cue> * * * *
      * *</xcope>.</sentence>
  </DocumentPart>
  <DocumentPart type="History"><sentence id="S1.4">* * * *, *.</sentence></DocumentPart>
</Document>
<Document type="Medical_record"><DocID type="CMC_DOCID">8</DocID>
  <DocumentPart type="Impression"><sentence id="S2.1">* * * *.</sentence></DocumentPart>
</Document>
</DocumentSet></Annotation>"""
CMC = """<docs>
<doc id="7"><texts>
  <text type="CLINICAL_HISTORY">Cough for three days, fever.</text>
  <text type="IMPRESSION">1. No focal pneumonia. Likely chronic changes at the lung base.</text>
</texts></doc>
<doc id="8"><texts><text type="IMPRESSION">Too few words.</text></texts></doc>
</docs>"""


def test_bioscope_gets_its_words_back_and_every_content_word_its_scopes(tmp_path):
    from harness.context_corpora import bioscope_gold

    (tmp_path / "anon.xml").write_text(ANON, encoding="utf-8")
    (tmp_path / "cmc.xml").write_text(CMC, encoding="utf-8")
    docs, report = bioscope_gold(tmp_path / "anon.xml", [tmp_path / "cmc.xml"])
    (doc,) = docs
    assert doc.text == (
        "1.\nNo focal pneumonia.\nLikely chronic changes at the lung base.\n"
        "Cough for three days, fever.\n"
    )
    said = {doc.text[g.start : g.end]: (g.negated, g.possible) for g in doc.entities}
    # cue words, stop words and numbers are not scored spans
    assert not {"No", "Likely", "at", "the", "1"} & set(said)
    assert said["focal"] == said["pneumonia"] == (True, False)
    assert said["chronic"] == said["lung"] == said["base"] == (False, True)
    assert said["Cough"] == said["fever"] == (False, False)
    assert report["parts_skipped"] == ["8/Impression"]  # 4 stars, 3 words: not guessed


def test_mtsamples_headers_go_back_on_their_lines_and_name_their_sections():
    from harness.context_corpora import FLATTENED_HEADER, HEADER_LINE, silver_section

    flat = "SUBJECTIVE:,  Cough.,MEDICATIONS: , Aspirin.,FAMILY HISTORY:,  Diabetes."
    restored = FLATTENED_HEADER.sub(lambda m: "\n" + m.group(1) + ": ", flat).strip()
    assert restored == "SUBJECTIVE: Cough.\nMEDICATIONS: Aspirin.\nFAMILY HISTORY: Diabetes."
    assert [m.group(1) for m in HEADER_LINE.finditer(restored)] == [
        "SUBJECTIVE",
        "MEDICATIONS",
        "FAMILY HISTORY",
    ]
    assert silver_section("FHX") == silver_section("FAMILY MEDICAL HISTORY") == "family_history"
    assert silver_section("PAST MEDICAL HISTORY") == silver_section("PMH") == "past_medical_history"
    assert silver_section("PAST SURGICAL HISTORY") == "past_surgical_history"
    assert silver_section("DRUG ALLERGIES") == "allergy"
    assert silver_section("ALLERGIC/IMMUNOLOGIC") is None  # a review-of-systems item
    assert silver_section("SOCIAL HISTORY") is None


def test_sections_are_scored_per_header_line():
    from harness.context_corpora import score_sections

    text = "FAMILY HISTORY: Diabetes.\nALLERGIES: None.\nPLAN: Rest."
    notes = [("1", "x", text)]
    right = [[[0, 14, "family_history"], [26, 35, "allergy"], [43, 47, "observation_and_plan"]]]
    wrong = [[[0, 14, "social_history"]]]
    out = score_sections(notes, {"good": (right, 0.01), "poor": (wrong, 0.01)})
    assert out["header_lines"] == 3
    assert out["good"]["coverage"] == 1.0 and out["poor"]["coverage"] == round(1 / 3, 4)
    assert out["good"]["family_history"]["f1"] == 1.0 and out["good"]["allergy"]["f1"] == 1.0
    assert out["poor"]["family_history"]["recall"] == 0.0


def test_the_recipe_is_what_its_decisions_from_dev_figures_choose():
    """benchmarks/recipe_decisions.py's committed file is what it computes from the committed
    runs (the corpora's words taken from the file), and the recipe takes what the rule chooses
    and none of what it does not, but note style, taken for notes."""
    import json

    from recipe_decisions import decide

    from harness.figures import RESULTS
    from mslm_core.corpora.clinical import RECIPE, SETTINGS

    committed = json.loads((RESULTS / "clinical/decisions.json").read_text(encoding="utf-8"))
    again = decide(committed["training_words"])
    assert again == {k: v for k, v in committed.items() if k not in ("command", "headline")}
    assert committed["rule_and_recipe_agree"]
    assert set(committed["recipe_takes"]) == {"note-style-0.3"}
    assert SETTINGS.get("note_style") == 0.3
    assert not SETTINGS.get("source_styles") and not SETTINGS.get("blank_style")
    assert SETTINGS.get("epochs", 3) == 3
    assert {s.corpus: s.weight for s in RECIPE}["BC5CDR-IOB"] == 0.5
    weight1 = committed["variants"]["pubmed-weight1"]
    assert weight1["dev_macro_f1_diff"] > 0 and not weight1["within_first_start_bound"]
