"""Loss functions, pure and separately testable."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .weights import BLM, ELM


def mask_specific_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    mask_type: torch.Tensor,
    weights: tuple[float, float],
) -> torch.Tensor:
    """Weighted masked-LM loss (docs/method.md eq. 6).

    ``logits``: [M, V] vocabulary logits at the M masked positions only; ``labels``: [M]
    original token ids; ``mask_type``: [M] integers (1 = BLM, 2 = ELM); ``weights``:
    ``(w_blm, w_elm)``. Returns ``Σ_i w_type(i) · CE_i / M`` (0 when nothing is masked).
    """
    if logits.shape[0] == 0:
        return logits.sum() * 0.0
    if not bool(((mask_type == BLM) | (mask_type == ELM)).all()):
        raise ValueError("mask_type must be 1 (BLM) or 2 (ELM) at every masked position")
    ce = F.cross_entropy(logits.float(), labels, reduction="none")  # [M]
    w_blm, w_elm = weights
    w = torch.where(mask_type == ELM, ce.new_tensor(w_elm), ce.new_tensor(w_blm))
    return (w * ce).sum() / ce.shape[0]
