"""Batches: one collator for every strategy; strategies differ only in how they choose."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .features import IGNORE, Window
from .masking import MaskingStrategy, corrupt


@dataclass
class MaskingCollator:
    """Pads windows and masks them. ``strategy=None`` is vanilla (no masking).

    Returns tensors: ``input_ids`` [B, T] (masked), ``clean_ids`` [B, T], ``attention_mask``
    [B, T], ``detection_labels`` [B, T], ``mask_type`` [B, T] int64 (0/1/2), ``mentions``
    [N, 4] (batch index, start, end, type id), and ``allowed`` [B, T, L] bool when the windows
    carry partial labels (training on several corpora).
    """

    strategy: MaskingStrategy | None
    mask_token_id: int
    pad_token_id: int
    replace: str = "mask"
    vocab_size: int | None = None
    special_ids: tuple[int, ...] = ()

    def __call__(
        self, windows: list[Window], rngs: list[np.random.Generator]
    ) -> dict[str, torch.Tensor]:
        longest = max(len(w) for w in windows)
        shape = (len(windows), longest)
        clean = np.full(shape, self.pad_token_id, np.int64)
        masked = clean.copy()
        attention = np.zeros(shape, np.int64)
        labels = np.full(shape, IGNORE, np.int64)
        mask_type = np.zeros(shape, np.int64)
        mentions: list[tuple[int, int, int, int]] = []
        for r, (w, rng) in enumerate(zip(windows, rngs, strict=True)):
            n = len(w)
            clean[r, :n] = w.input_ids
            attention[r, :n] = 1
            if w.labels is not None:
                labels[r, :n] = w.labels
            if self.strategy is not None:
                mt = self.strategy.choose(w, rng)
                mask_type[r, :n] = mt
                masked[r, :n] = corrupt(
                    w.input_ids,
                    mt,
                    self.mask_token_id,
                    rng,
                    self.replace,
                    self.vocab_size,
                    self.special_ids,
                )
            else:
                masked[r, :n] = w.input_ids
            mentions.extend((r, a, b, t) for a, b, t in w.mentions)
        batch = {
            "input_ids": torch.from_numpy(masked),
            "clean_ids": torch.from_numpy(clean),
            "attention_mask": torch.from_numpy(attention),
            "detection_labels": torch.from_numpy(labels),
            "mask_type": torch.from_numpy(mask_type),
            "mentions": torch.tensor(mentions, dtype=torch.int64).reshape(-1, 4),
        }
        if windows[0].allowed is not None:
            allowed = np.zeros((*shape, windows[0].allowed.shape[1]), bool)
            for r, w in enumerate(windows):
                if w.allowed is None:
                    raise ValueError("partial labels: every window of a run carries them, or none")
                allowed[r, : len(w)] = w.allowed
            batch["allowed"] = torch.from_numpy(allowed)
        return batch
