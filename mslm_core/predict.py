"""Prediction: words or raw text → typed mentions with confidences (docs/method.md §4).

One code path serves dev evaluation during training, ``mslm evaluate`` and annotation, so
they cannot disagree. It never masks its input and never sees gold labels: it receives
words or text only. The numeric work is behind a small backend interface (PyTorch here; the
inference engine adds ONNX Runtime).
"""

from __future__ import annotations

import collections
import functools
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from .features import B, I, O, Packing, Window, WindowBuilder
from .text import sentence_spans, word_spans
from .types import Entity, ScoredMention

__all__ = [
    "AnnotationPlan",
    "Entity",
    "Predictor",
    "RawPredictions",
    "ScoredMention",
    "TorchBackend",
]


class Backend(Protocol):
    def features(
        self, input_ids: np.ndarray, attention_mask: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """[B, T] int64 → detection probabilities [B, T, 3] and type features [B, T, H]."""

    def classify(self, pooled: np.ndarray) -> np.ndarray:
        """Mean-pooled type features [N, H] → type probabilities [N, C]."""


class TorchBackend:
    """Runs an :class:`~mslm_core.model.MSLMModel` in eval mode, no gradients."""

    def __init__(self, model, device: str = "cpu"):
        self.model = model
        self.device = device

    def features(self, input_ids, attention_mask):
        import torch

        self.model.eval()
        with torch.inference_mode():
            ids = torch.from_numpy(input_ids).to(self.device)
            mask = torch.from_numpy(attention_mask).to(self.device)
            probs, feats = self.model.forward_features(ids, mask)
            return probs.float().cpu().numpy(), feats.float().cpu().numpy()

    def classify(self, pooled):
        import torch

        self.model.eval()
        with torch.inference_mode():
            x = torch.from_numpy(pooled).to(self.device)
            return self.model.classify(x).softmax(-1).float().cpu().numpy()


class Predictor:
    def __init__(
        self,
        backend: Backend,
        builder: WindowBuilder,
        types: Sequence[str],
        batch_size: int = 64,
        max_batch_tokens: int = 16384,
        chunk_sentences: int = 1024,
        pad_id: int = 0,
        workers: int = 1,
        decoding: str = "argmax",
        first_subword_types: bool = False,
        pack: bool = False,
    ):
        """``workers``: runs in flight at once (threads; the backend must be thread-safe, as
        an ONNX Runtime session is). ``decoding``: how word tags become spans (see
        :func:`decode_tags`). ``first_subword_types``: pool a mention's type features over its
        words' first subwords only (the linear head), not all its subwords (the paper's)."""
        if decoding not in DECODINGS:
            raise ValueError(f"decoding must be one of {', '.join(DECODINGS)}, got {decoding!r}")
        self.backend = backend
        self.decoding = decoding
        self.first_subword_types = first_subword_types
        self.pack = pack
        self.builder = builder
        self.types = list(types)
        self.batch_size = batch_size
        self.max_batch_tokens = max_batch_tokens
        self.chunk_sentences = chunk_sentences
        self.pad_id = pad_id
        self.workers = workers
        # (detection, type) temperatures fitted at the end of training (calibration.py);
        # they change confidences only, never which entities are found
        self.temperatures: tuple[float, float] = (1.0, 1.0)
        self._pool: ThreadPoolExecutor | None = None

    # -- raw text ---------------------------------------------------------------------------
    def annotate(self, texts: Sequence[str]) -> list[list[Entity]]:
        """Entities per text; offsets index the given Python string, end exclusive."""
        sentences, where = self._sentences_of(texts)
        groups = [t for t, _ in where]  # a text's sentences are read together, never another's
        return self._assemble(texts, where, self.predict_words(sentences, groups))

    def plan(self, texts: Sequence[str]) -> AnnotationPlan:
        """:meth:`annotate` cut into steps that a scheduler runs (see :class:`AnnotationPlan`)."""
        return AnnotationPlan(self, texts)

    @staticmethod
    def _sentences_of(
        texts: Sequence[str],
    ) -> tuple[list[list[str]], list[tuple[int, list[tuple[int, int]]]]]:
        """The words of every sentence of every text, and where each sentence came from:
        (text index, the character spans of its words)."""
        sentences: list[list[str]] = []
        where: list[tuple[int, list[tuple[int, int]]]] = []
        for t, text in enumerate(texts):
            for a, b in sentence_spans(text):
                spans = [(a + x, a + y) for x, y in word_spans(text[a:b])]
                if spans:
                    sentences.append([text[x:y] for x, y in spans])
                    where.append((t, spans))
        return sentences, where

    @staticmethod
    def _assemble(
        texts: Sequence[str],
        where: Sequence[tuple[int, list[tuple[int, int]]]],
        predicted: Sequence[list[ScoredMention]],
    ) -> list[list[Entity]]:
        """Mentions over words back to entities over each text's characters."""
        results: list[list[Entity]] = [[] for _ in texts]
        for (t, spans), mentions in zip(where, predicted, strict=True):
            text = texts[t]
            for m in mentions:
                start, end = spans[m.start][0], spans[m.end - 1][1]
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

    # -- words ------------------------------------------------------------------------------
    def predict_words(
        self, sentences: Sequence[list[str]], groups: Sequence[int] | None = None
    ) -> list[list[ScoredMention]]:
        """Mentions per sentence of pre-split words (bounded memory: chunks of sentences).

        ``groups``: per sentence, the document it belongs to; a packing model reads a
        sentence with its neighbours of the same group only. ``None``: the sentences are one
        document in order (a corpus)."""
        out: list[list[ScoredMention]] = []
        for i in range(0, len(sentences), self.chunk_sentences):
            part = slice(i, i + self.chunk_sentences)
            raw = self._raw_chunk(list(sentences[part]), (), _part(groups, part))
            out.extend(raw.mentions(self.types, self.temperatures))
        return out

    def _batches(self, windows: list[Window]) -> list[list[int]]:
        """Window indices per run: sorted by length, at most ``batch_size`` windows and
        ``max_batch_tokens`` padded positions each."""
        order = sorted(range(len(windows)), key=lambda i: (len(windows[i]), i))
        batches: list[list[int]] = []
        pos = 0
        while pos < len(order):
            batch = [order[pos]]
            pos += 1
            while pos < len(order) and len(batch) < self.batch_size:
                if len(windows[order[pos]]) * (len(batch) + 1) > self.max_batch_tokens:
                    break
                batch.append(order[pos])
                pos += 1
            batches.append(batch)
        return batches

    def _run_batch(
        self, windows: list[Window], batch: list[int]
    ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        longest = max(len(windows[w]) for w in batch)  # padded per batch only
        ids = np.full((len(batch), longest), self.pad_id, np.int64)
        mask = np.zeros((len(batch), longest), np.int64)
        for r, w in enumerate(batch):
            n = len(windows[w])
            ids[r, :n] = windows[w].input_ids
            mask[r, :n] = 1
        p, f = self.backend.features(ids, mask)
        lengths = [len(windows[w]) for w in batch]
        return [p[r, :n] for r, n in enumerate(lengths)], [f[r, :n] for r, n in enumerate(lengths)]

    def _run(self, windows: list[Window]) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Runs over length-sorted batches (``workers`` at a time: each run's result depends
        on its own windows only); outputs trimmed to each window's length."""
        probs: list[np.ndarray] = [np.empty(0)] * len(windows)
        feats: list[np.ndarray] = [np.empty(0)] * len(windows)
        self._run_batches(windows, self._batches(windows), probs, feats)
        return probs, feats

    def _run_batches(
        self,
        windows: list[Window],
        batches: list[list[int]],
        probs: list[np.ndarray],
        feats: list[np.ndarray],
    ) -> None:
        """Run ``batches`` (``workers`` at a time) and store each window's outputs."""
        if self.workers > 1 and len(batches) > 1:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="predict")
            results: Any = self._pool.map(lambda b: self._run_batch(windows, b), batches)
        else:
            results = (self._run_batch(windows, b) for b in batches)
        for batch, (p, f) in zip(batches, results, strict=True):
            for r, w in enumerate(batch):
                probs[w], feats[w] = p[r], f[r]

    def tag_probabilities(
        self, sentences: Sequence[list[str]], groups: Sequence[int] | None = None
    ) -> list[np.ndarray]:
        """Per sentence, the B/I/O probabilities of each word [n_words, 3] (read from the
        word's owner window) — what decoding sees; the benchmark plots them."""
        raw = self.raw_predictions(sentences, groups=groups)
        return [temper(p, self.temperatures[0]) for p in raw.word_probs]

    def raw_predictions(
        self,
        sentences: Sequence[list[str]],
        extra_spans: Sequence[Sequence[tuple[int, int]]] | None = None,
        groups: Sequence[int] | None = None,
    ) -> RawPredictions:
        """One pass: every word's untempered tag probabilities, the decoded spans and their
        untempered type probabilities — what :meth:`RawPredictions.mentions` scores under
        any temperatures (calibration fits them without predicting again). Chunked like
        :meth:`predict_words`: only these small outputs outlive a chunk.

        ``extra_spans``: per sentence, word spans ``[start, end)`` to type as well, from the
        same pass (``extra_spans`` / ``extra_type_probs`` of the result) — calibration fits
        the type head's temperature on the gold mentions' types. ``groups``: as in
        :meth:`predict_words`."""
        if extra_spans is not None and len(extra_spans) != len(sentences):
            raise ValueError(
                f"extra_spans: {len(extra_spans)} lists of spans for {len(sentences)} sentences"
            )
        word_probs: list[np.ndarray] = []
        spans: list[tuple[int, int, int]] = []
        type_probs = [np.zeros((0, len(self.types)), np.float32)]
        extra: list[tuple[int, int, int]] = []
        extra_probs = [np.zeros((0, len(self.types)), np.float32)]
        for i in range(0, len(sentences), self.chunk_sentences):
            part = slice(i, i + self.chunk_sentences)
            chunk = list(sentences[part])
            asked = [] if extra_spans is None else extra_spans[part]
            raw = self._raw_chunk(chunk, asked, _part(groups, part))
            spans += [(len(word_probs) + s, a, b) for s, a, b in raw.spans]
            extra += [(len(word_probs) + s, a, b) for s, a, b in raw.extra_spans]
            word_probs += raw.word_probs
            type_probs.append(raw.type_probs)
            extra_probs.append(raw.extra_type_probs)
        return RawPredictions(
            word_probs, spans, np.concatenate(type_probs), extra, np.concatenate(extra_probs)
        )

    def _raw_chunk(
        self,
        sentences: list[list[str]],
        extra_spans: Sequence[Sequence[tuple[int, int]]] = (),
        groups: Sequence[int] | None = None,
    ) -> RawPredictions:
        prepared = self._prepare_chunk(sentences, extra_spans, groups)
        prepared.probs, prepared.feats = self._run(prepared.windows)
        return self._finish_chunk(prepared)

    def _prepare_chunk(
        self,
        sentences: list[list[str]],
        extra_spans: Sequence[Sequence[tuple[int, int]]] = (),
        groups: Sequence[int] | None = None,
    ) -> _Chunk:
        """Subwords, packing and windows of a chunk of sentences; the backend not run yet."""
        subwords = self.builder.subwords(sentences)
        packing = (
            self.builder.packing(subwords, groups) if self.pack else Packing.single(len(sentences))
        )
        runs = packing.concat(sentences)
        windows, owners = self.builder.prediction_windows(runs, packing.concat(subwords))
        empty = [np.empty(0)] * len(windows)
        return _Chunk(sentences, extra_spans, packing, runs, windows, owners, empty, list(empty))

    def _finish_chunk(self, chunk: _Chunk) -> RawPredictions:
        """Decoding and typing, once every window of the chunk has its outputs."""
        sentences, packing, windows, owners = (
            chunk.sentences,
            chunk.packing,
            chunk.windows,
            chunk.owners,
        )
        run_probs = _word_tag_probs(chunk.runs, windows, owners, chunk.probs)
        word_probs = [
            run_probs[r][k : k + len(words)]
            for words, r, k in zip(sentences, packing.run_of, packing.offsets, strict=True)
        ]
        spans = [
            (s, start, end)
            for s, (words, tag_probs) in enumerate(zip(sentences, word_probs, strict=True))
            for start, end in trim_hyphens(words, decode_bio(decode_tags(tag_probs, self.decoding)))
        ]
        extra = [(s, a, b) for s, sent in enumerate(chunk.extra_spans) for a, b in sent]

        def typed(spans: list[tuple[int, int, int]]) -> np.ndarray:
            in_runs = [
                (packing.run_of[s], packing.offsets[s] + a, packing.offsets[s] + b)
                for s, a, b in spans
            ]
            return self._classify_spans(windows, owners, chunk.feats, in_runs)

        return RawPredictions(
            word_probs, spans, typed(spans), extra, typed(extra), decoding=self.decoding
        )

    def span_type_probabilities(
        self, sentences: Sequence[list[str]], spans: Sequence[Sequence[tuple[int, int]]]
    ) -> list[list[np.ndarray]]:
        """Untempered type probabilities of given word spans ``[start, end)`` per sentence
        (gold mentions, to fit the type head's temperature)."""
        probs = iter(self.raw_predictions(sentences, spans).extra_type_probs)
        return [[next(probs) for _ in sent] for sent in spans]

    def _classify_spans(
        self,
        windows: list[Window],
        owners: list[list[int]],
        feats: list[np.ndarray],
        spans: Sequence[tuple[int, int, int]],
    ) -> np.ndarray:
        """Type probabilities [len(spans), C] of (sentence, start, end) word spans: the mean
        of the span's type features in the window that holds it."""
        if not spans:
            return np.zeros((0, len(self.types)), np.float32)
        by_sentence: dict[int, list[int]] = {}
        for k, w in enumerate(windows):
            by_sentence.setdefault(w.sentence, []).append(k)
        in_window: dict[int, list[int]] = {}  # window -> the spans it types
        for i, (s, start, end) in enumerate(spans):
            k = self._window_for(windows, by_sentence[s], owners[s][start], start, end)
            in_window.setdefault(k, []).append(i)
        pooled = np.empty((len(spans), feats[0].shape[-1]), np.float64)
        for k, members in in_window.items():
            bounds = np.array([spans[i][1:] for i in members])
            pooled[members] = self._span_means(windows[k], feats[k], bounds[:, 0], bounds[:, 1])
        return self.backend.classify(pooled.astype(np.float32))

    def _span_means(
        self, window: Window, feats: np.ndarray, starts: np.ndarray, ends: np.ndarray
    ) -> np.ndarray:
        """The mean type feature of each word span ``[starts[i], ends[i])`` of ``window``
        (over its first subwords when ``first_subword_types``), for all spans at once: the
        window's words are in order, so a span's subwords are a run of positions and its sum
        a difference of cumulative sums."""
        keep = window.first_subword_mask if self.first_subword_types else window.word_index >= 0
        positions = np.flatnonzero(keep)
        words = window.word_index[positions]
        sums = np.zeros((len(positions) + 1, feats.shape[-1]), np.float64)
        np.cumsum(feats[positions], axis=0, out=sums[1:])
        lo = np.searchsorted(words, starts, "left")
        hi = np.searchsorted(words, ends, "left")
        with np.errstate(invalid="ignore", divide="ignore"):  # no subword inside: NaN, as mean
            return (sums[hi] - sums[lo]) / (hi - lo)[:, None]

    @staticmethod
    def _window_for(
        windows: list[Window], candidates: list[int], owner: int, start: int, end: int
    ) -> int:
        """The window that types a mention: its first word's owner when that window holds
        the whole mention, else the first window that does, else the owner (partial)."""

        def holds(k: int) -> bool:
            return windows[k].word_start <= start and end <= windows[k].word_end

        if holds(owner):
            return owner
        return next((k for k in candidates if holds(k)), owner)


@dataclass
class _Chunk:
    """A chunk of sentences prepared for the backend; ``probs``/``feats`` fill in per window."""

    sentences: list[list[str]]
    extra_spans: Sequence[Sequence[tuple[int, int]]]
    packing: Packing
    runs: list[list[str]]
    windows: list[Window]
    owners: list[list[int]]
    probs: list[np.ndarray]
    feats: list[np.ndarray]


@dataclass
class _Issuing:
    """A prepared chunk whose batches a plan hands out: ``left`` have not ended yet."""

    index: int
    chunk: _Chunk
    pending: collections.deque[list[int]]
    left: int


class AnnotationPlan:
    """:meth:`Predictor.annotate` cut into steps, for a scheduler that serves several requests
    with one engine (issue 18, item 5): a step prepares the next chunk of sentences, or runs
    one batch of windows through the backend. Interleaving the steps of several plans, a long
    text holds the engine for one batch at a time, never for its whole length; a plan whose
    client left is simply not stepped any more. The result equals ``annotate``'s.

    The first chunk is prepared when the plan is made (a short request is then one step).
    ``next_step()`` returns the next piece of work — a callable to run in a worker thread:
    prepare the next chunk, or run up to ``STEP_WINDOWS`` windows — or None when none can
    start now (a chunk is being prepared, or its last batches are still running) or none is
    left; ``done`` turns True once every chunk is decoded, ``take_result()`` tells one caller
    to build it, and ``result()`` gives the entities. Several steps of one plan may run at once
    (thread-safe); each chunk is decoded, and its windows' outputs dropped, as soon as its
    last batch ends."""

    def __init__(
        self,
        predictor: Predictor,
        texts: Sequence[str],
        after: Callable[[list[str], list[list[Entity]]], list[list[Entity]]] | None = None,
    ):
        """``after``: applied to (texts, entities) by :meth:`result` (the ConText step)."""
        self.predictor = predictor
        self.after = after
        self.texts = list(texts)
        self._sentences, self._where = predictor._sentences_of(self.texts)
        self._slices = self._chunks(predictor, self._sentences)
        self._groups = [t for t, _ in self._where]
        self._mentions: list[list[list[ScoredMention]]] = [[] for _ in self._slices]
        self._lock = threading.Lock()
        self._next = 0  # the next chunk to prepare
        self._preparing = False
        self._current: _Issuing | None = None  # the chunk whose batches are handed out
        self._finished = 0  # chunks decoded
        self._result_taken = False
        self.steps_run = 0  # batches of windows run
        if self._slices:  # the first chunk now: a short text then needs a single step
            self._next, self._preparing = 1, True
            self._prepare(0)

    # words per chunk: preparing a chunk is one step, so it is kept short (~0.05 s)
    CHUNK_WORDS = 8192
    # windows per step: enough that scheduling costs little beside the runs (one window is a
    # run for int8 on CPU), few enough that a turn is short (~50 ms on 2 cores)
    STEP_WINDOWS = 16

    @classmethod
    def _chunks(cls, predictor: Predictor, sentences: list[list[str]]) -> list[slice]:
        """Slices of sentences, prepared one at a time: ``annotate``'s chunks for a packing
        model (a sentence is read with its neighbours in the chunk, so the chunks must be
        the same), else also at most ``CHUNK_WORDS`` words each (sentences are read alone
        then, and any cut gives the same entities)."""
        size = predictor.chunk_sentences
        if predictor.pack:
            return [slice(i, i + size) for i in range(0, len(sentences), size)]
        out, start, words = [], 0, 0
        for i, sentence in enumerate(sentences):
            if i > start and (i - start >= size or words + len(sentence) > cls.CHUNK_WORDS):
                out.append(slice(start, i))
                start, words = i, 0
            words += len(sentence)
        if start < len(sentences):
            out.append(slice(start, len(sentences)))
        return out

    @property
    def done(self) -> bool:
        return self._finished == len(self._slices)

    def next_step(self) -> Callable[[], None] | None:
        with self._lock:
            current = self._current
            if current is not None and current.pending:
                batches, windows = [], 0
                while current.pending and windows < self.STEP_WINDOWS:
                    batches.append(current.pending.popleft())
                    windows += len(batches[-1])
                return functools.partial(self._run, current, batches)
            if self._preparing or self._next >= len(self._slices):
                return None
            k, self._next, self._preparing = self._next, self._next + 1, True
            return functools.partial(self._prepare, k)

    def _prepare(self, k: int) -> None:
        part = self._slices[k]
        chunk = self.predictor._prepare_chunk(self._sentences[part], (), self._groups[part])
        batches = self.predictor._batches(chunk.windows)
        with self._lock:
            self._current = _Issuing(k, chunk, collections.deque(batches), len(batches))
            self._preparing = False
        if not batches:
            self._finish(chunk, k)

    def _run(self, issuing: _Issuing, batches: list[list[int]]) -> None:
        chunk = issuing.chunk
        self.predictor._run_batches(chunk.windows, batches, chunk.probs, chunk.feats)
        with self._lock:
            self.steps_run += len(batches)
            issuing.left -= len(batches)
            last = issuing.left == 0
        if last:
            self._finish(chunk, issuing.index)

    def _finish(self, chunk: _Chunk, k: int) -> None:
        p = self.predictor
        mentions = p._finish_chunk(chunk).mentions(p.types, p.temperatures)
        with self._lock:
            self._mentions[k] = mentions
            self._finished += 1

    def take_result(self) -> bool:
        """True once — to the first caller after the plan is done (several steps may end
        together; one of them builds the result)."""
        with self._lock:
            if self._finished < len(self._slices) or self._result_taken:
                return False
            self._result_taken = True
            return True

    def result(self) -> list[list[Entity]]:
        if not self.done:
            raise RuntimeError("the plan has steps left")
        mentions = [m for chunk in self._mentions for m in chunk]
        entities = self.predictor._assemble(self.texts, self._where, mentions)
        return entities if self.after is None else self.after(self.texts, entities)


@dataclass
class RawPredictions:
    """Untempered outputs of one prediction pass over sentences."""

    word_probs: list[np.ndarray]  # per sentence [n_words, 3] (B, I, O)
    spans: list[tuple[int, int, int]]  # decoded (sentence, start, end), in sentence order
    type_probs: np.ndarray  # [len(spans), C]
    # spans the caller asked to have typed as well (sentence, start, end), and their types
    extra_spans: list[tuple[int, int, int]] = field(default_factory=list)
    extra_type_probs: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
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


def _part(groups: Sequence[int] | None, part: slice) -> Sequence[int] | None:
    return None if groups is None else groups[part]


def temper(probs: np.ndarray, temperature: float) -> np.ndarray:
    """``softmax(log p / T)`` over the last axis — the same as dividing the logits by ``T``,
    so every backend's probabilities can be tempered after the fact (``T = 1``: unchanged)."""
    if temperature == 1.0 or probs.size == 0:
        return probs
    logits = np.log(np.clip(probs, 1e-12, 1.0)) / temperature
    logits -= logits.max(-1, keepdims=True)
    out = np.exp(logits)
    return (out / out.sum(-1, keepdims=True)).astype(probs.dtype)


def _word_tag_probs(
    sentences: list[list[str]],
    windows: list[Window],
    owners: list[list[int]],
    probs: list[np.ndarray],
) -> list[np.ndarray]:
    """Per sentence [n_words, 3]: each word's tag probabilities at its first subword in its
    owner window."""
    firsts = [w.first_subword() for w in windows]
    out = []
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


DECODINGS = ("viterbi", "argmax")


def decode_tags(probs: np.ndarray, decoding: str) -> list[int]:
    """Word tag probabilities [n, 3] (B, I, O) → a tag id per word.

    ``argmax``: each word's most probable tag. ``viterbi``: the most probable sequence in
    which an I never follows O nor opens the sentence (so every mention starts with B). A
    temperature changes neither: it scales every log-probability alike and adds a per-word
    constant, which moves no path's rank."""
    if decoding == "argmax" or len(probs) == 0:
        return probs.argmax(-1).tolist()
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
