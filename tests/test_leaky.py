"""The reference-leaky protocol is labelled, masks gold mentions, and is never on the honest
prediction path."""

from __future__ import annotations

import ast
from pathlib import Path

import torch
from conftest import torch_predictor

from harness.leaky import evaluate_reference_leaky
from mslm_core.bundle import load_bundle
from mslm_core.config import TrainConfig
from mslm_core.corpus import read_conll
from mslm_core.evaluate import evaluate_corpus
from mslm_core.train import train

PACKAGE = Path(__file__).resolve().parents[1] / "mslm_core"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names.add((node.module or "").lstrip("."))
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_only_the_benchmark_harness_knows_the_leaky_protocol():
    """The leaky protocol lives in the benchmark harness, outside the product: no module of
    the product (library, engine, CLI, service) imports it, and within the harness only the
    runner does, to show its column beside the honest one."""
    root = PACKAGE.parent
    product = [p for d in ("mslm_core", "api", "worker", "store") for p in (root / d).rglob("*.py")]
    assert not [p for p in product if any("leaky" in n for n in _imports(p))]
    assert not (PACKAGE / "leaky.py").exists()
    harness = root / "benchmarks" / "harness"
    users = sorted(
        p.name
        for p in harness.glob("*.py")
        if p.name != "leaky.py" and any(n.endswith("leaky") for n in _imports(p))
    )
    assert users == ["runner.py"]


def test_leaky_masks_gold_mentions_and_is_labelled(toy_corpus, tiny_encoder, tmp_path):
    cfg = TrainConfig(
        train=str(toy_corpus),
        dev=str(toy_corpus),
        base_model=str(tiny_encoder),
        strategy="mslm",
        elm_rate=1.0,
        blm_rate=0.0,
        epochs=20,
        batch_size=2,
        learning_rate=3e-3,
        warmup_ratio=0.0,
        patience=None,
        seed=5,
    )
    train(cfg, tmp_path / "b")
    bundle = load_bundle(tmp_path / "b")
    corpus = read_conll(toy_corpus)
    mask_id = bundle.tokenizer.mask_token_id
    seen: list[torch.Tensor] = []
    handle = bundle.model.encoder.register_forward_hook(
        lambda mod, args, kwargs, out: seen.append(kwargs["input_ids"].clone()), with_kwargs=True
    )
    leaky = evaluate_reference_leaky(bundle, corpus)
    n_leaky_masks = sum(int((ids == mask_id).sum()) for ids in seen)
    handle.remove()
    predictor = torch_predictor(tmp_path / "b")
    seen.clear()
    handle = predictor.backend.model.encoder.register_forward_hook(
        lambda mod, args, kwargs, out: seen.append(kwargs["input_ids"].clone()), with_kwargs=True
    )
    honest = evaluate_corpus(predictor, corpus)
    handle.remove()
    assert seen and all(int((ids == mask_id).sum()) == 0 for ids in seen)  # never masked
    assert leaky["protocol"] == "reference-leaky" and "protocol" not in honest
    assert n_leaky_masks == sum(m.end - m.start for s in corpus.sentences for m in s.mentions)
    assert leaky["n_gold"] == honest["n_gold"] == 7
