"""Mask-specific weights (docs/method.md §2): the worked examples, both rules, and the refusals."""

from __future__ import annotations

import math

import pytest

from mslm_core.errors import MaskingError
from mslm_core.weights import SENSITIVITY_THRESHOLD, WEIGHT_RULES, mask_specific_weights


def _softmax_pair(a: float, b: float) -> tuple[float, float]:
    ea, eb = math.exp(a), math.exp(b)
    return ea / (ea + eb), eb / (ea + eb)


# (n_elm, n_blm, expected w_blm, expected w_elm), computed by hand from eq. 2–5.
PAPER_CASES = [
    # docs/method.md §2 worked example 1: raw 0.25 / 0.75, clamp keeps them, softmax.
    pytest.param(1000, 3000, 0.3775, 0.6225, id="elm1000-blm3000"),
    # worked example 2: raw 0.75 / 0.25 -> clamp 0.5 / 0.5.
    pytest.param(3000, 1000, 0.5, 0.5, id="elm3000-blm1000"),
    # worked example 3: N_BLM = 0 -> raw 1.0 / 0.0 -> clamp 0.5 / 0.5.
    pytest.param(1000, 0, 0.5, 0.5, id="blm0"),
    # §2's counts at the paper's defaults (8,583 entity vs 4,331 random sub-words, the committed
    # honest-mslm mslm-paper run, NCBI-disease seed 1): clamped to 0.5 / 0.5.
    pytest.param(8583, 4331, 0.5, 0.5, id="ncbi-paper"),
    # N_ELM = 0: raw 0.0 / 1.0 -> softmax(0, 1) = 1/(1+e), e/(1+e).
    pytest.param(0, 1000, 1 / (1 + math.e), math.e / (1 + math.e), id="elm0"),
    # equal counts: raw 0.5 / 0.5.
    pytest.param(500, 500, 0.5, 0.5, id="equal"),
]


@pytest.mark.parametrize(("n_elm", "n_blm", "w_blm", "w_elm"), PAPER_CASES)
def test_paper_rule_worked_examples(n_elm, n_blm, w_blm, w_elm):
    got_blm, got_elm = mask_specific_weights(n_elm, n_blm)
    assert got_blm == pytest.approx(w_blm, abs=1e-4)
    assert got_elm == pytest.approx(w_elm, abs=1e-4)


def test_paper_rule_first_example_is_softmax_of_quarter_and_three_quarters():
    # exact value, not just 4 decimals: softmax([0.25, 0.75])
    exp_blm, exp_elm = _softmax_pair(0.25, 0.75)
    got = mask_specific_weights(1000, 3000, rule="paper")
    assert got == pytest.approx((exp_blm, exp_elm), abs=1e-12)
    assert got[0] == pytest.approx(0.377541, abs=1e-6)


def test_default_rule_is_paper():
    assert mask_specific_weights(1000, 3000) == mask_specific_weights(1000, 3000, rule="paper")


# reference rule: w_ELM = max(0.5, 1 - N_BLM/total), w_BLM = min(0.5, 1 - N_BLM/total).
REFERENCE_CASES = [
    # §2: 8,583 vs 4,331 -> raw 1 - 4331/12914 = 0.6646 -> 0.5 / 0.6646 -> softmax ≈ 0.459 / 0.541.
    pytest.param(8583, 4331, *_softmax_pair(0.5, 1 - 4331 / 12914), id="ncbi-reference"),
    # more BLM than ELM: raw 1 - 3000/4000 = 0.25 -> BLM 0.25, ELM 0.5.
    pytest.param(1000, 3000, *_softmax_pair(0.25, 0.5), id="elm1000-blm3000"),
    # no BLM: raw 1.0 -> BLM 0.5, ELM 1.0.
    pytest.param(1000, 0, *_softmax_pair(0.5, 1.0), id="blm0"),
    # no ELM: raw 0.0 -> BLM 0.0, ELM 0.5.
    pytest.param(0, 1000, *_softmax_pair(0.0, 0.5), id="elm0"),
]


@pytest.mark.parametrize(("n_elm", "n_blm", "w_blm", "w_elm"), REFERENCE_CASES)
def test_reference_rule_examples(n_elm, n_blm, w_blm, w_elm):
    got_blm, got_elm = mask_specific_weights(n_elm, n_blm, rule="reference")
    assert got_blm == pytest.approx(w_blm, abs=1e-9)
    assert got_elm == pytest.approx(w_elm, abs=1e-9)


def test_reference_rule_ncbi_example_rounded_as_in_the_doc():
    w_blm, w_elm = mask_specific_weights(8583, 4331, rule="reference")
    assert w_blm == pytest.approx(0.459, abs=5e-4)
    assert w_elm == pytest.approx(0.541, abs=5e-4)


def test_rules_differ_where_the_doc_says_they_do():
    # paper clamps §2's 8,583/4,331 to 0.5/0.5; the research code favours ELM
    assert mask_specific_weights(8583, 4331, "paper") != mask_specific_weights(
        8583, 4331, "reference"
    )


GRID = [(e, b) for e in (0, 1, 7, 444, 834, 1000, 3000) for b in (0, 1, 7, 444, 834, 3000)]
GRID = [(e, b) for e, b in GRID if e + b > 0]


@pytest.mark.parametrize("rule", WEIGHT_RULES)
@pytest.mark.parametrize(("n_elm", "n_blm"), GRID)
def test_weights_sum_to_one_and_elm_never_below_blm(rule, n_elm, n_blm):
    w_blm, w_elm = mask_specific_weights(n_elm, n_blm, rule=rule)
    assert w_blm + w_elm == pytest.approx(1.0, abs=1e-12)
    assert w_elm >= w_blm
    # the clamps bound the softmax inputs to [0, 0.5] and [0.5, 1]: at most softmax(0, 1)
    assert 1 / (1 + math.e) - 1e-12 <= w_blm <= SENSITIVITY_THRESHOLD + 1e-12


def test_zero_counts_are_refused_with_a_clear_message():
    with pytest.raises(MaskingError) as info:
        mask_specific_weights(0, 0)
    message = str(info.value)
    assert "E003" in message
    assert "N_ELM = N_BLM = 0" in message
    assert "elm_rate" in message and "blm_rate" in message


@pytest.mark.parametrize("rule", WEIGHT_RULES)
def test_zero_counts_refused_for_every_rule(rule):
    with pytest.raises(MaskingError):
        mask_specific_weights(0, 0, rule=rule)


@pytest.mark.parametrize(("n_elm", "n_blm"), [(-1, 10), (10, -1), (-5, -5), (-1, 1)])
def test_negative_counts_are_rejected(n_elm, n_blm):
    with pytest.raises(MaskingError, match="non-negative"):
        mask_specific_weights(n_elm, n_blm)


@pytest.mark.parametrize("rule", ["Paper", "research", "", "ref"])
def test_unknown_rule_is_rejected_listing_valid_rules(rule):
    with pytest.raises(MaskingError) as info:
        mask_specific_weights(10, 10, rule=rule)
    message = str(info.value)
    assert repr(rule) in message
    assert "paper" in message and "reference" in message
