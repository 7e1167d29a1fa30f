"""Calibrated confidence: temperature fitting, ECE, and what training and serving do with it."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import torch_predictor

from mslm_core.calibration import (
    CALIBRATION_PNG,
    T_BOUNDS,
    calibrate,
    entity_nll,
    entity_outcomes,
    fit_entity_temperature,
    fit_temperature,
    reliability,
    word_tags,
)
from mslm_core.config import TrainConfig
from mslm_core.corpus import Mention, read_conll
from mslm_core.predict.confidence import temper
from mslm_core.train import train
from mslm_core.types import ScoredMention


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(-1, keepdims=True)


def _nll(probs: np.ndarray, labels: np.ndarray) -> float:
    return float(-np.log(probs[np.arange(len(labels)), labels]).mean())


@pytest.mark.parametrize("true_t", [0.5, 2.5])
def test_fit_temperature_recovers_the_temperature_that_generated_the_labels(true_t):
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 3, size=(20_000, 3))
    labels = np.array([rng.choice(3, p=p) for p in _softmax(logits / true_t)])
    # the model reports softmax(logits): over-confident when true_t > 1, under when < 1
    fitted = fit_temperature(_softmax(logits), labels)
    assert fitted == pytest.approx(true_t, rel=0.08)


def test_fit_temperature_with_nothing_to_fit_is_one():
    assert fit_temperature(np.zeros((0, 3)), np.zeros(0, np.int64)) == 1.0


def test_temper_keeps_the_order_and_flattens_or_sharpens():
    p = np.array([[0.7, 0.2, 0.1], [0.05, 0.9, 0.05]], np.float32)
    assert temper(p, 1.0) is p
    hot, cold = temper(p, 3.0), temper(p, 0.5)
    for q in (hot, cold):
        assert np.allclose(q.sum(-1), 1.0, atol=1e-6)
        assert (q.argmax(-1) == p.argmax(-1)).all()
    assert (hot.max(-1) < p.max(-1)).all() and (cold.max(-1) > p.max(-1)).all()
    # the same as dividing the logits by T
    assert np.allclose(temper(p, 2.0), _softmax(np.log(p) / 2.0), atol=1e-6)


def test_ece_by_hand():
    # bin (0.9, 1.0]: confidences 0.95, 0.95, accuracy 1/2 → gap 0.45, weight 2/4
    # bin (0.2, 0.3]: confidences 0.25, 0.25, accuracy 0/2 → gap 0.25, weight 2/4
    rel = reliability([0.95, 0.95, 0.25, 0.25], [True, False, False, False])
    assert rel.ece == pytest.approx(0.5 * 0.45 + 0.5 * 0.25)
    assert rel.n == 4 and sum(b["count"] for b in rel.bins) == 4
    assert reliability([1.0, 1.0], [True, True]).ece == 0.0
    # confidence 0 falls in the first bin, not out of every bin
    assert reliability([0.0], [False]).bins[0]["count"] == 1


def test_entity_outcomes_need_exact_boundaries_and_type():
    gold = [[Mention(0, 2, "Disease")], [Mention(1, 2, "Chemical")]]
    predicted = [
        [
            ScoredMention(0, 2, "Disease", 0.9, 0.9, 1.0),
            ScoredMention(3, 4, "Disease", 0.4, 0.4, 1.0),
        ],
        [ScoredMention(1, 2, "Disease", 0.6, 0.6, 1.0)],
    ]
    assert entity_outcomes(gold, predicted) == ([0.9, 0.4, 0.6], [True, False, False])


@pytest.fixture(scope="module")
def calibrated_bundle(tmp_path_factory, toy_corpus, tiny_encoder):
    out = tmp_path_factory.mktemp("cal") / "bundle"
    cfg = TrainConfig(
        train=str(toy_corpus),
        dev=str(toy_corpus),
        test=str(toy_corpus),
        base_model=str(tiny_encoder),
        epochs=4,  # under-trained: its confidences are far from calibrated
        batch_size=2,
        learning_rate=3e-3,
        warmup_ratio=0.0,
        patience=None,
        seed=3,
    )
    train(cfg, out)
    return out


def test_training_fits_temperatures_on_dev_and_writes_the_diagram(calibrated_bundle):
    manifest = json.loads((calibrated_bundle / "manifest.json").read_text())
    cal = manifest["calibration"]
    assert 0.05 <= cal["detection_temperature"] <= 20 and 0.05 <= cal["type_temperature"] <= 20
    for split in ("dev", "test"):
        for when in ("before", "after"):
            rel = cal[split][when]
            assert 0.0 <= rel["ece"] <= 1.0 and rel["n"] == sum(b["count"] for b in rel["bins"])
    assert CALIBRATION_PNG in manifest["files"]  # checksummed like every bundle file
    assert (calibrated_bundle / CALIBRATION_PNG).read_bytes().startswith(b"\x89PNG")


def test_the_fitted_detection_temperature_minimises_its_objective_on_dev(
    calibrated_bundle, toy_corpus
):
    predictor = torch_predictor(calibrated_bundle)
    objective = json.loads((calibrated_bundle / "manifest.json").read_text())["calibration"][
        "detection_objective"
    ]
    t_det, t_type = predictor.temperatures
    assert t_det != 1.0
    dev = read_conll(toy_corpus)
    raw = predictor.raw_predictions([s.words for s in dev.sentences])
    gold = [s.mentions for s in dev.sentences]
    probs = np.concatenate(raw.word_probs)
    labels = np.concatenate([word_tags(len(s.words), s.mentions) for s in dev.sentences])

    def loss(t: float) -> float:
        if objective == "entity":
            return entity_nll(*entity_outcomes(gold, raw.mentions(predictor.types, (t, t_type))))
        return _nll(temper(probs, t), labels)

    assert objective in ("entity", "word")
    assert loss(t_det) < loss(1.0)
    # a minimum within the bounds the fit searches (an under-trained model's may be on one)
    around = [t for t in (t_det * 1.3, t_det / 1.3) if T_BOUNDS[0] <= t <= T_BOUNDS[1]]
    assert around and loss(t_det) <= min(loss(t) for t in around) + 1e-9


def test_entity_temperature_is_not_fitted_when_every_entity_is_right():
    from mslm_core.corpus import Corpus, Sentence
    from mslm_core.predict.confidence import RawPredictions

    sentence = Sentence("a b", [(0, 1), (2, 3)], [Mention(0, 1, "X")])
    probs = np.array([[0.8, 0.1, 0.1], [0.1, 0.1, 0.8]], np.float32)
    raw = RawPredictions([probs], [(0, 0, 1)], np.array([[1.0]], np.float32))
    assert fit_entity_temperature(raw, Corpus([sentence]), ["X"], 1.0) is None


def test_served_confidences_are_tempered_but_the_entities_are_the_same(
    calibrated_bundle, toy_corpus
):
    predictor = torch_predictor(calibrated_bundle)
    temperatures = predictor.temperatures
    manifest = json.loads((calibrated_bundle / "manifest.json").read_text())
    assert temperatures == (
        manifest["calibration"]["detection_temperature"],
        manifest["calibration"]["type_temperature"],
    )
    words = [s.words for s in read_conll(toy_corpus).sentences]
    served = predictor.predict_words(words)
    predictor.temperatures = (1.0, 1.0)
    raw_conf = predictor.predict_words(words)
    assert [[(m.start, m.end, m.label) for m in s] for s in served] == [
        [(m.start, m.end, m.label) for m in s] for s in raw_conf
    ]
    flat = [pair for s, r in zip(served, raw_conf, strict=True) for pair in zip(s, r, strict=True)]
    assert flat and any(a.confidence != pytest.approx(b.confidence) for a, b in flat)
    for a, _ in flat:
        assert a.confidence == pytest.approx(a.detection_score * a.type_score)


def test_calibrate_leaves_the_predictor_tempered(calibrated_bundle, toy_corpus):
    predictor = torch_predictor(calibrated_bundle)
    predictor.temperatures = (1.0, 1.0)
    corpus = read_conll(toy_corpus)
    cal = calibrate(predictor, corpus)
    assert predictor.temperatures == (cal["detection_temperature"], cal["type_temperature"])
    assert "test" not in cal and set(cal["dev"]) == {"before", "after"}


def test_raw_predictions_in_chunks_are_the_same_as_in_one(calibrated_bundle, toy_corpus):
    predictor = torch_predictor(calibrated_bundle)
    words = [s.words for s in read_conll(toy_corpus).sentences]
    whole = predictor.raw_predictions(words)
    predictor.chunk_sentences = 2
    chunked = predictor.raw_predictions(words)
    assert whole.spans == chunked.spans and whole.spans
    assert np.allclose(whole.type_probs, chunked.type_probs, atol=1e-5)
    assert predictor.predict_words(words) == whole.mentions(predictor.types, predictor.temperatures)
    # what calibration, evaluation and the uncertainties score are the served confidences:
    # the same decoding's tags (the default, Viterbi, scores B then I along its path)
    assert predictor.decoding == "viterbi" and whole.decoding == chunked.decoding == "viterbi"


def test_annotating_with_uncertainties_takes_one_pass_and_answers_the_same(
    calibrated_bundle, toy_corpus
):
    from mslm_core.active import uncertainties
    from mslm_core.pipeline import AnnotationPipeline

    pipeline = AnnotationPipeline.from_bundle(calibrated_bundle, backend="torch", device="cpu")
    extractor = pipeline.extractor
    notes = [" ".join(s.words) for s in read_conll(toy_corpus).sentences[:5]]
    texts = [*notes, "", f"{notes[0]}\n\n{notes[1]}"]
    backend, runs = extractor.predictor.backend, []
    features = backend.features
    backend.features = lambda ids, mask: runs.append(len(ids)) or features(ids, mask)
    entities, scores = pipeline.annotate_with_uncertainty(texts, "entropy")
    one_pass = sum(runs)
    runs.clear()
    assert entities == pipeline(texts) and any(entities)
    assert one_pass == sum(runs) > 0  # the windows of one annotation, not two
    assert scores == pytest.approx(uncertainties(extractor.predictor, texts, "entropy"))
    assert scores[len(notes)] == 0.0 and all(s > 0 for s in scores[: len(notes)])
    with pytest.raises(ValueError, match="strategy must be one of"):
        pipeline.annotate_with_uncertainty(texts, "random")


def test_extra_spans_are_typed_in_the_same_pass_as_the_predictions(calibrated_bundle, toy_corpus):
    predictor = torch_predictor(calibrated_bundle)
    words = [s.words for s in read_conll(toy_corpus).sentences]
    plain = predictor.raw_predictions(words)
    asked = [[(a, b) for s, a, b in plain.spans if s == i] for i in range(len(words))]
    predictor.chunk_sentences = 2  # spans follow their sentences across chunks
    raw = predictor.raw_predictions(words, asked)
    assert raw.extra_spans == plain.spans and plain.spans
    assert np.allclose(raw.extra_type_probs, plain.type_probs, atol=1e-5)  # same spans, types
    grouped = predictor.span_type_probabilities(words, asked)
    assert np.allclose(np.concatenate([np.stack(g) for g in grouped if g]), plain.type_probs)
    with pytest.raises(ValueError, match="extra_spans: 1 lists of spans for"):
        predictor.raw_predictions(words, asked[:1])


def test_calibration_is_the_same_from_a_given_pass_or_its_own(calibrated_bundle, toy_corpus):
    from mslm_core.calibration import gold_type_spans

    predictor = torch_predictor(calibrated_bundle)
    dev = read_conll(toy_corpus)
    words = [s.words for s in dev.sentences]
    results = []
    for passes in (
        None,  # calibrate predicts dev itself, gold mentions typed in the same pass
        {"dev": predictor.raw_predictions(words, gold_type_spans(dev, predictor.types))},
        {"dev": predictor.raw_predictions(words)},  # no gold types in it: typed again
    ):
        predictor.temperatures = (1.0, 1.0)
        cal = calibrate(predictor, dev, passes=passes)
        results.append((cal["detection_temperature"], cal["type_temperature"], cal["dev"]))
    assert results[0] == results[1] == results[2]


def test_mslm_evaluate_reports_calibration_and_draws_the_diagram(
    calibrated_bundle, toy_corpus, tmp_path
):
    from mslm_core.cli import main

    out, png = tmp_path / "metrics.json", tmp_path / "diagram.png"
    argv = ["evaluate", "--model", str(calibrated_bundle), "--data", str(toy_corpus)]
    assert main([*argv, "--output", str(out), "--diagram", str(png)]) == 0
    metrics = json.loads(out.read_text())
    manifest = json.loads((calibrated_bundle / "manifest.json").read_text())
    # the toy corpus is this bundle's test split: the same figures as at training time
    after, trained = metrics["calibration"]["after"], manifest["calibration"]["test"]["after"]
    assert after["ece"] == pytest.approx(trained["ece"], abs=1e-6)
    assert [b["count"] for b in after["bins"]] == [b["count"] for b in trained["bins"]]
    assert metrics["strict"] == manifest["metrics"]["test"]["strict"]
    assert png.read_bytes().startswith(b"\x89PNG")


def test_mslm_calibrate_refits_a_bundle_in_place(calibrated_bundle, toy_corpus, tmp_path, capsys):
    import shutil

    from mslm_core.bundle import verify_bundle
    from mslm_core.cli import main

    bundle = tmp_path / "bundle"
    shutil.copytree(calibrated_bundle, bundle)
    manifest = json.loads((bundle / "manifest.json").read_text())
    del manifest["calibration"]  # as a bundle trained before calibration existed
    del manifest["files"][CALIBRATION_PNG]
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    (bundle / CALIBRATION_PNG).unlink()
    argv = ["calibrate", "--model", str(bundle), "--dev", str(toy_corpus), "--backend", "torch"]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    refitted = verify_bundle(bundle)  # every checksum matches after the swap
    assert summary["detection_temperature"] == refitted["calibration"]["detection_temperature"]
    assert "dev_ece" in summary and "test_ece" not in summary
    assert CALIBRATION_PNG in refitted["files"] and (bundle / CALIBRATION_PNG).is_file()
    assert torch_predictor(bundle).temperatures == torch_predictor(calibrated_bundle).temperatures
