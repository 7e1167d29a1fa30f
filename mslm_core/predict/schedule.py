"""The serving scheduler's unit of work: a batch of texts cut into steps (prepare a chunk of
sentences, run a few windows through the backend) that the API's ``MicroBatcher`` interleaves
with other requests' steps."""

from __future__ import annotations

import collections
import functools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..types import Entity, ScoredMention
from .predictor import Predictor
from .windows import Chunk, assemble, batch_windows, sentences_of


@dataclass
class _Issuing:
    """A prepared chunk whose batches a plan hands out: ``left`` have not ended yet."""

    index: int
    chunk: Chunk
    pending: collections.deque[list[int]]
    left: int


class AnnotationPlan:
    """:meth:`Predictor.annotate` cut into steps, for a scheduler that serves several requests
    with one engine: a step prepares the next chunk of sentences, or runs
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
        styles: Sequence[str | None] | None = None,
    ):
        """``after``: applied to (texts, entities) by :meth:`result` (the pipeline's
        postprocessing).
        ``styles``: per text, the style it is read as (None: the predictor's)."""
        self.predictor = predictor
        self.after = after
        self.texts = list(texts)
        self._sentences, self._where = sentences_of(self.texts)
        self._slices = self._chunks(predictor, self._sentences)
        self._groups = [t for t, *_ in self._where]
        self._styles = predictor.sentence_styles(self._where, styles)
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
        out: list[slice] = []
        start, words = 0, 0
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
                batches: list[list[int]] = []
                windows = 0
                while current.pending and windows < self.STEP_WINDOWS:
                    batches.append(current.pending.popleft())
                    windows += len(batches[-1])
                return functools.partial(self._run, current, batches)
            if self._preparing or self._next >= len(self._slices):
                return None
            k, self._next, self._preparing = self._next, self._next + 1, True
            return functools.partial(self._prepare, k)

    def _prepare(self, k: int) -> None:
        p = self.predictor
        part = self._slices[k]
        styles = None if self._styles is None else self._styles[part]
        chunk = p.prepare_chunk(self._sentences[part], (), self._groups[part], styles)
        batches = batch_windows(chunk.windows, p.batch_size, p.max_batch_tokens)
        with self._lock:
            self._current = _Issuing(k, chunk, collections.deque(batches), len(batches))
            self._preparing = False
        if not batches:
            self._finish(chunk, k)

    def _run(self, issuing: _Issuing, batches: list[list[int]]) -> None:
        chunk = issuing.chunk
        self.predictor.run_batches(chunk.windows, batches, chunk.probs, chunk.feats)
        with self._lock:
            self.steps_run += len(batches)
            issuing.left -= len(batches)
            last = issuing.left == 0
        if last:
            self._finish(chunk, issuing.index)

    def _finish(self, chunk: Chunk, k: int) -> None:
        p = self.predictor
        mentions = p.finish_chunk(chunk).mentions(p.types, p.temperatures)
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
        entities = assemble(self.texts, self._where, mentions)
        return entities if self.after is None else self.after(self.texts, entities)
