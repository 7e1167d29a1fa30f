"""Windowing for prediction: raw text into sentences of words and back to character offsets,
a chunk of sentences and its model windows (built by :class:`~mslm_core.features.WindowBuilder`),
the windows grouped into runs of the backend, and the window that types a mention."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from ..features import Packing, Window
from ..ocr import mended
from ..text import sentence_spans, word_spans
from ..types import Entity, ScoredMention


class Origin(NamedTuple):
    """Where a sentence came from: its text's index, the character spans of its words, and how
    many of them lead it as context only (a list item's header): a mention within those is
    not the sentence's."""

    text: int
    spans: list[tuple[int, int]]
    context: int = 0


def sentences_of(texts: Sequence[str]) -> tuple[list[list[str]], list[Origin]]:
    """The words of every sentence of every text, and where each sentence came from:
    (text index, the character spans of its words). A list item is read with its header: the
    lines under a short line that ends with a colon ("MEDICATIONS:", "Allergies:") open with
    the header's words (their spans the header's own, so that an entity found on them is one
    on a header, which the layout drops), until a blank line. A word a scanner damaged is read
    mended (``mslm_core.ocr``: ``c0ugh`` as ``cough``); its span stays the note's."""
    sentences: list[list[str]] = []
    where: list[Origin] = []
    for t, text in enumerate(texts):
        header: list[tuple[int, int]] = []
        last_end = 0
        for a, b in sentence_spans(text):
            spans = [(a + x, a + y) for x, y in word_spans(text[a:b])]
            if not spans:
                continue
            if text.count("\n", last_end, a) >= 2:
                header = []  # a blank line ends a header's list
            last_end = b
            if _is_header(text, a, b, spans):
                header = spans
                sentences.append([mended(text[x:y]) for x, y in spans])
                where.append(Origin(t, spans))
                continue
            starts_line = not text[text.rfind("\n", 0, a) + 1 : a].strip()
            context = header if header and starts_line else []
            spans = context + spans
            sentences.append([mended(text[x:y]) for x, y in spans])
            where.append(Origin(t, spans, len(context)))
    return sentences, where


def _is_header(text: str, a: int, b: int, spans: list[tuple[int, int]]) -> bool:
    """A line of its own, at most 5 words, ending with a colon."""
    line_start = text.rfind("\n", 0, a) + 1
    line_end = text.find("\n", b)
    line = text[line_start : len(text) if line_end == -1 else line_end].strip()
    return line.endswith(":") and len(spans) <= 6 and text[a:b].strip() == line


def assemble(
    texts: Sequence[str],
    where: Sequence[Origin],
    predicted: Sequence[list[ScoredMention]],
) -> list[list[Entity]]:
    """Mentions over words back to entities over each text's characters."""
    results: list[list[Entity]] = [[] for _ in texts]
    for (t, spans, context), mentions in zip(where, predicted, strict=True):
        text = texts[t]
        for m in mentions:
            if m.end <= context:  # on the words read as context only
                continue
            start, end = spans[max(m.start, context)][0], spans[m.end - 1][1]
            results[t].append(
                Entity(
                    start,
                    end,
                    text[start:end],
                    m.label,
                    m.confidence,
                    m.detection_score,
                    m.type_score,
                )
            )
    return results


@dataclass
class Chunk:
    """A chunk of sentences prepared for the backend; ``probs``/``feats`` fill in per window."""

    sentences: list[list[str]]
    extra_spans: Sequence[Sequence[tuple[int, int]]]
    packing: Packing
    runs: list[list[str]]
    windows: list[Window]
    owners: list[list[int]]
    probs: list[npt.NDArray[np.float32]]
    feats: list[npt.NDArray[np.float32]]


def batch_windows(windows: list[Window], batch_size: int, max_batch_tokens: int) -> list[list[int]]:
    """Window indices per run: sorted by length, at most ``batch_size`` windows and
    ``max_batch_tokens`` padded positions each."""
    order = sorted(range(len(windows)), key=lambda i: (len(windows[i]), i))
    batches: list[list[int]] = []
    pos = 0
    while pos < len(order):
        batch = [order[pos]]
        pos += 1
        while pos < len(order) and len(batch) < batch_size:
            if len(windows[order[pos]]) * (len(batch) + 1) > max_batch_tokens:
                break
            batch.append(order[pos])
            pos += 1
        batches.append(batch)
    return batches


def window_for(
    windows: list[Window], candidates: list[int], owner: int, start: int, end: int
) -> int:
    """The window that types a mention: its first word's owner when that window holds
    the whole mention, else the first window that does, else the owner (partial)."""

    def holds(k: int) -> bool:
        return windows[k].word_start <= start and end <= windows[k].word_end

    if holds(owner):
        return owner
    return next((k for k in candidates if holds(k)), owner)
