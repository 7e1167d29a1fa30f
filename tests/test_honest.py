"""Honest by construction (docs/method.md §3b): with a model trained the way that leaks (MSLM, ELM
1.0, detection on the masked pass), ``mslm evaluate``, the inference engine (PyTorch and
ONNX) and the benchmark harness give identical predictions on the same text, and nothing that
predicts reads a gold label or masks its input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from conftest import TOY_CONLL

from harness import Runner, parse_protocol
from mslm_core import cli
from mslm_core.config import TrainConfig
from mslm_core.corpus import Corpus, Mention, Sentence, read_conll
from mslm_core.evaluate import predict_mentions, predictions_digest, score_predictions
from mslm_core.export import export_bundle
from mslm_core.inference import EntityExtractor
from mslm_core.train import train

SETTINGS = dict(
    strategy="mslm",
    elm_rate=1.0,
    blm_rate=0.0,
    detect_on="masked",
    epochs=12,
    batch_size=2,
    learning_rate=3e-3,
    warmup_ratio=0.0,
    patience=0,
    max_length=32,
    seed=5,
)


@pytest.fixture(scope="module")
def setup(tiny_encoder, tmp_path_factory):
    root = tmp_path_factory.mktemp("honest")
    data = root / "data" / "toy"
    data.mkdir(parents=True)
    for split in ("train.tsv", "devel.tsv", "test.tsv"):
        (data / split).write_text(TOY_CONLL, encoding="utf-8")
    cfg = TrainConfig(
        train=str(data / "train.tsv"),
        dev=str(data / "devel.tsv"),
        base_model=str(tiny_encoder),
        device="cpu",
        **SETTINGS,
    )
    train(cfg, root / "bundle")
    return root, data, tiny_encoder


class GoldGuard(Sentence):
    """A sentence whose gold mentions cannot be read until ``open`` is set."""

    closed = True

    @property  # type: ignore[override]
    def mentions(self) -> list[Mention]:
        if GoldGuard.closed:
            raise AssertionError("a gold label was read at prediction time")
        return self.__dict__["_mentions"]

    @mentions.setter
    def mentions(self, value: list[Mention]) -> None:
        self.__dict__["_mentions"] = value


def guarded(corpus: Corpus) -> Corpus:
    out = []
    for s in corpus.sentences:
        g = GoldGuard.__new__(GoldGuard)
        g.text, g.word_spans, g.mentions = s.text, s.word_spans, list(s.mentions)
        out.append(g)
    return Corpus(out)


def test_evaluate_engine_onnx_and_benchmark_predict_alike(setup, tmp_path, capsys):
    root, data, encoder = setup
    corpus = read_conll(data / "test.tsv")
    torch_engine = EntityExtractor.from_bundle(root / "bundle", backend="torch", device="cpu")
    predicted = predict_mentions(torch_engine.predictor, corpus)
    assert sum(map(len, predicted)) >= 3  # the model predicts entities at all
    digest = predictions_digest(predicted)

    # mslm evaluate scores exactly these predictions
    assert (
        cli.main(
            [
                "evaluate",
                "--model",
                str(root / "bundle"),
                "--data",
                str(data / "test.tsv"),
                "--backend",
                "torch",
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    evaluated = json.loads(capsys.readouterr().out)
    expected = score_predictions(corpus, predicted)
    assert {k: evaluated[k] for k in expected if k != "perplexity"} == {
        k: v for k, v in expected.items() if k != "perplexity"
    }

    # the served engine (ONNX) predicts the same mentions
    copy = tmp_path / "exported"
    shutil.copytree(root / "bundle", copy)
    export_bundle(copy)
    onnx_engine = EntityExtractor.from_bundle(copy, precision="fp32")
    assert onnx_engine.info.backend == "onnx"
    assert predictions_digest(predict_mentions(onnx_engine.predictor, corpus)) == digest

    # raw text through annotate finds the same spans
    for sentence, mentions in zip(corpus.sentences, predicted, strict=True):
        (ents,) = onnx_engine.annotate([sentence.text])
        spans = [
            (sentence.word_spans[m.start][0], sentence.word_spans[m.end - 1][1]) for m in mentions
        ]
        assert [(e.start, e.end) for e in ents] == spans

    # the benchmark harness, training the same configuration, predicts the same
    protocol = parse_protocol(
        {
            "name": "honest",
            "datasets": ["toy"],
            "seeds": [SETTINGS["seed"]],
            "examples": 0,
            "train": {
                **{k: v for k, v in SETTINGS.items() if k != "seed"},
                "base_model": str(encoder),
            },
            "variants": {"vanilla": {"strategy": "vanilla"}, "mslm": {}},
        }
    )
    spec = next(s for s in protocol.variant_runs() if s.label == "mslm")
    record = Runner(
        protocol, data.parent, tmp_path / "results", tmp_path / "work", device="cpu"
    ).run(spec)
    assert record["predictions_sha256"] == digest
    # the benchmark's test scores are the evaluation's (with calibration and the engine)
    assert {k: record["test"][k] for k in expected if k != "perplexity"} == {
        k: v for k, v in expected.items() if k != "perplexity"
    }
    assert record["test"]["engine"]["backend"] == "torch" and "calibration" in record["test"]


def test_prediction_never_reads_gold_labels_or_masks_input(setup):
    root, data, _ = setup
    corpus = guarded(read_conll(data / "test.tsv"))
    engine = EntityExtractor.from_bundle(root / "bundle", backend="torch", device="cpu")
    model = engine.predictor.backend.model
    mask_id = engine.predictor.builder.tokenizer.tokenizer.token_to_id("[MASK]")
    seen: list[torch.Tensor] = []
    hook = model.encoder.register_forward_hook(
        lambda mod, args, kwargs, out: seen.append(kwargs["input_ids"].clone()), with_kwargs=True
    )
    try:
        GoldGuard.closed = True
        predicted = predict_mentions(engine.predictor, corpus)  # would raise on a gold read
        texts = engine.annotate([s.text for s in corpus.sentences])
    finally:
        GoldGuard.closed = False
        hook.remove()
    assert seen and all(int((ids == mask_id).sum()) == 0 for ids in seen)
    assert sum(map(len, predicted)) == sum(map(len, texts))
    # and the predictions do not change when the gold labels do
    relabelled = Corpus([Sentence(s.text, s.word_spans, []) for s in corpus.sentences])
    assert predict_mentions(engine.predictor, relabelled) == predicted


def test_only_the_labelled_leaky_module_masks_gold_at_test_time():
    """The evaluation, engine, service and CLI code never import the masking collator."""
    import ast

    package = Path(__file__).resolve().parents[1]
    honest_paths = [
        package / "mslm_core" / name
        for name in ("inference.py", "cli.py", "export.py", "features.py")
    ] + [
        *(package / "mslm_core" / "predict").rglob("*.py"),
        *(package / "api").rglob("*.py"),
    ]
    for path in honest_paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {
            name
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom | ast.Import)
            for a in n.names
            # `from .. import collate` imports the module by its alias's name
            for name in ((n.module or "", a.name) if isinstance(n, ast.ImportFrom) else (a.name,))
        }
        assert not any(m.endswith(("collate", "masking", "leaky")) for m in imported), path
