"""Tag decoding: each word's B/I/O probabilities → a tag per word (argmax, or Viterbi under
BIO) → word spans, without a trailing hyphen (docs/method.md §4)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ..config import DECODINGS
from ..features import B, I, O

__all__ = ["DECODINGS", "HYPHENS", "decode_bio", "decode_tags", "trim_hyphens"]


def decode_tags(probs: npt.NDArray[np.float32], decoding: str) -> list[int]:
    """Word tag probabilities [n, 3] (B, I, O) → a tag id per word.

    ``argmax``: each word's most probable tag. ``viterbi``: the most probable sequence in
    which an I never follows O nor opens the sentence (so every mention starts with B). A
    temperature changes neither: it scales every log-probability alike and adds a per-word
    constant, which moves no path's rank."""
    if decoding == "argmax" or len(probs) == 0:
        tags: list[int] = probs.argmax(-1).tolist()
        return tags
    logp = np.log(np.clip(probs.astype(np.float64), 1e-12, 1.0))
    n = len(logp)
    back = np.zeros((n, 3), np.int64)
    score = logp[0].copy()
    score[I] = -np.inf
    for j in range(1, n):
        best = int(score.argmax())  # B and O may follow any tag
        into_i = B if score[B] >= score[I] else I  # I follows B or I only
        back[j] = (best, into_i, best)
        score = np.array([score[best], score[into_i], score[best]]) + logp[j]
    tags = [int(score.argmax())]
    for j in range(n - 1, 0, -1):
        tags.append(int(back[j, tags[-1]]))
    return tags[::-1]


HYPHENS = frozenset("-‐‑‒–—")


def trim_hyphens(words: Sequence[str], spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Spans without a trailing hyphen. Words are cut at hyphens ("Cisplatin-induced" →
    "Cisplatin", "-", "induced") and a hyphen inside a mention is common ("X - linked"), so a
    tagger may carry a mention onto the hyphen that only joins it to the next word; no gold
    mention of the dev and test sets of NCBI-disease and BC5CDR ends on one."""
    out = []
    for start, end in spans:
        while end - start > 1 and words[end - 1] in HYPHENS:
            end -= 1
        if words[end - 1] not in HYPHENS:
            out.append((start, end))
    return out


def decode_bio(tags: list[int]) -> list[tuple[int, int]]:
    """Untyped BIO ids → word spans. An I after O (or at the start) starts a new mention."""
    spans: list[tuple[int, int]] = []
    start = None
    for j, t in enumerate(tags):
        if t == B or (t == I and start is None):
            if start is not None:
                spans.append((start, j))
            start = j
        elif t == O and start is not None:
            spans.append((start, j))
            start = None
    if start is not None:
        spans.append((start, len(tags)))
    return spans
