"""The weighted masked-LM loss (docs/method.md §3, eq. 6) against hand computations."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from mslm_core.losses import mask_specific_loss

# 3 masked positions, vocabulary of 4
ROWS = [[2.0, 0.0, -1.0, 0.5], [0.1, 0.2, 0.3, 0.4], [-1.0, 3.0, 0.0, 0.0]]
LABELS = [0, 3, 2]
TYPES = [1, 2, 2]  # BLM, ELM, ELM


def _ce(row: list[float], label: int) -> float:
    """Cross-entropy by hand: log Σ exp(z) − z_label."""
    return math.log(sum(math.exp(z) for z in row)) - row[label]


CE = [_ce(r, y) for r, y in zip(ROWS, LABELS, strict=True)]


def _tensors(requires_grad: bool = False):
    logits = torch.tensor(ROWS, dtype=torch.float32, requires_grad=requires_grad)
    return logits, torch.tensor(LABELS), torch.tensor(TYPES)


def test_hand_computed_cross_entropies():
    # sanity of the hand computation itself, to 6 decimals
    hand = list(CE)
    assert hand == pytest.approx([0.342350, 1.242536, 3.111443], abs=1e-6)


@pytest.mark.parametrize(
    ("weights", "expected"),
    [
        ((0.3, 0.7), (0.3 * CE[0] + 0.7 * CE[1] + 0.7 * CE[2]) / 3),
        ((0.3, 0.7), 1.050163),  # the same, as a number
        ((0.5, 0.5), 0.5 * sum(CE) / 3),
        ((1.0, 0.0), CE[0] / 3),  # only the BLM term survives
        ((0.0, 1.0), (CE[1] + CE[2]) / 3),  # only the ELM terms; still divided by M = 3
        ((0.3775, 0.6225), (0.3775 * CE[0] + 0.6225 * (CE[1] + CE[2])) / 3),
    ],
)
def test_weighted_loss_equals_hand_computation(weights, expected):
    logits, labels, mask_type = _tensors()
    loss = mask_specific_loss(logits, labels, mask_type, weights)
    assert loss.dim() == 0
    assert float(loss) == pytest.approx(expected, abs=1e-6)


def test_weights_follow_the_mask_type_not_the_position():
    logits, labels, _ = _tensors()
    swapped = torch.tensor([2, 1, 1])  # ELM, BLM, BLM
    loss = mask_specific_loss(logits, labels, swapped, (0.3, 0.7))
    expected = (0.7 * CE[0] + 0.3 * CE[1] + 0.3 * CE[2]) / 3
    assert float(loss) == pytest.approx(expected, abs=1e-6)


def test_unit_weights_equal_plain_mean_cross_entropy():
    logits, labels, mask_type = _tensors()
    loss = mask_specific_loss(logits, labels, mask_type, (1.0, 1.0))
    assert float(loss) == pytest.approx(sum(CE) / 3, abs=1e-6)
    torch.testing.assert_close(loss, F.cross_entropy(logits, labels))


def test_unit_weights_equal_mean_cross_entropy_on_random_logits():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(17, 50, generator=g)
    labels = torch.randint(0, 50, (17,), generator=g)
    mask_type = torch.randint(1, 3, (17,), generator=g)
    loss = mask_specific_loss(logits, labels, mask_type, (1.0, 1.0))
    torch.testing.assert_close(loss, F.cross_entropy(logits, labels))


def test_gradient_is_weighted_softmax_minus_one_hot_over_m():
    logits, labels, mask_type = _tensors(requires_grad=True)
    w = {1: 0.3, 2: 0.7}
    mask_specific_loss(logits, labels, mask_type, (0.3, 0.7)).backward()
    for i, (row, y, t) in enumerate(zip(ROWS, LABELS, TYPES, strict=True)):
        z = sum(math.exp(v) for v in row)
        expected = [
            w[t] * (math.exp(v) / z - (1.0 if k == y else 0.0)) / 3 for k, v in enumerate(row)
        ]
        assert logits.grad[i].tolist() == pytest.approx(expected, abs=1e-6)


def test_nothing_masked_gives_zero_with_a_gradient():
    logits = torch.zeros(0, 4, requires_grad=True)
    loss = mask_specific_loss(
        logits, torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long), (0.3, 0.7)
    )
    assert float(loss.detach()) == 0.0
    assert loss.requires_grad
    loss.backward()  # must not raise: the training loop always calls backward
    assert logits.grad is not None and logits.grad.shape == (0, 4)


def test_nothing_masked_keeps_the_graph_of_a_projection():
    # as in the model: logits come from a head applied to zero gathered positions
    head = torch.nn.Linear(8, 4)
    logits = head(torch.zeros(0, 8))
    loss = mask_specific_loss(
        logits, torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long), (0.5, 0.5)
    )
    (loss + 0.0).backward()
    assert float(loss.detach()) == 0.0
    assert head.weight.grad is not None and float(head.weight.grad.abs().sum()) == 0.0


@pytest.mark.parametrize("bad", [[1, 0, 2], [0, 0, 0], [1, 2, 3], [-1, 1, 2]])
def test_mask_type_must_be_blm_or_elm_at_every_masked_position(bad):
    logits, labels, _ = _tensors()
    with pytest.raises(ValueError, match="mask_type"):
        mask_specific_loss(logits, labels, torch.tensor(bad), (0.5, 0.5))


def test_half_precision_logits_are_computed_in_float():
    logits, labels, mask_type = _tensors()
    loss = mask_specific_loss(logits.to(torch.bfloat16), labels, mask_type, (0.3, 0.7))
    assert loss.dtype == torch.float32
    assert float(loss) == pytest.approx(1.050163, abs=2e-2)  # bf16 rounding of the inputs
