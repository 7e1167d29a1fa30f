"""Bundles (checksums, atomic, no pickles), prediction offsets and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import torch_predictor

from mslm_core import cli
from mslm_core.bundle import load_bundle, verify_bundle
from mslm_core.errors import BundleError
from mslm_core.features import WindowBuilder
from mslm_core.predict.predictor import Predictor


@pytest.fixture(scope="module")
def bundle(toy_bundle: Path) -> Path:
    return toy_bundle


def test_manifest_lists_every_file_with_its_sha256(bundle):
    manifest = verify_bundle(bundle)
    on_disk = {p.name for p in bundle.iterdir() if p.name != "manifest.json"}
    assert set(manifest["files"]) == on_disk
    assert {"model.safetensors", "config.json"} <= on_disk
    assert not [p for p in bundle.iterdir() if p.suffix in (".bin", ".pt", ".pkl")]
    assert manifest["types"] == ["Chemical", "Disease"]
    assert manifest["config"]["seed"] == 3
    assert not list(bundle.parent.glob(".toy.tmp-*"))  # staging directory renamed away


def test_corrupt_bundle_is_refused(bundle, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(bundle, copy)
    weights = copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(BundleError, match=r"checksum mismatch for model\.safetensors"):
        load_bundle(copy)
    (copy / "config.json").unlink()
    with pytest.raises(BundleError, match="missing"):
        verify_bundle(copy)
    with pytest.raises(BundleError, match="not a model bundle"):
        load_bundle(tmp_path)


def test_loading_never_unpickles(bundle, monkeypatch):
    import pickle

    import torch

    def forbidden(*args, **kwargs):
        raise AssertionError("a pickle was loaded")

    monkeypatch.setattr(torch, "load", forbidden)
    monkeypatch.setattr(pickle, "load", forbidden)
    monkeypatch.setattr(pickle, "loads", forbidden)
    assert load_bundle(bundle).model is not None


TRICKY = [
    "The patient has breast cancer.",
    "",
    "   \n\t  ",
    "Café — the patient has breast  cancer 😀 and renal\tfailure.",
    "患者 has breast cancer。Aspirin reduces fever.",
    "No entity here at all",
    "cancer",
]


def test_offsets_index_the_original_string(bundle):
    predictor = torch_predictor(bundle)
    results = predictor.annotate(TRICKY)
    assert len(results) == len(TRICKY)
    assert results[1] == [] and results[2] == []
    found = 0
    for text, entities in zip(TRICKY, results, strict=True):
        for e in entities:
            assert text[e.start : e.end] == e.text
            assert e.text == e.text.strip() and e.text
            assert e.type in ("Chemical", "Disease")
            assert 0.0 <= e.confidence <= e.detection_score <= 1.0
            found += 1
    assert "breast cancer" in [e.text for e in results[0]]
    assert found >= 4


def test_batch_composition_does_not_change_results(bundle):
    predictor = torch_predictor(bundle, batch_size=3)
    together = predictor.annotate(TRICKY)
    alone = [predictor.annotate([t])[0] for t in TRICKY]
    assert any(together), "nothing found: the comparison below would prove nothing"
    for a, b in zip(together, alone, strict=True):
        assert [(e.start, e.end, e.type) for e in a] == [(e.start, e.end, e.type) for e in b]
        for x, y in zip(a, b, strict=True):
            assert x.confidence == pytest.approx(y.confidence, abs=1e-5)


@pytest.mark.parametrize("pack", [False, True])
def test_a_plan_run_step_by_step_gives_what_annotate_gives(bundle, pack, monkeypatch):
    """The service runs annotate as interleaved steps (AnnotationPlan): chunk by chunk (2
    sentences each here), batch by batch, several steps at once, in any thread. The entities
    are the same as one annotate call's."""
    import concurrent.futures

    from mslm_core.predict.schedule import AnnotationPlan

    monkeypatch.setattr(AnnotationPlan, "CHUNK_WORDS", 7)  # word-bounded chunks when not packing
    predictor = torch_predictor(bundle, batch_size=1)
    predictor.chunk_sentences, predictor.pack = 3, pack
    texts = [*TRICKY, " ".join(["The patient has breast cancer ."] * 40)]
    plan = AnnotationPlan(predictor, texts)
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        while not plan.done:
            steps = list(iter(plan.next_step, None))  # all that can start now
            assert steps  # between these rounds nothing is in flight
            list(pool.map(lambda step: step(), steps))
    assert plan.steps_run > 20  # many batches over several chunks
    assert plan.result() == predictor.annotate(texts)
    with pytest.raises(RuntimeError, match="steps left"):
        AnnotationPlan(predictor, ["aspirin"]).result()


def test_long_sentence_is_windowed_not_truncated(bundle):
    """max_length is 16: a 60-word sentence spans several windows; a mention at the very end
    is still found."""
    predictor = torch_predictor(bundle)
    filler = " ".join(["the patient"] * 25)
    text = f"Aspirin {filler} has breast cancer"
    (entities,) = predictor.annotate([text])
    assert entities[0].text == "Aspirin"
    assert entities[-1].end == len(text)  # the last word was read, not truncated away
    assert all(text[e.start : e.end] == e.text for e in entities)


class TaggingBackend:
    """Tags by token id, context-free: "breast" → B, "cancer" → I, anything else → O."""

    def __init__(self, tokenizer):
        self.b, self.i = tokenizer.convert_tokens_to_ids(["breast", "cancer"])

    def features(self, ids, mask):
        probs = np.zeros((*ids.shape, 3), np.float32)
        probs[..., 2] = 0.9
        probs[..., 0] = np.where(ids == self.b, 0.95, 0.05)
        probs[..., 1] = np.where(ids == self.i, 0.95, 0.05)
        return probs, np.ones((*ids.shape, 4), np.float32)

    def classify(self, pooled):
        return np.ones((len(pooled), 1), np.float32)


@pytest.mark.parametrize("max_length", [12, 16, 23])
def test_mention_across_every_window_edge_is_found_once(tiny_encoder, max_length):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_encoder))
    predictor = Predictor(TaggingBackend(tok), WindowBuilder(tok, max_length), ["Disease"])
    for position in range(0, 40):
        words = ["the"] * position + ["breast", "cancer"] + ["patient"] * (40 - position)
        text = " ".join(words)
        (entities,) = predictor.annotate([text])
        assert [(e.text, e.start) for e in entities] == [("breast cancer", text.index("breast"))], (
            position
        )


def test_cli_evaluate_and_annotate(bundle, toy_corpus, tmp_path, capsys):
    out = tmp_path / "metrics.json"
    assert (
        cli.main(
            ["evaluate", "--model", str(bundle), "--data", str(toy_corpus), "--output", str(out)]
        )
        == 0
    )
    metrics = json.loads(out.read_text())
    assert set(metrics) == {
        "strict",
        "overlap",
        "per_type",
        "exact_match",
        "token_macro_f1",
        "perplexity",
        "n_gold",
        "n_pred",
        "calibration",
        "engine",
        "predictions_sha256",
    }
    assert metrics["engine"] == {"backend": "torch", "precision": "fp32", "provider": "cpu"}
    assert metrics["strict"]["f1"] == 1.0 and metrics["n_gold"] == 7
    assert metrics["overlap"]["f1"] >= metrics["strict"]["f1"]  # overlap credits what strict does
    assert metrics["perplexity"] is None  # vanilla has no masked-LM objective
    capsys.readouterr()
    assert cli.main(["annotate", "--model", str(bundle), "The patient has breast cancer."]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["model"]["id"] == load_bundle(bundle).id
    (ents,) = [r["entities"] for r in result["results"]]
    assert {"start", "end", "text", "type", "confidence", "detection_score", "type_score"} <= set(
        ents[0]
    )


def test_cli_refuses_a_style_the_model_was_not_trained_with_and_reads_none(
    bundle, toy_corpus, caplog
):
    argv = ["--model", str(bundle), "--style", "BC5CDR-IOB"]
    assert cli.main(["evaluate", *argv, "--data", str(toy_corpus)]) == 2
    assert cli.main(["annotate", *argv, "Breast cancer."]) == 2
    says = "style 'BC5CDR-IOB': this model's styles are '' only: it was not trained with source"
    assert caplog.text.count(says) == 2
    # none, its only reading, is not refused (a client that always asks for none)
    assert cli.main(["annotate", "--model", str(bundle), "--style", "", "Breast cancer."]) == 0


def test_cli_train_reports_bad_corpus_with_file_and_line(tmp_path, tiny_encoder, caplog):
    bad = tmp_path / "bad.tsv"
    bad.write_text("The\tO\npatient\tX-Disease\n", encoding="utf-8")
    code = cli.main(
        [
            "train",
            "--train",
            str(bad),
            "--dev",
            str(bad),
            "--output",
            str(tmp_path / "o"),
            "--base-model",
            str(tiny_encoder),
        ]
    )
    assert code == 2
    assert f"{bad}:2" in caplog.text
    assert not (tmp_path / "o").exists()


def test_cli_train_end_to_end(toy_corpus, tiny_encoder, tmp_path, capsys):
    out = tmp_path / "b"
    code = cli.main(
        [
            "train",
            "--train",
            str(toy_corpus),
            "--dev",
            str(toy_corpus),
            "--base-model",
            str(tiny_encoder),
            "--strategy",
            "mslm",
            "--epochs",
            "2",
            "--batch-size",
            "2",
            "--lr",
            "1e-3",
            "--no-mask-weights",
            "--output",
            str(out),
        ]
    )
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["output"] == str(out)
    manifest = load_bundle(out).manifest
    assert manifest["config"]["learning_rate"] == 1e-3
    assert manifest["config"]["mask_weights"] is False
    assert manifest["strategy"] == "mslm"


def test_cli_annotate_reports_clinical_context(bundle, tmp_path, capsys, caplog):
    text = "No sign of diabetes or cancer today ."
    assert cli.main(["annotate", "--model", str(bundle), text]) == 0
    (ents,) = [r["entities"] for r in json.loads(capsys.readouterr().out)["results"]]
    assert {e["text"] for e in ents} == {"diabetes", "cancer"}
    for e in ents:
        assert e["assertion"]["negated"] and not e["assertion"]["family"]
        (cue,) = e["assertion"]["cues"]
        assert (cue["text"], text[cue["start"] : cue["end"]]) == ("No sign of", "No sign of")
    # --format bioc: the same context as string infons
    assert cli.main(["annotate", "--model", str(bundle), "--format", "bioc", text]) == 0
    bioc = json.loads(capsys.readouterr().out)
    infons = [a["infons"] for a in bioc["documents"][0]["passages"][0]["annotations"]]
    assert {i["negated"] for i in infons} == {"true"}
    # --no-context: no assertion at all
    assert cli.main(["annotate", "--model", str(bundle), "--no-context", text]) == 0
    (ents,) = [r["entities"] for r in json.loads(capsys.readouterr().out)["results"]]
    assert ents and all("assertion" not in e for e in ents)
    # a site's rules: 'no sign of' made a pseudo-trigger
    site = tmp_path / "site.json"
    pseudo = {"literal": "no sign of", "category": "NEGATED_EXISTENCE", "direction": "PSEUDO"}
    site.write_text(json.dumps({"rules": [pseudo]}))
    assert cli.main(["annotate", "--model", str(bundle), "--context-rules", str(site), text]) == 0
    (ents,) = [r["entities"] for r in json.loads(capsys.readouterr().out)["results"]]
    assert ents and all(not e["assertion"]["negated"] for e in ents)
    # a bad rules file stops before the model loads, naming file, rule and field
    site.write_text(json.dumps({"rules": [{**pseudo, "direction": "AROUND"}]}))
    assert cli.main(["annotate", "--model", str(bundle), "--context-rules", str(site), text]) == 2
    assert f"{site}: rules[0] ('no sign of'): field 'direction'" in caplog.text


def test_cli_annotate_links_concepts(bundle, tmp_path, capsys, caplog):
    """Issue 21: --vocabulary links each entity; a bad vocabulary stops before the model."""
    text = "No sign of diabetes or cancer today ."
    obo = tmp_path / "doid.obo"
    obo.write_text(
        '[Term]\nid: DOID:9351\nname: diabetes mellitus\nsynonym: "diabetes" EXACT []\n\n'
        "[Term]\nid: DOID:162\nname: cancer\n",
        encoding="utf-8",
    )
    assert cli.main(["annotate", "--model", str(bundle), "--vocabulary", str(obo), text]) == 0
    (ents,) = [r["entities"] for r in json.loads(capsys.readouterr().out)["results"]]
    assert {e["text"]: e["concept"]["id"] for e in ents} == {
        "diabetes": "DOID:9351",
        "cancer": "DOID:162",
    }
    assert {e["concept"]["vocabulary"] for e in ents} == {"doid"}
    argv = ["annotate", "--model", str(bundle), "--vocabulary", str(obo), "--format", "pubtator"]
    assert cli.main([*argv, text]) == 0
    ids = {line.split("\t")[5] for line in capsys.readouterr().out.splitlines()[2:] if line}
    assert ids == {"DOID:9351", "DOID:162"}
    obo.write_text("[Term]\nid: DOID:1\n", encoding="utf-8")
    assert cli.main(["annotate", "--model", str(bundle), "--vocabulary", str(obo), text]) == 2
    assert f"{obo}:1 (name)" in caplog.text


@pytest.mark.parametrize("content", ["[1, 2]", '"text"', "null"])
def test_a_manifest_that_is_not_an_object_is_a_bundle_error(tmp_path, content):
    (tmp_path / "manifest.json").write_text(content)
    with pytest.raises(BundleError, match="must be a JSON object"):
        verify_bundle(tmp_path)


def test_cli_suggest_ranks_notes_to_label_next(bundle, tmp_path, capsys):
    notes = tmp_path / "pool.jsonl"
    rows = [
        {"id": "a", "text": "The patient has breast cancer."},
        {"id": "b", "text": "The patient has breast cancer!"},
        {"id": "c", "text": "Cisplatin was given twice."},
        {"id": "d"},  # no text: skipped, said on stderr
    ]
    notes.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    args = ["suggest", "--model", str(bundle), str(notes), "--limit", "3"]
    assert cli.main([*args, "--strategy", "entropy", "--diversity", "0"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["notes"] == 3 and out["skipped"] == 1 and "skipped" in captured.err
    assert sorted(s["id"] for s in out["data"]) == ["a", "b", "c"]
    u = [s["uncertainty"] for s in out["data"]]
    assert u == sorted(u, reverse=True) and all(0 <= x <= 1 for x in u)
    assert cli.main([*args, "--diversity", "1.5"]) == 2


def test_cli_annotate_reads_a_notes_file_with_offsets_into_each_note(bundle, tmp_path, capsys):
    """Issue 61: JSONL given to `mslm annotate` was read as one raw text, so offsets counted
    from the file's start; --notes reads each record's text (any notes format and encoding)
    and names each result by its note's id."""
    notes = [("a-1", "The patient has breast cancer ."), ("a-2", "No sign of diabetes today .")]
    jsonl = tmp_path / "notes.jsonl"
    jsonl.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in notes))
    csv_latin1 = tmp_path / "notes.csv"
    csv_latin1.write_bytes(
        ("id,text\n" + "".join(f'{i},"{t}\nfièvre"\n' for i, t in notes)).encode("latin-1")
    )
    as_csv = [f"{t}\nfièvre" for _, t in notes]
    for path, texts in ((jsonl, [t for _, t in notes]), (csv_latin1, as_csv)):
        assert cli.main(["annotate", "--model", str(bundle), "--notes", str(path)]) == 0
        results = json.loads(capsys.readouterr().out)["results"]
        assert [r["id"] for r in results] == ["a-1", "a-2"]
        found = 0
        for result, text in zip(results, texts, strict=True):
            for e in result["entities"]:
                assert text[e["start"] : e["end"]] == e["text"]
                found += 1
        assert found
    # BioC out names the documents by the notes' ids
    argv = ["annotate", "--model", str(bundle), "--notes", str(jsonl), "--format", "bioc"]
    assert cli.main(argv) == 0
    assert [d["id"] for d in json.loads(capsys.readouterr().out)["documents"]] == ["a-1", "a-2"]


def test_cli_errors_are_one_line_never_a_traceback(bundle, tmp_path, capsys, caplog):
    missing = tmp_path / "gone.jsonl"
    assert cli.main(["annotate", "--model", str(bundle), "--notes", str(missing)]) == 2
    assert f"{missing}: no such file" in caplog.text and "Traceback" not in caplog.text
    assert cli.main(["annotate", "--model", str(bundle), "--notes", str(missing), "x"]) == 2
    assert "give texts or --notes, not both" in caplog.text
