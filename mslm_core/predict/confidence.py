"""Confidence: each word's tag probabilities read from its owner window, a span's type
probabilities from the mean of its type features, temperature scaling, and the scored mentions
(docs/method.md §4: ``confidence = detection_score × type_score``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from ..features import B, I, O, Window
from ..types import ScoredMention
from .windows import window_for


@dataclass
class RawPredictions:
    """Untempered outputs of one prediction pass over sentences."""

    word_probs: list[npt.NDArray[np.float32]]  # per sentence [n_words, 3] (B, I, O)
    spans: list[tuple[int, int, int]]  # decoded (sentence, start, end), in sentence order
    type_probs: npt.NDArray[np.float32]  # [len(spans), C]
    # spans the caller asked to have typed as well (sentence, start, end), and their types
    extra_spans: list[tuple[int, int, int]] = field(default_factory=list)
    extra_type_probs: npt.NDArray[np.float32] = field(
        default_factory=lambda: np.zeros((0, 0), np.float32)
    )
    decoding: str = "argmax"  # how the spans were decoded (which tag each word was given)

    def mentions(
        self, types: Sequence[str], temperatures: tuple[float, float] = (1.0, 1.0)
    ) -> list[list[ScoredMention]]:
        """Scored mentions per sentence. A tempered distribution keeps its order, so the
        temperatures move confidences only: the spans and types are the same for any."""
        t_det, t_type = temperatures
        out: list[list[ScoredMention]] = [[] for _ in self.word_probs]
        if not self.spans:
            return out
        type_probs = temper(self.type_probs, t_type)
        # every span's word rows, one after the other; a span's detection confidence is the
        # geometric mean of its words' chosen tag probabilities
        rows = temper(np.concatenate([self.word_probs[s][a:b] for s, a, b in self.spans]), t_det)
        lengths = np.array([b - a for _, a, b in self.spans])
        firsts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        if self.decoding == "viterbi":  # the path's tags: B, then I
            chosen = rows[:, I].copy()
            chosen[firsts] = rows[firsts, B]
        else:  # each word's best tag (the first may be an I that opened the mention)
            chosen = rows.max(-1)
        logs = np.log(np.clip(chosen, 1e-12, 1.0)).astype(np.float64)
        dets = np.exp(np.add.reduceat(logs, firsts) / lengths)
        best = type_probs.argmax(-1)
        type_confidences = type_probs[np.arange(len(best)), best].astype(np.float64)
        for (s, start, end), c, det, ts in zip(
            self.spans, best.tolist(), dets.tolist(), type_confidences.tolist(), strict=True
        ):
            out[s].append(ScoredMention(start, end, types[c], det * ts, det, ts))
        return out


def temper(probs: npt.NDArray[np.float32], temperature: float) -> npt.NDArray[np.float32]:
    """``softmax(log p / T)`` over the last axis — the same as dividing the logits by ``T``,
    so every backend's probabilities can be tempered after the fact (``T = 1``: unchanged)."""
    if temperature == 1.0 or probs.size == 0:
        return probs
    logits = np.log(np.clip(probs, 1e-12, 1.0)) / temperature
    logits -= logits.max(-1, keepdims=True)
    out = np.exp(logits)
    tempered: npt.NDArray[np.float32] = (out / out.sum(-1, keepdims=True)).astype(probs.dtype)
    return tempered


def word_tag_probs(
    sentences: list[list[str]],
    windows: list[Window],
    owners: list[list[int]],
    probs: list[npt.NDArray[np.float32]],
) -> list[npt.NDArray[np.float32]]:
    """Per sentence [n_words, 3]: each word's tag probabilities at its first subword in its
    owner window."""
    firsts = [w.first_subword() for w in windows]
    out: list[npt.NDArray[np.float32]] = []
    for s, words in enumerate(sentences):
        tag_probs = np.zeros((len(words), 3), np.float32)
        tag_probs[:, O] = 1.0  # a word with no subword (e.g. a lone control char) is O
        for j in range(len(words)):
            k = owners[s][j]
            p = firsts[k].get(j)
            if p is not None:
                tag_probs[j] = probs[k][p]
        out.append(tag_probs)
    return out


def span_features(
    windows: list[Window],
    owners: list[list[int]],
    feats: list[npt.NDArray[np.float32]],
    spans: Sequence[tuple[int, int, int]],
    first_subword_types: bool,
) -> npt.NDArray[np.float32]:
    """The pooled type features [len(spans), H] of (sentence, start, end) word spans (at
    least one): the mean of the span's type features in the window that holds it — what the
    type head classifies."""
    by_sentence: dict[int, list[int]] = {}
    for k, w in enumerate(windows):
        by_sentence.setdefault(w.sentence, []).append(k)
    in_window: dict[int, list[int]] = {}  # window -> the spans it types
    for i, (s, start, end) in enumerate(spans):
        k = window_for(windows, by_sentence[s], owners[s][start], start, end)
        in_window.setdefault(k, []).append(i)
    pooled = np.empty((len(spans), feats[0].shape[-1]), np.float64)
    for k, members in in_window.items():
        bounds = np.array([spans[i][1:] for i in members])
        pooled[members] = span_means(
            windows[k], feats[k], bounds[:, 0], bounds[:, 1], first_subword_types
        )
    return pooled.astype(np.float32)


def span_means(
    window: Window,
    feats: npt.NDArray[np.float32],
    starts: npt.NDArray[np.int64],
    ends: npt.NDArray[np.int64],
    first_subword_types: bool,
) -> npt.NDArray[np.float64]:
    """The mean type feature of each word span ``[starts[i], ends[i])`` of ``window``
    (over its first subwords when ``first_subword_types``), for all spans at once: the
    window's words are in order, so a span's subwords are a run of positions and its sum
    a difference of cumulative sums."""
    keep = window.first_subword_mask if first_subword_types else window.word_index >= 0
    positions = np.flatnonzero(keep)
    words = window.word_index[positions]
    sums = np.zeros((len(positions) + 1, feats.shape[-1]), np.float64)
    np.cumsum(feats[positions], axis=0, out=sums[1:])
    lo = np.searchsorted(words, starts, "left")
    hi = np.searchsorted(words, ends, "left")
    with np.errstate(invalid="ignore", divide="ignore"):  # no subword inside: NaN, as mean
        means: npt.NDArray[np.float64] = (sums[hi] - sums[lo]) / (hi - lo)[:, None]
        return means
