"""The model's forward pass: where the MLM head runs, which pass the heads read, pooling."""

from __future__ import annotations

import pytest
import torch

from mslm_core.model import LossSpec, load_pretrained, pool_spans, typed_tags


@pytest.fixture
def model(tiny_encoder):
    torch.manual_seed(0)
    m, _, _ = load_pretrained(str(tiny_encoder), ["Chemical", "Disease"], head="paper")
    return m


def _batch():
    clean = torch.tensor([[2, 10, 11, 12, 13, 3], [2, 14, 15, 3, 0, 0]])
    mask_type = torch.tensor([[0, 2, 2, 0, 1, 0], [0, 0, 1, 0, 0, 0]])
    masked = clean.masked_fill(mask_type > 0, 4)
    return dict(
        input_ids=masked,
        clean_ids=clean,
        attention_mask=(clean != 0).long(),
        detection_labels=torch.tensor([[-100, 0, 1, 2, 2, -100], [-100, 2, 0, -100, -100, -100]]),
        mask_type=mask_type,
        mentions=torch.tensor([[0, 1, 3, 1], [1, 2, 3, 0]]),
    )


def test_vocabulary_logits_only_at_masked_positions(model):
    seen = []
    handle = model.mlm_head.register_forward_hook(lambda mod, inp, out: seen.append(out.shape))
    out = model(**_batch(), spec=LossSpec(mask_weights=(0.4, 0.6)))
    handle.remove()
    vocab = model.mlm_model.config.vocab_size
    assert seen == [torch.Size([4, vocab])]  # 4 masked positions, not 2 × 6
    assert out.n_masked == 4
    total = (out.mlm_loss + out.detection_loss + out.classification_loss).detach()
    assert float(out.loss.detach()) == pytest.approx(float(total), rel=1e-6)
    assert float(out.mlm_loss.detach()) > 0 and float(out.classification_loss.detach()) > 0


def test_vanilla_batch_never_runs_the_mlm_head(model):
    batch = _batch()
    batch["input_ids"] = batch["clean_ids"]
    batch["mask_type"] = torch.zeros_like(batch["mask_type"])
    seen = []
    handle = model.mlm_head.register_forward_hook(lambda *a: seen.append(1))
    out = model(**batch)
    handle.remove()
    assert seen == [] and float(out.mlm_loss) == 0.0


def test_detect_on_clean_runs_a_second_unmasked_pass(model):
    model.eval()  # no dropout: the two settings must differ only by what the heads read
    calls = []
    handle = model.encoder.register_forward_hook(
        lambda mod, args, kwargs, out: calls.append(kwargs["input_ids"].clone()),
        with_kwargs=True,
    )
    batch = _batch()
    masked_out = model(**batch, spec=LossSpec(detect_on="masked"))
    clean_out = model(**batch, spec=LossSpec(detect_on="clean"))
    handle.remove()
    assert len(calls) == 3
    assert torch.equal(calls[0], batch["input_ids"]) and torch.equal(calls[2], batch["clean_ids"])
    assert not torch.allclose(masked_out.detection_logits, clean_out.detection_logits)
    clean_direct = model.detection_logits(
        model.encode(batch["clean_ids"], batch["attention_mask"]), batch["clean_ids"]
    )
    torch.testing.assert_close(clean_out.detection_logits, clean_direct)


def test_detection_loss_can_ignore_masked_positions(model):
    model.eval()
    batch = _batch()
    # only labelled positions that are not masked: (0,3)=O, (1,1)=O
    out = model(**batch, spec=LossSpec(detect_ignore_masked=True))
    logits = out.detection_logits
    expected = torch.nn.functional.cross_entropy(
        torch.stack([logits[0, 3], logits[1, 1]]), torch.tensor([2, 2])
    )
    assert float(out.detection_loss.detach()) == pytest.approx(float(expected.detach()), rel=1e-5)


def test_pool_spans_is_the_mean_over_the_span():
    feats = torch.arange(2 * 4 * 3, dtype=torch.float32).reshape(2, 4, 3)
    pooled = pool_spans(feats, torch.tensor([0, 1]), torch.tensor([1, 0]), torch.tensor([3, 1]))
    torch.testing.assert_close(pooled[0], feats[0, 1:3].mean(0))
    torch.testing.assert_close(pooled[1], feats[1, 0])


def test_serving_graph_takes_no_labels_and_types_mentions(model):
    model.eval()
    clean = _batch()["clean_ids"]
    probs, feats = model.forward_features(clean, (clean != 0).long())
    assert probs.shape == (2, 6, 3) and feats.shape[:2] == (2, 6)
    torch.testing.assert_close(probs.sum(-1), torch.ones(2, 6))
    logits = model.classify(feats[0, 1:3].mean(0, keepdim=True))
    assert logits.shape == (1, 2)


# --------------------------------------------------------------------------- linear head


@pytest.fixture
def linear(tiny_encoder):
    torch.manual_seed(0)
    m, _, _ = load_pretrained(str(tiny_encoder), ["Chemical", "Disease"], head="linear")
    return m.eval()


def test_typed_tags_put_each_mentions_type_on_its_b_and_i():
    # C = 2: B-Chemical 0, B-Disease 1, I-Chemical 2, I-Disease 3, O 4
    batch = _batch()
    tags = typed_tags(batch["detection_labels"], batch["mentions"], 2)
    assert tags.tolist() == [[-100, 1, 3, 4, 4, -100], [-100, 4, 0, -100, -100, -100]]


def test_linear_head_loss_is_cross_entropy_over_typed_tags(linear):
    batch = _batch()
    batch["input_ids"] = batch["clean_ids"]
    batch["mask_type"] = torch.zeros_like(batch["mask_type"])
    out = linear(**batch)
    logits = out.detection_logits
    assert logits.shape == (2, 6, 5)
    keep = batch["detection_labels"] != -100
    expected = torch.nn.functional.cross_entropy(
        logits[keep], typed_tags(batch["detection_labels"], batch["mentions"], 2)[keep]
    )
    assert float(out.detection_loss.detach()) == pytest.approx(float(expected.detach()), rel=1e-5)
    assert float(out.classification_loss) == 0.0  # the tags carry the types


def test_linear_head_serves_untyped_tags_and_type_probabilities(linear):
    clean = _batch()["clean_ids"]
    attention = (clean != 0).long()
    probs, feats = linear.forward_features(clean, attention)
    tags = linear.detection_logits(linear.encode(clean, attention), clean).softmax(-1)
    # B = Σ B-type, I = Σ I-type, O = O
    torch.testing.assert_close(probs[..., 0], tags[..., 0] + tags[..., 1])
    torch.testing.assert_close(probs[..., 1], tags[..., 2] + tags[..., 3])
    torch.testing.assert_close(probs[..., 2], tags[..., 4])
    # type features: log P(type | entity) per subword
    mass = torch.stack([tags[..., 0] + tags[..., 2], tags[..., 1] + tags[..., 3]], -1)
    torch.testing.assert_close(feats.exp(), mass / mass.sum(-1, keepdim=True))
    # a mention's type: the renormalised geometric mean of its subwords' type probabilities
    span = feats[0, 1:3]
    typed = linear.classify(span.mean(0, keepdim=True)).softmax(-1)[0]
    geometric = span.exp().prod(0) ** 0.5
    torch.testing.assert_close(typed, geometric / geometric.sum())
    assert linear.type_feature_size == 2 and linear.pools_first_subwords


def test_unknown_head_is_refused(tiny_encoder):
    from mslm_core.errors import UnknownNameError

    with pytest.raises(UnknownNameError, match="head"):
        load_pretrained(str(tiny_encoder), ["Disease"], head="crf")
