"""Mask-specific weights (docs/method.md §2, paper eq. 2–5)."""

from __future__ import annotations

import math

from .errors import MaskingError

# a subword's mask type, as masking.py marks it (``mask_type``) and the loss weighs it: here, out
# of the masking module, so that the model's loss needs no import of the masking code (the
# prediction path cannot reach it: pyproject.toml's import contracts)
NOT_MASKED, BLM, ELM = 0, 1, 2
SENSITIVITY_THRESHOLD = 0.5
WEIGHT_RULES = ("paper", "reference")


def mask_specific_weights(n_elm: int, n_blm: int, rule: str = "paper") -> tuple[float, float]:
    """``(w_blm, w_elm)`` from the counts of ELM- and BLM-masked tokens of the training set.

    ``rule="paper"`` follows the paper's equations::

        w_x = 1 - N_x / (N_BLM + N_ELM)                    (eq. 2)
        w_BLM = min(w_BLM, 0.5); w_ELM = max(w_ELM, 0.5)   (eq. 3)
        [w_BLM, w_ELM] = softmax([w_BLM, w_ELM])           (eq. 4–5)

    ``rule="reference"`` is what the authors' research code computes instead: both raw
    weights come from the BLM share, ``w_ELM = max(0.5, 1 - N_BLM/total)`` and
    ``w_BLM = min(0.5, 1 - N_BLM/total)``, then the same softmax (ELM always ≥ BLM).
    """
    if n_elm < 0 or n_blm < 0:
        raise MaskingError(f"mask counts must be non-negative, got n_elm={n_elm}, n_blm={n_blm}")
    total = n_elm + n_blm
    if total == 0:
        raise MaskingError(
            "mask-specific weights are undefined: no token was masked in the training set "
            "(N_ELM = N_BLM = 0); raise elm_rate or blm_rate, or check that the corpus has "
            "entity mentions"
        )
    if rule == "paper":
        raw_blm, raw_elm = 1.0 - n_blm / total, 1.0 - n_elm / total
    elif rule == "reference":
        raw_blm = raw_elm = 1.0 - n_blm / total
    else:
        raise MaskingError(f"unknown weight_rule {rule!r}; valid: {', '.join(WEIGHT_RULES)}")
    w_blm = min(raw_blm, SENSITIVITY_THRESHOLD)
    w_elm = max(raw_elm, SENSITIVITY_THRESHOLD)
    # softmax over the pair, written stably
    m = max(w_blm, w_elm)
    e_blm, e_elm = math.exp(w_blm - m), math.exp(w_elm - m)
    return e_blm / (e_blm + e_elm), e_elm / (e_blm + e_elm)
