"""The clinical corpora: pinned fetching (from a git clone here; the same checks apply to
downloads) and the brat readers that turn MACCROBAT2020 and CHIA into gold labels."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from harness.clinical import chia_gold, maccrobat_gold
from mslm_core.corpora import PinnedCorpus, fetch_corpus, read_brat, registry
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

    def pinned(digest: str) -> None:
        corpus = PinnedCorpus("T", "o/r", commit, {"data/a.ann": digest}, "CC0")
        monkeypatch.setattr(registry, "corpora", lambda: {"T": corpus})

    pinned("0" * 64)
    with pytest.raises(ConfigError, match=r"data/a.ann has sha256 .* pinned 000000000000"):
        fetch_corpus("T", tmp_path / "cache", git_dir=repo)
    assert not (tmp_path / "cache" / "T" / "data" / "a.ann").exists()  # never kept
    pinned(good)
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
    monkeypatch.setattr(registry, "corpora", lambda: {"T": corpus})
    with pytest.raises(ConfigError, match=r"has no data/a.ann at ffffffffffff"):
        fetch_corpus("T", tmp_path / "cache", git_dir=repo)


def test_the_pinned_corpora_are_the_issue_s_commits():
    table = registry.corpora()
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
