"""The CUDA paths, where there is a GPU (skipped elsewhere; run on the GPU machine): training
with bf16 autocast, resume from a checkpoint on the GPU, the PyTorch engine on the GPU giving
the CPU's entities, and ONNX Runtime's CUDA provider where onnxruntime-gpu is installed."""

from __future__ import annotations

import shutil

import pytest
import torch
from conftest import StopAt, toy_config
from safetensors.torch import load_file

from mslm_core.config import TrainConfig
from mslm_core.export import export_bundle
from mslm_core.inference import EntityExtractor
from mslm_core.train import Trainer, TrainingCancelled, train

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

TEXTS = [
    "The patient has breast cancer.",
    "Cisplatin\n\ncaused renal failure in the patient .",
    "Café — aspirin reduces fever 😀 and diabetes.",
    "",
    "No entity here at all",
]


def _config(toy_corpus, tiny_encoder, **kw) -> TrainConfig:
    """MSLM with a clean pass for the heads, on the GPU."""
    settings = {"device": "cuda", "strategy": "mslm", "detect_on": "clean", **kw}
    return toy_config(toy_corpus, tiny_encoder, **settings)


def _entities(extractor: EntityExtractor) -> list[list[tuple]]:
    return [
        [(e.start, e.end, e.type, e.confidence) for e in ents] for ents in extractor.annotate(TEXTS)
    ]


def _same_entities(a: list[list[tuple]], b: list[list[tuple]]) -> None:
    assert [[e[:3] for e in ents] for ents in a] == [[e[:3] for e in ents] for ents in b]
    for ents_a, ents_b in zip(a, b, strict=True):
        for x, y in zip(ents_a, ents_b, strict=True):
            assert x[3] == pytest.approx(y[3], abs=1e-3)


def test_mslm_trains_on_the_gpu_and_the_gpu_engine_agrees_with_the_cpu(
    toy_corpus, tiny_encoder, tmp_path
):
    result = train(_config(toy_corpus, tiny_encoder), tmp_path / "bundle")
    assert result["metrics"]["test"]["strict"]["f1"] == 1.0
    history = result["history"]
    assert history[-1]["train_loss"] < history[0]["train_loss"] and history[0]["mlm_loss"] > 0
    gpu = EntityExtractor.from_bundle(tmp_path / "bundle", backend="torch", device="cuda")
    cpu = EntityExtractor.from_bundle(tmp_path / "bundle", backend="torch", device="cpu")
    assert (gpu.info.provider, cpu.info.provider) == ("cuda", "cpu")
    on_gpu = _entities(gpu)
    assert any(on_gpu)  # the toy model finds the toy entities
    _same_entities(on_gpu, _entities(cpu))


def test_resume_on_the_gpu_continues_the_run(toy_corpus, tiny_encoder, tmp_path):
    """The CUDA RNG state is checkpointed with the rest: a run stopped mid-epoch and resumed
    ends where the uninterrupted run ends (up to the GPU's non-deterministic summation order
    in bf16)."""

    cfg = _config(toy_corpus, tiny_encoder, epochs=4, checkpoint_every=1)
    train(cfg, tmp_path / "straight")
    with pytest.raises(TrainingCancelled):
        Trainer(cfg, tmp_path / "resumed", callbacks=[StopAt(5)]).fit()
    Trainer(cfg, tmp_path / "resumed").fit(resume=True)
    a = load_file(str(tmp_path / "straight" / "model.safetensors"))
    b = load_file(str(tmp_path / "resumed" / "model.safetensors"))
    assert a.keys() == b.keys()
    worst = max((a[k].float() - b[k].float()).abs().max().item() for k in a)
    assert worst < 1e-2, f"resumed weights differ from the straight run by up to {worst}"


def test_onnx_runtime_cuda_provider_agrees_with_the_cpu(toy_corpus, tiny_encoder, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        pytest.skip("onnxruntime without the CUDA provider (install onnxruntime-gpu)")
    train(_config(toy_corpus, tiny_encoder, epochs=20), tmp_path / "bundle")
    export_bundle(tmp_path / "bundle")
    shutil.copytree(tmp_path / "bundle", tmp_path / "copy")
    gpu = EntityExtractor.from_bundle(tmp_path / "bundle", device="cuda")
    cpu = EntityExtractor.from_bundle(tmp_path / "copy", device="cpu")
    assert gpu.info.provider == "CUDAExecutionProvider"
    assert cpu.info.provider == "CPUExecutionProvider"
    _same_entities(_entities(gpu), _entities(cpu))
