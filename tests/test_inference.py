"""ONNX export (parity, int8, atomic manifest update) and the inference engine (backends,
offsets on tricky text, long notes, batch independence, errors)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TOY_CONLL

from mslm_core import cli
from mslm_core.bundle import verify_bundle
from mslm_core.config import TrainConfig
from mslm_core.errors import ExportError, InferenceError
from mslm_core.export import export_bundle
from mslm_core.inference import EntityExtractor
from mslm_core.train import train

TRICKY = [
    "The patient has breast cancer.",
    "",
    "   \n\t  ",
    "Café — the patient has breast  cancer 😀 and renal\tfailure.",
    "患者 has breast cancer。Aspirin reduces fever.",
    "Cisplatin\n\ncaused renal failure in the patient .",
    "No entity here at all",
    "cancer",
    "e\u0301 accents, \u00a0nbsp\u2003em space, and a lone surrogate \ud800 too: diabetes.",
]


@pytest.fixture(scope="module", params=["linear", "paper"])
def trained(request, toy_corpus, tiny_encoder, tmp_path_factory) -> Path:
    """A toy bundle with each head: the engine reads both the same way (untyped B/I/O
    probabilities and pooled type features), whatever the head computes them from."""
    out = tmp_path_factory.mktemp("inference") / "toy"
    cfg = TrainConfig(
        head=request.param,
        train=str(toy_corpus),
        dev=str(toy_corpus),
        base_model=str(tiny_encoder),
        epochs=30,
        batch_size=2,
        learning_rate=3e-3,
        warmup_ratio=0.0,
        patience=None,
        max_length=16,  # forces windows on longer inputs
        seed=3,
    )
    train(cfg, out)
    return out


@pytest.fixture(scope="module")
def exported(trained, tmp_path_factory) -> Path:
    copy = tmp_path_factory.mktemp("exported") / "toy"
    shutil.copytree(trained, copy)
    export_bundle(copy, quantize="int8")
    return copy


def spans(results):
    return [[(e.start, e.end, e.type) for e in ents] for ents in results]


def test_export_adds_checksummed_files_and_a_manifest_section(exported):
    manifest = verify_bundle(exported)  # every file, ONNX included, matches its sha256
    for name in ("model.onnx", "model.int8.onnx", "classifier.onnx"):
        assert name in manifest["files"] and (exported / name).stat().st_size > 0
    onnx = manifest["onnx"]
    assert onnx["precisions"] == {"fp32": "model.onnx", "int8": "model.int8.onnx"}
    assert onnx["inputs"] == ["input_ids", "attention_mask"]
    assert onnx["parity"]["fp32"]["detection_abs"] < 1e-4
    assert onnx["parity"]["int8"]["tag_agreement"] >= 0.99
    assert onnx["fused_operators"].get("Attention", 0) >= 1  # ORT's fused attention
    assert not list(exported.parent.glob(".toy.*"))  # no staging left behind


def test_engine_picks_onnx_int8_on_cpu_and_falls_back_to_torch(trained, exported):
    auto = EntityExtractor.from_bundle(exported)
    assert (auto.info.backend, auto.info.precision) == ("onnx", "int8")
    assert auto.info.provider == "CPUExecutionProvider"
    fp32 = EntityExtractor.from_bundle(exported, precision="fp32")
    assert fp32.info.precision == "fp32"
    plain = EntityExtractor.from_bundle(trained)  # no export: PyTorch
    assert (plain.info.backend, plain.info.precision) == ("torch", "fp32")
    assert auto.id == plain.id


def test_int8_on_cpu_runs_side_by_side_one_thread_each_unless_told(trained, exported):
    """Issue 54: int8 on CPU runs one window a run, one run per core, each on one thread by
    default (more throughput offline and served than two threads a run); threads set by the
    deployment are kept. A server steps two batches at once on ONNX Runtime on CPU, one on
    PyTorch, and there merges requests into batches of one step's windows at most."""
    import os

    from mslm_core.pipeline import AnnotationPipeline
    from mslm_core.predict import AnnotationPlan

    auto = EntityExtractor.from_bundle(exported)
    session = auto.predictor.backend.session.get_session_options()
    assert session.intra_op_num_threads == 1
    assert auto.predictor.workers == (os.cpu_count() or 1)
    told = EntityExtractor.from_bundle(exported, intra_op_threads=2)
    assert told.predictor.backend.session.get_session_options().intra_op_num_threads == 2
    fp32 = EntityExtractor.from_bundle(exported, precision="fp32")
    assert fp32.predictor.backend.session.get_session_options().intra_op_num_threads == 0
    assert AnnotationPipeline(auto).parallel_steps == 2
    assert AnnotationPipeline(auto).batch_texts == AnnotationPlan.STEP_WINDOWS == 16
    torch_engine = AnnotationPipeline(EntityExtractor.from_bundle(trained))
    assert torch_engine.parallel_steps == 1 and torch_engine.batch_texts is None


def test_onnx_fp32_matches_pytorch_on_entities(exported):
    torch_engine = EntityExtractor.from_bundle(exported, backend="torch", device="cpu")
    onnx_engine = EntityExtractor.from_bundle(exported, precision="fp32")
    texts = TRICKY + [
        " ".join(line.split("\t")[0] for line in block.splitlines())
        for block in TOY_CONLL.split("\n\n")
    ]
    a, b = torch_engine.annotate(texts), onnx_engine.annotate(texts)
    assert spans(a) == spans(b)
    assert sum(len(x) for x in a) >= 8
    for ents_a, ents_b in zip(a, b, strict=True):
        for x, y in zip(ents_a, ents_b, strict=True):
            assert abs(x.confidence - y.confidence) < 1e-3
            assert abs(x.detection_score - y.detection_score) < 1e-3
            assert abs(x.type_score - y.type_score) < 1e-3


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_offsets_round_trip_on_tricky_text(exported, precision):
    engine = EntityExtractor.from_bundle(exported, precision=precision)
    results = engine.annotate(TRICKY)
    assert len(results) == len(TRICKY)
    assert results[1] == [] and results[2] == []  # nothing to read
    for text, entities in zip(TRICKY, results, strict=True):
        for e in entities:
            assert text[e.start : e.end] == e.text and e.text == e.text.strip()
            assert 0.0 <= e.confidence <= min(e.detection_score, e.type_score) <= 1.0
            assert e.confidence == pytest.approx(e.detection_score * e.type_score)
    found = [e.text for ents in results for e in ents]
    assert "breast cancer" in found and "renal\tfailure" in found  # tab kept inside the span


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_batch_composition_does_not_change_results(exported, precision):
    """fp32 batches windows; int8 runs them one by one by default (dynamic quantisation
    scales activations per run); either way a text's result ignores its neighbours."""
    batch = {"batch_size": 3} if precision == "fp32" else {}
    engine = EntityExtractor.from_bundle(exported, precision=precision, **batch)
    together = engine.annotate(TRICKY)
    alone = [engine.annotate([t])[0] for t in TRICKY]
    assert any(together), "nothing found: the comparison below would prove nothing"
    assert spans(together) == spans(alone)
    for a, b in zip(together, alone, strict=True):
        for x, y in zip(a, b, strict=True):
            assert x.confidence == pytest.approx(y.confidence, abs=1e-5)


def test_a_20000_character_note_is_processed_whole(exported):
    """A long note (paragraphs, sentences, one run-on sentence longer than a window) gives
    what its parts give, at the right offsets."""
    engine = EntityExtractor.from_bundle(exported, precision="fp32")
    parts = [
        "The patient has breast cancer.",
        "Cisplatin caused renal failure in the patient.",
        "Aspirin reduces fever.",
        "No sign of diabetes or cancer today.",
        "The " + " ".join(["patient"] * 60) + " has breast cancer and renal failure.",
    ]
    note, starts = "", []
    while len(note) < 20_000:
        for p in parts:
            starts.append((len(note), p))
            note += p + ("\n\n" if len(starts) % 3 == 0 else " ")
    assert len(note) >= 20_000
    (whole,) = engine.annotate([note])
    expected = []
    alone = engine.annotate([p for _, p in starts])
    for (offset, _), ents in zip(starts, alone, strict=True):
        expected += [(offset + e.start, offset + e.end, e.type) for e in ents]
    assert [(e.start, e.end, e.type) for e in whole] == expected
    assert len(whole) > 200
    assert whole[-1].end > 19_000 and all(note[e.start : e.end] == e.text for e in whole)


def test_a_failed_parity_check_leaves_the_bundle_untouched(trained, tmp_path, monkeypatch):
    from mslm_core import export

    copy = tmp_path / "b"
    shutil.copytree(trained, copy)
    before = {p.name: p.read_bytes() for p in copy.iterdir()}
    monkeypatch.setattr(export, "FP32", export.Tolerance(-1.0, float("inf"), float("inf"), 0.0))
    with pytest.raises(ExportError, match="fp32 ONNX disagrees with PyTorch: detection_abs"):
        export_bundle(copy)
    assert {p.name: p.read_bytes() for p in copy.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"]


def test_re_export_without_int8_drops_the_stale_int8_file(exported, tmp_path):
    copy = tmp_path / "b"
    shutil.copytree(exported, copy)
    export_bundle(copy)
    manifest = verify_bundle(copy)
    assert "model.int8.onnx" not in manifest["files"] and not (copy / "model.int8.onnx").exists()
    assert manifest["onnx"]["precisions"] == {"fp32": "model.onnx"}


def test_engine_errors_say_what_is_wrong(trained, exported):
    with pytest.raises(InferenceError, match="no ONNX export"):
        EntityExtractor.from_bundle(trained, backend="onnx")
    with pytest.raises(InferenceError, match="int8 needs the ONNX backend"):
        EntityExtractor.from_bundle(exported, backend="torch", precision="int8")
    with pytest.raises(InferenceError, match="device cuda"):
        EntityExtractor.from_bundle(exported, device="cuda")
    with pytest.raises(InferenceError, match="backend must be one of"):
        EntityExtractor.from_bundle(exported, backend="tensorrt")
    engine = EntityExtractor.from_bundle(exported)
    with pytest.raises(InferenceError, match=r"texts\[1\] is NoneType"):
        engine.annotate(["fine", None])  # type: ignore[list-item]


def test_onnx_path_imports_neither_torch_nor_transformers(exported):
    code = (
        "import sys, json\n"
        "from mslm_core.inference import EntityExtractor\n"
        f"e = EntityExtractor.from_bundle({str(exported)!r}, backend='onnx')\n"
        "r = e.annotate(['The patient has breast cancer.'])\n"
        "print(json.dumps([len(r[0]), 'torch' in sys.modules, 'transformers' in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [1, False, False]


def test_cli_export_then_annotate_uses_onnx(trained, tmp_path, capsys):
    copy = tmp_path / "b"
    shutil.copytree(trained, copy)
    assert cli.main(["export", "--model", str(copy), "--quantize", "int8"]) == 0
    section = json.loads(capsys.readouterr().out)["onnx"]
    assert set(section["precisions"]) == {"fp32", "int8"}
    assert cli.main(["annotate", "--model", str(copy), "The patient has breast cancer."]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"]["backend"] == "onnx" and out["model"]["precision"] == "int8"
    assert [e["text"] for e in out["results"][0]["entities"]] == ["breast cancer"]


def test_rust_tokenizer_gives_the_ids_of_the_transformers_one(tmp_path):
    """The serving path's tokenizer (tokenizers only) and training's (transformers) agree on a
    real corpus, word alignment included."""
    from conftest import data_dir
    from transformers import AutoTokenizer

    from mslm_core.corpus import read_conll
    from mslm_core.model import resolve_encoder
    from mslm_core.tokenizer import HFWordTokenizer, RustWordTokenizer

    hf = AutoTokenizer.from_pretrained(resolve_encoder("minilm"))
    hf.save_pretrained(str(tmp_path))
    rust = RustWordTokenizer.from_directory(tmp_path)
    assert rust.pad_token_id == hf.pad_token_id
    sentences = [s.words for s in read_conll(data_dir("NCBI-disease-IOB") / "test.tsv")]
    sentences += [["Café", "😀", "\ud800", "患者", "e\u0301"]]
    wrapped = HFWordTokenizer(hf)
    for special in (True, False):
        assert rust.encode_words(sentences, special) == wrapped.encode_words(sentences, special)


def test_no_entity_text_or_offsets_are_logged(exported, caplog):
    secret = "Zyxqvorin caused breast cancer in Mrs Example."
    with caplog.at_level("DEBUG"):
        engine = EntityExtractor.from_bundle(exported)
        engine.annotate([secret])
    assert not re.search("Zyxqvorin|Example|breast", caplog.text)


def test_torch_export_fallback_also_passes_parity(trained, tmp_path):
    """When PyTorch drops its legacy exporter, the torch.export-based one takes over."""
    copy = tmp_path / "b"
    shutil.copytree(trained, copy)
    section = export_bundle(copy, exporter="dynamo")
    assert section["exporter"] == "dynamo" and section["parity"]["fp32"]["detection_abs"] < 1e-4
    torch_engine = EntityExtractor.from_bundle(copy, backend="torch", device="cpu")
    onnx_engine = EntityExtractor.from_bundle(copy)
    assert spans(onnx_engine.annotate(TRICKY)) == spans(torch_engine.annotate(TRICKY))


def test_int8_keeps_the_heads_in_fp32(exported):
    """Dynamic quantisation reaches the encoder's matrices, never the entity heads'."""
    import onnx

    from mslm_core.export import head_nodes

    graph = onnx.load(str(exported / "model.int8.onnx")).graph
    heads = head_nodes(graph)
    ops = [n.op_type for n in graph.node if n.name in heads]
    assert "MatMul" in ops  # the head's float MatMul is still there, under its module's name
    assert not any("Integer" in op or "Quant" in op for op in ops)
    assert any("Integer" in n.op_type or "Quant" in n.op_type for n in graph.node)


def test_an_int8_graph_that_tags_unlike_fp32_is_left_out_and_fp32_serves(
    trained, tmp_path, monkeypatch
):
    from mslm_core import export

    copy = tmp_path / "b"
    shutil.copytree(trained, copy)
    monkeypatch.setattr(export, "INT8", export.Tolerance(-1.0, float("inf"), float("inf"), 0.0))
    section = export_bundle(copy, quantize="int8")
    assert section["precisions"] == {"fp32": "model.onnx"} and "int8" not in section["parity"]
    assert "int8 ONNX disagrees with PyTorch: detection_abs" in section["int8_refused"]
    manifest = verify_bundle(copy)
    assert "model.int8.onnx" not in manifest["files"] and not (copy / "model.int8.onnx").exists()
    assert EntityExtractor.from_bundle(copy).info.precision == "fp32"


def test_the_cuda_provider_preloads_the_cuda_libraries_from_the_wheels(monkeypatch, caplog):
    """The GPU worker image has no CUDA base image (issue 30): onnxruntime-gpu must load the
    CUDA runtime and cuDNN from PyTorch's nvidia-* wheels before its first CUDA session."""
    import onnxruntime as ort

    from mslm_core import inference

    calls = []
    monkeypatch.setattr(
        ort, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"]
    )
    monkeypatch.setattr(ort, "preload_dlls", lambda: calls.append("preload"), raising=False)
    assert inference._choose_providers("cpu") == ["CPUExecutionProvider"]
    assert calls == []
    assert inference._choose_providers("auto")[0] == "CUDAExecutionProvider"
    assert calls == ["preload"]

    def missing():
        raise OSError("libcudnn.so.9: cannot open shared object file")

    monkeypatch.setattr(ort, "preload_dlls", missing, raising=False)
    assert inference._choose_providers("cuda")[0] == "CUDAExecutionProvider"
    assert "could not preload the CUDA libraries" in caplog.text
