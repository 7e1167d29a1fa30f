"""A few checks with the real MiniLM encoder that ships inside an installed package."""

from __future__ import annotations

import pytest
from conftest import data_dir

from mslm_core.config import TrainConfig
from mslm_core.corpus import Corpus, read_conll, write_conll
from mslm_core.model import load_pretrained
from mslm_core.predict import load_predictor
from mslm_core.train import train

pytestmark = pytest.mark.integration


def test_minilm_ships_no_mlm_head_so_a_tied_one_is_initialised():
    model, tokenizer, info = load_pretrained("minilm", ["Disease"])
    assert info["mlm_head_from_checkpoint"] is False
    mlm = model.mlm_model
    assert mlm.get_output_embeddings().weight is mlm.get_input_embeddings().weight
    assert tokenizer.is_fast and tokenizer.mask_token_id is not None
    assert model.mlm_model.config.hidden_size == 384


def test_short_real_training_run(tmp_path):
    ncbi = data_dir("NCBI-disease-IOB")
    train_c, dev_c = read_conll(ncbi / "train.tsv"), read_conll(ncbi / "devel.tsv")
    write_conll(Corpus(train_c.sentences[:96]), tmp_path / "train.tsv")
    write_conll(Corpus(dev_c.sentences[:64]), tmp_path / "dev.tsv")
    cfg = TrainConfig(
        train=str(tmp_path / "train.tsv"),
        dev=str(tmp_path / "dev.tsv"),
        strategy="mslm",
        epochs=1,
        batch_size=16,
        learning_rate=1e-4,
    )
    result = train(cfg, tmp_path / "bundle")
    assert result["history"][0]["mlm_loss"] > 0.0
    assert result["metrics"]["dev"]["perplexity"] is not None
    predictor = load_predictor(tmp_path / "bundle")
    text = "Germline mutations in BRCA1 predispose to breast and ovarian cancer."
    (entities,) = predictor.annotate([text])
    for e in entities:
        assert text[e.start : e.end] == e.text and e.type == "Disease"
