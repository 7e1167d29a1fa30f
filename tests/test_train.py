"""Training end to end on tiny random encoders: overfit, save, reload, resume, cancel."""

from __future__ import annotations

import pytest
import torch
from conftest import StopAt, torch_predictor, toy_config
from safetensors.torch import load_file

from mslm_core.bundle import load_bundle
from mslm_core.config import TrainConfig
from mslm_core.corpus import read_conll
from mslm_core.errors import CheckpointError, ConfigError
from mslm_core.train import Trainer, TrainingCancelled, train


def _config(toy_corpus, tiny_encoder, **kw) -> TrainConfig:
    return toy_config(toy_corpus, tiny_encoder, **kw)


@pytest.mark.parametrize(
    ("strategy", "head", "pack"),
    [
        ("vanilla", "linear", False),
        ("vanilla", "linear", True),
        ("mslm_tapt", "linear", False),
        ("vanilla", "paper", False),
        ("mslm", "paper", False),
        ("span", "paper", False),
        ("pmi", "paper", True),
        ("random", "paper", False),
    ],
)
def test_overfit_then_reload_predicts_the_same(
    strategy, head, pack, toy_corpus, tiny_encoder, tmp_path
):
    # MSLM with ELM 1.0 never shows an entity token unmasked to the detection head of the
    # masked pass (docs/method.md §3b), so the overfit check reads detection from a clean pass. (The
    # joint masking strategies train the paper's head here: on a tiny random encoder its
    # token-id embedding overfits in 30 epochs, the linear head needs more.)
    extra = {"detect_on": "clean"} if strategy == "mslm" else {}
    cfg = _config(toy_corpus, tiny_encoder, strategy=strategy, head=head, pack=pack, **extra)
    result = train(cfg, tmp_path / "bundle")
    manifest = load_bundle(tmp_path / "bundle").manifest
    assert (manifest["head"], manifest["pack"], manifest["decoding"]) == (head, pack, "viterbi")
    assert result["metrics"]["test"]["strict"]["f1"] == 1.0
    history = result["history"]
    assert history[-1]["train_loss"] < history[0]["train_loss"]
    if strategy == "vanilla":
        assert all(h["mlm_loss"] == 0.0 for h in history)
        assert result["metrics"]["dev"]["perplexity"] is None
    elif strategy == "mslm_tapt":  # the masked-LM stage, then clean fine-tuning
        assert history[0]["mlm_loss"] > 0.0 and history[-1]["mlm_loss"] == 0.0
        assert result["metrics"]["dev"]["perplexity"] > 1.0
    else:
        assert history[0]["mlm_loss"] > 0.0
        assert result["metrics"]["dev"]["perplexity"] > 1.0

    predictor = torch_predictor(tmp_path / "bundle")
    corpus = read_conll(toy_corpus)
    predicted = predictor.predict_words([s.words for s in corpus.sentences])
    for sentence, mentions in zip(corpus.sentences, predicted, strict=True):
        assert [(m.start, m.end, m.label) for m in mentions] == [
            (m.start, m.end, m.label) for m in sentence.mentions
        ]
        for m in mentions:
            assert 0.0 < m.confidence <= 1.0
            assert m.confidence == pytest.approx(m.detection_score * m.type_score)


def test_mask_weights_recorded_and_ablation(toy_corpus, tiny_encoder, tmp_path):
    cfg = _config(toy_corpus, tiny_encoder, strategy="mslm", epochs=1, blm_rate=0.3)
    train(cfg, tmp_path / "a")
    masking = load_bundle(tmp_path / "a").manifest["masking"]
    assert masking["n_elm"] > 0 and masking["n_blm"] > 0
    assert masking["weights"]["blm"] + masking["weights"]["elm"] == pytest.approx(1.0)
    cfg = _config(toy_corpus, tiny_encoder, strategy="mslm", epochs=1, mask_weights=False)
    train(cfg, tmp_path / "b")
    assert load_bundle(tmp_path / "b").manifest["masking"]["weights"] == {"blm": 1.0, "elm": 1.0}


@pytest.mark.parametrize("stop_step", [2, 5])  # mid-epoch (2 steps/epoch → 5 is mid-epoch 3)
def test_resume_gives_the_same_weights_as_an_uninterrupted_run(
    stop_step, toy_corpus, tiny_encoder, tmp_path
):
    cfg = _config(toy_corpus, tiny_encoder, strategy="mslm", epochs=4, checkpoint_every=1)
    train(cfg, tmp_path / "straight")

    interrupted = Trainer(cfg, tmp_path / "resumed", callbacks=[StopAt(stop_step)])
    with pytest.raises(TrainingCancelled):
        interrupted.fit()
    assert not (tmp_path / "resumed").exists()  # nothing published when cancelled
    assert (tmp_path / "resumed.work" / "LATEST").exists()
    Trainer(cfg, tmp_path / "resumed").fit(resume=True)

    a = load_file(str(tmp_path / "straight" / "model.safetensors"))
    b = load_file(str(tmp_path / "resumed" / "model.safetensors"))
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=0, msg=key)


def test_two_stage_mslm_takes_the_honest_studys_settings():
    """``mslm_tapt``'s ELM rate and head warm-up are the honest-mslm study's choice (the
    default strategy itself is the learning curve's: tests/test_bench.py)."""
    import json
    from pathlib import Path

    results = Path(__file__).resolve().parents[1] / "benchmarks/results/honest-mslm"
    summary = json.loads((results / "summary.json").read_text())
    chosen = summary["decision"]["default"]
    (run,) = [
        json.loads(f.read_text())
        for f in (results / "runs").glob(f"*/{chosen}/seed1.json")
        if "NCBI" in f.parent.parent.name
    ]
    assert run["settings"]["strategy"] == "mslm_tapt"
    default = TrainConfig(train="t", dev="d", strategy="mslm_tapt")
    for key in ("elm_rate", "blm_rate", "tapt_epochs", "mlm_head_warmup_steps"):
        assert getattr(default, key) == run["settings"][key], key
    # the strategy-dependent defaults: the paper's ELM rate and no warm-up elsewhere
    for strategy in ("vanilla", "mslm", "span"):
        cfg = TrainConfig(strategy=strategy)
        assert (cfg.elm_rate, cfg.mlm_head_warmup_steps) == (1.0, 0)
    explicit = TrainConfig(strategy="mslm_tapt", elm_rate=1.0, mlm_head_warmup_steps=0)
    assert (explicit.elm_rate, explicit.mlm_head_warmup_steps) == (1.0, 0)
    assert TrainConfig.from_dict(default.to_dict()) == default  # resolved values are saved
    with pytest.raises(ConfigError, match="strategy"):
        TrainConfig(strategy="nope")


def test_the_end_of_training_predicts_dev_and_test_once(toy_corpus, tiny_encoder, tmp_path):
    """Scores and calibration share one prediction pass per split (there were three over
    dev: the scores, the calibration's, and one typing the gold mentions)."""
    from mslm_core.predict.predictor import Predictor

    calls = []
    original_raw, original_run = Predictor.raw_predictions, Predictor._run

    def raw(self, sentences, extra_spans=None, styles=None):
        calls.append(("raw", len(sentences), extra_spans is not None))
        return original_raw(self, sentences, extra_spans, styles=styles)

    def run(self, windows):  # every pass through the model goes through here
        calls.append(("model", len(windows)))
        return original_run(self, windows)

    cfg = _config(toy_corpus, tiny_encoder, strategy="vanilla", epochs=2)
    trainer = Trainer(cfg, tmp_path / "out")
    trainer.finish = lambda: None  # train only; finish below, counted
    trainer.fit()
    del trainer.finish
    n = len(read_conll(toy_corpus).sentences)
    assert n <= trainer.predictor.chunk_sentences  # one chunk: one model run per pass
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Predictor, "raw_predictions", raw)
        mp.setattr(Predictor, "_run", run)
        result = trainer.finish()
    # dev (typing the gold mentions too), then test; calibration reuses both
    assert [c[:3] for c in calls if c[0] == "raw"] == [("raw", n, True), ("raw", n, False)]
    assert len([c for c in calls if c[0] == "model"]) == 2
    assert result["metrics"]["test"]["strict"]["f1"] > 0
    assert set(result["metrics"]) == {"dev", "test"}


def test_resume_refuses_a_checkpoint_of_another_config(toy_corpus, tiny_encoder, tmp_path):
    cfg = _config(toy_corpus, tiny_encoder, epochs=2, checkpoint_every=1)
    with pytest.raises(TrainingCancelled):
        Trainer(cfg, tmp_path / "out", callbacks=[StopAt(2)]).fit()
    other = _config(toy_corpus, tiny_encoder, epochs=2, checkpoint_every=1, seed=8)
    with pytest.raises(CheckpointError, match="another configuration"):
        Trainer(other, tmp_path / "out").fit(resume=True)


def test_early_stopping_keeps_the_best_epoch(toy_corpus, tiny_encoder, tmp_path):
    cfg = _config(toy_corpus, tiny_encoder, epochs=60, patience=2)
    trainer = Trainer(cfg, tmp_path / "out")
    trainer.fit()
    st = trainer.state
    assert st.stop_reason == "early_stopping"
    assert len(st.history) < 60
    scored = [h for h in st.history if h["dev_f1"] is not None]  # not the masked-LM stage
    assert st.best_epoch == max(scored, key=lambda h: (h["dev_f1"], -h["epoch"]))["epoch"]
    assert load_bundle(tmp_path / "out").manifest["best_epoch"] == st.best_epoch


def test_existing_output_is_not_overwritten(toy_corpus, tiny_encoder, tmp_path):
    (tmp_path / "out").mkdir()
    with pytest.raises(ConfigError, match="already exists"):
        train(_config(toy_corpus, tiny_encoder, epochs=1), tmp_path / "out")


def test_same_seed_same_model(toy_corpus, tiny_encoder, tmp_path):
    cfg = _config(toy_corpus, tiny_encoder, strategy="mslm", epochs=2)
    train(cfg, tmp_path / "a")
    train(cfg, tmp_path / "b")
    a = load_file(str(tmp_path / "a" / "model.safetensors"))
    b = load_file(str(tmp_path / "b" / "model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_two_stage_mslm_then_fine_tuning(toy_corpus, tiny_encoder, tmp_path):
    cfg = _config(toy_corpus, tiny_encoder, strategy="mslm_tapt", tapt_epochs=3, epochs=30)
    trainer = Trainer(cfg, tmp_path / "out")
    result = trainer.fit()
    history = result["history"]
    assert [h["stage"] for h in history] == ["mlm"] * 3 + ["joint"] * 30
    for h in history[:3]:  # stage 1: masked LM only, heads off, no dev score
        assert h["mlm_loss"] > 0 and h["detection_loss"] == 0.0 and h["dev_f1"] is None
    for h in history[3:]:  # stage 2: ordinary fine-tuning, nothing masked
        assert h["mlm_loss"] == 0.0 and h["detection_loss"] > 0.0
    assert result["metrics"]["test"]["strict"]["f1"] == 1.0
    assert trainer.state.best_epoch > 3
    # the learning-rate schedule restarts its warm-up/decay for the second stage
    spe = trainer.state.steps_per_epoch
    assert trainer._lr_factor(3 * spe - 1) < 0.5 and trainer._lr_factor(3 * spe) == 1.0


def test_masked_lm_batches_with_nothing_masked_are_skipped(
    toy_corpus, tiny_encoder_without_mlm_head, tmp_path
):
    # ELM 0.25, BLM 0, one sentence a batch: many batches of the masked-LM stage (and of the
    # head's warm-up) mask nothing and have no loss to learn from (this crashed the backward)
    cfg = _config(
        toy_corpus,
        tiny_encoder_without_mlm_head,
        strategy="mslm_tapt",
        tapt_epochs=3,
        epochs=1,
        batch_size=1,
        elm_rate=0.25,
        blm_rate=0.0,
        mlm_head_warmup_steps=3,
    )
    trainer = Trainer(cfg, tmp_path / "out")
    history = trainer.fit()["history"]
    assert [h["stage"] for h in history] == ["mlm"] * 3 + ["joint"]
    assert trainer.masking_info["mlm_head_warmup"]["steps"] == 3
    batch = trainer.collator([trainer.windows[0]], trainer._rngs(0, 0, [0]))
    batch["mask_type"].zero_()  # nothing masked
    batch["input_ids"] = batch["clean_ids"].clone()
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    trainer.collator = lambda windows, rngs: batch
    trainer.train_step(0, 0, [0], mlm_stage=True)
    for key, value in trainer.model.state_dict().items():
        assert torch.equal(value, before[key]), key


def test_mlm_head_warm_up_leaves_the_encoder_untouched(
    toy_corpus, tiny_encoder_without_mlm_head, tmp_path
):
    cfg = _config(
        toy_corpus, tiny_encoder_without_mlm_head, strategy="mslm", mlm_head_warmup_steps=12
    )
    trainer = Trainer(cfg, tmp_path / "out")
    trainer.prepare()
    encoder = {k: v.clone() for k, v in trainer.model.encoder.state_dict().items()}
    transform = trainer.model.mlm_head.predictions.transform.dense.weight.clone()
    trainer.warm_up_mlm_head()
    for key, value in trainer.model.encoder.state_dict().items():
        assert torch.equal(value, encoder[key]), key
    assert not torch.equal(transform, trainer.model.mlm_head.predictions.transform.dense.weight)
    info = trainer.masking_info["mlm_head_warmup"]
    assert info["steps"] == 12 and info["last_loss"] < info["first_loss"]
    # the warm-up is training: counted in what the run's training cost
    assert trainer.state.train_seconds == pytest.approx(info["seconds"], abs=0.01)
    assert info["seconds"] > 0 and trainer.state.train_cpu_seconds > 0
    assert all(p.grad is None for p in trainer.model.parameters())
    assert trainer.state.mlm_head_warmed
    assert trainer.encoder_info["mlm_head_from_checkpoint"] is False


def test_no_warm_up_for_a_head_that_came_with_the_checkpoint(toy_corpus, tiny_encoder, tmp_path):
    cfg = _config(toy_corpus, tiny_encoder, strategy="mslm", mlm_head_warmup_steps=12)
    trainer = Trainer(cfg, tmp_path / "out")
    trainer.prepare()
    head = {k: v.clone() for k, v in trainer.model.mlm_head.state_dict().items()}
    trainer.warm_up_mlm_head()
    assert all(torch.equal(v, head[k]) for k, v in trainer.model.mlm_head.state_dict().items())
    assert "mlm_head_warmup" not in trainer.masking_info


def test_mlm_head_warm_up_needs_a_masking_strategy(toy_corpus, tiny_encoder, tmp_path):
    cfg = _config(toy_corpus, tiny_encoder, strategy="vanilla", mlm_head_warmup_steps=5)
    with pytest.raises(ConfigError, match="masking strategy"):
        Trainer(cfg, tmp_path / "out").fit()


def test_select_last_keeps_the_last_epoch_and_never_stops_early(toy_corpus, tiny_encoder, tmp_path):
    cfg = _config(toy_corpus, tiny_encoder, strategy="vanilla", epochs=4, select="last", patience=1)
    result = train(cfg, tmp_path / "bundle")
    assert len(result["history"]) == 4
    assert load_bundle(tmp_path / "bundle").manifest["best_epoch"] == 4


def test_auto_takes_the_learning_curves_choice_for_the_training_set_size():
    """``auto`` (docs/benchmarks.md, 'Does MSLM help?'): the strategy and epochs of the
    curve's winner at that size, a setting given explicitly kept, and the choice recorded."""
    from mslm_core.config import AUTO_BY_SIZE, auto_rule

    small, large = AUTO_BY_SIZE[0], AUTO_BY_SIZE[-1]
    assert small.up_to_sentences is not None and large.up_to_sentences is None
    auto = TrainConfig(train="t", dev="d", strategy="auto")
    assert auto.epochs is None  # left to the choice
    with pytest.raises(ConfigError, match="auto"):
        auto.masking_strategy  # noqa: B018 - unresolved, it trains nothing
    for sentences, rule in ((1, small), (small.up_to_sentences, small), (10**6, large)):
        assert auto_rule(sentences) is rule
        resolved, record = auto.resolve_auto(sentences)
        assert resolved.strategy == rule.settings["strategy"]
        assert resolved.epochs == rule.settings.get("epochs", 3)
        assert record["variant"] == rule.variant and record["train_sentences"] == sentences
        assert f"{sentences:,} training sentences: {rule.variant}" in record["why"]
        assert record["kept"] == {}
    resolved, record = auto.resolve_auto(small.up_to_sentences + 1)
    assert resolved.strategy == large.settings["strategy"]
    # an explicit epochs count is the user's, whatever the size
    explicit, record = TrainConfig(strategy="auto", epochs=7).resolve_auto(10**6)
    assert explicit.epochs == 7 and record["kept"] == {"epochs": 7}
    assert "kept as given: epochs=7" in record["why"]
    # the others are unchanged and record nothing
    plain = TrainConfig(strategy="vanilla")
    assert plain.resolve_auto(10) == (plain, None) and plain.epochs == 3
    assert TrainConfig(strategy="mslm_tapt").epochs == 3


def test_a_run_with_auto_trains_as_its_size_chooses_and_says_why(
    toy_corpus, tiny_encoder, tmp_path, monkeypatch
):
    from mslm_core import config

    n = len(read_conll(toy_corpus).sentences)
    table = (
        config.SizeRule(n - 1, "vanilla", {"strategy": "vanilla"}, (1,)),
        config.SizeRule(None, "vanilla-2-epochs", {"strategy": "vanilla", "epochs": 2}, (9,)),
    )
    monkeypatch.setattr(config, "AUTO_BY_SIZE", table)
    cfg = _config(toy_corpus, tiny_encoder, strategy="auto", epochs=None)
    result = train(cfg, tmp_path / "bundle")
    manifest = load_bundle(tmp_path / "bundle").manifest
    assert manifest["strategy"] == "vanilla" and manifest["config"]["strategy"] == "vanilla"
    assert manifest["config"]["epochs"] == 2 and len(result["history"]) == 2
    choice = manifest["auto"]
    assert (choice["variant"], choice["train_sentences"]) == ("vanilla-2-epochs", n)
    assert choice["settings"] == {"strategy": "vanilla", "epochs": 2}
    assert choice["why"].startswith(f"{n} training sentences: vanilla-2-epochs")
    assert [r["variant"] for r in choice["rules"]] == ["vanilla", "vanilla-2-epochs"]
    # the bundle's config retrains the same way, without auto
    assert TrainConfig.from_dict(manifest["config"]).strategy == "vanilla"


@pytest.mark.parametrize("strategy", ["vanilla", "mslm_tapt"])
def test_a_dev_type_that_training_never_has_is_scored_not_fatal(
    toy_corpus, tiny_encoder, tmp_path, strategy
):
    # training sentences without a Chemical; dev and test have one (a small training subset
    # of a corpus meets this: MACCROBAT's first 100 sentences have no Frequency)
    train = tmp_path / "train.tsv"
    blocks = toy_corpus.read_text(encoding="utf-8").strip().split("\n\n")
    train.write_text("\n\n".join(b for b in blocks if "Chemical" not in b) + "\n", "utf-8")
    cfg = _config(toy_corpus, tiny_encoder, strategy=strategy, epochs=2)
    cfg = TrainConfig(**{**cfg.__dict__, "train": str(train)})
    result = Trainer(cfg, tmp_path / "out").fit()
    assert load_bundle(tmp_path / "out").manifest["types"] == ["Disease"]
    assert result["metrics"]["test"]["strict"]["f1"] < 1.0  # the Chemical is never found
