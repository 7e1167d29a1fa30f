"""The predictor: words or raw text → typed mentions with confidences, through a backend, in
chunks of sentences (bounded memory) and length-sorted runs of windows."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeAlias, TypeVar

import numpy as np
import numpy.typing as npt

from ..features import Packing, Window, WindowBuilder
from ..ocr import lexicon
from ..types import Entity, ScoredMention
from .backend import Backend
from .confidence import RawPredictions, span_features, temper, word_tag_probs
from .decoding import DECODINGS, decode_bio, decode_tags, trim_hyphens
from .windows import Chunk, Origin, assemble, batch_windows, sentences_of

# the outputs of one run: per window of the batch, its [T, 3] probabilities and [T, H] features
RunOutputs: TypeAlias = tuple[list[npt.NDArray[np.float32]], list[npt.NDArray[np.float32]]]
T = TypeVar("T")


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
        style: str = "",
    ):
        """``workers``: runs in flight at once (threads; the backend must be thread-safe, as
        an ONNX Runtime session is). ``decoding``: how word tags become spans (see
        :func:`~mslm_core.predict.decoding.decode_tags`). ``first_subword_types``: pool a
        mention's type features over its words' first subwords only (the linear head), not all
        its subwords (the paper's). ``style``: what the windows of a model trained on several
        corpora open with (one of ``builder.styles``; a bundle's is the first corpus's), unless
        a call gives each sentence its own."""
        if decoding not in DECODINGS:
            raise ValueError(f"decoding must be one of {', '.join(DECODINGS)}, got {decoding!r}")
        self.backend = backend
        self.decoding = decoding
        self.first_subword_types = first_subword_types
        self.pack = pack
        self.builder = builder
        if style not in builder.styles:
            raise ValueError(f"style {style!r} is not one of the builder's: {builder.styles}")
        self.style = style
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
        lexicon()  # what mends a scanner's damage (0.3-0.6 s once), loaded here, not by a call

    # -- raw text ---------------------------------------------------------------------------
    def annotate(
        self, texts: Sequence[str], styles: Sequence[str | None] | None = None
    ) -> list[list[Entity]]:
        """Entities per text; offsets index the given Python string, end exclusive.
        ``styles``: per text, the style it is read as (None: the predictor's)."""
        sentences, where = sentences_of(texts)
        groups = [t for t, *_ in where]  # a text's sentences are read together, never another's
        return assemble(
            texts, where, self.predict_words(sentences, groups, self.sentence_styles(where, styles))
        )

    def sentence_styles(
        self, where: Sequence[Origin], styles: Sequence[str | None] | None
    ) -> list[str] | None:
        """Per sentence (``where``: its text first, as :func:`sentences_of` gives it), the
        style of its text in ``styles`` (None there: the predictor's); None when no text asks
        for another."""
        if styles is None or all(s is None or s == self.style for s in styles):
            return None
        return [self.style if styles[t] is None else str(styles[t]) for t, *_ in where]

    def annotate_with_raw(
        self, texts: Sequence[str]
    ) -> tuple[list[list[Entity]], RawPredictions, list[int]]:
        """:meth:`annotate`, with the pass its entities come from and each sentence's text
        (what the uncertainties of active learning read: one pass for both)."""
        sentences, where = sentences_of(texts)
        groups = [t for t, *_ in where]
        raw = self.raw_predictions(sentences, groups=groups)
        entities = assemble(texts, where, raw.mentions(self.types, self.temperatures))
        return entities, raw, groups

    # -- words ------------------------------------------------------------------------------
    def predict_words(
        self,
        sentences: Sequence[list[str]],
        groups: Sequence[int] | None = None,
        styles: Sequence[str] | None = None,
    ) -> list[list[ScoredMention]]:
        """Mentions per sentence of pre-split words (bounded memory: chunks of sentences).

        ``groups``: per sentence, the document it belongs to; a packing model reads a
        sentence with its neighbours of the same group only. ``None``: the sentences are one
        document in order (a corpus). ``styles``: per sentence, the style it is read as (a
        corpus of a multi-corpus run; None: the predictor's)."""
        out: list[list[ScoredMention]] = []
        groups = _style_groups(groups, styles)
        for i in range(0, len(sentences), self.chunk_sentences):
            part = slice(i, i + self.chunk_sentences)
            raw = self._raw_chunk(
                list(sentences[part]), (), _part(groups, part), _part(styles, part)
            )
            out.extend(raw.mentions(self.types, self.temperatures))
        return out

    def _run_batch(self, windows: list[Window], batch: list[int]) -> RunOutputs:
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

    def _run(self, windows: list[Window]) -> RunOutputs:
        """Runs over length-sorted batches (``workers`` at a time: each run's result depends
        on its own windows only); outputs trimmed to each window's length."""
        probs: list[npt.NDArray[np.float32]] = [np.empty(0, np.float32)] * len(windows)
        feats: list[npt.NDArray[np.float32]] = [np.empty(0, np.float32)] * len(windows)
        batches = batch_windows(windows, self.batch_size, self.max_batch_tokens)
        self.run_batches(windows, batches, probs, feats)
        return probs, feats

    def run_batches(
        self,
        windows: list[Window],
        batches: list[list[int]],
        probs: list[npt.NDArray[np.float32]],
        feats: list[npt.NDArray[np.float32]],
    ) -> None:
        """Run ``batches`` (``workers`` at a time) and store each window's outputs."""
        results: Iterable[RunOutputs]
        if self.workers > 1 and len(batches) > 1:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="predict")
            results = self._pool.map(lambda b: self._run_batch(windows, b), batches)
        else:
            results = (self._run_batch(windows, b) for b in batches)
        for batch, (p, f) in zip(batches, results, strict=True):
            for r, w in enumerate(batch):
                probs[w], feats[w] = p[r], f[r]

    def tag_probabilities(
        self, sentences: Sequence[list[str]], groups: Sequence[int] | None = None
    ) -> list[npt.NDArray[np.float32]]:
        """Per sentence, the B/I/O probabilities of each word [n_words, 3] (read from the
        word's owner window) — what decoding sees; the benchmark plots them."""
        raw = self.raw_predictions(sentences, groups=groups)
        return [temper(p, self.temperatures[0]) for p in raw.word_probs]

    def raw_predictions(
        self,
        sentences: Sequence[list[str]],
        extra_spans: Sequence[Sequence[tuple[int, int]]] | None = None,
        groups: Sequence[int] | None = None,
        styles: Sequence[str] | None = None,
    ) -> RawPredictions:
        """One pass: every word's untempered tag probabilities, the decoded spans and their
        untempered type probabilities — what :meth:`RawPredictions.mentions` scores under
        any temperatures (calibration fits them without predicting again). Chunked like
        :meth:`predict_words`: only these small outputs outlive a chunk.

        ``extra_spans``: per sentence, word spans ``[start, end)`` to type as well, from the
        same pass (``extra_spans`` / ``extra_type_probs`` of the result) — calibration fits
        the type head's temperature on the gold mentions' types. ``groups``, ``styles``: as
        in :meth:`predict_words`."""
        if extra_spans is not None and len(extra_spans) != len(sentences):
            raise ValueError(
                f"extra_spans: {len(extra_spans)} lists of spans for {len(sentences)} sentences"
            )
        word_probs: list[npt.NDArray[np.float32]] = []
        spans: list[tuple[int, int, int]] = []
        type_probs: list[npt.NDArray[np.float32]] = [np.zeros((0, len(self.types)), np.float32)]
        extra: list[tuple[int, int, int]] = []
        extra_probs: list[npt.NDArray[np.float32]] = [np.zeros((0, len(self.types)), np.float32)]
        groups = _style_groups(groups, styles)
        for i in range(0, len(sentences), self.chunk_sentences):
            part = slice(i, i + self.chunk_sentences)
            chunk = list(sentences[part])
            asked = [] if extra_spans is None else extra_spans[part]
            raw = self._raw_chunk(chunk, asked, _part(groups, part), _part(styles, part))
            spans += [(len(word_probs) + s, a, b) for s, a, b in raw.spans]
            extra += [(len(word_probs) + s, a, b) for s, a, b in raw.extra_spans]
            word_probs += raw.word_probs
            type_probs.append(raw.type_probs)
            extra_probs.append(raw.extra_type_probs)
        return RawPredictions(
            word_probs,
            spans,
            np.concatenate(type_probs),
            extra,
            np.concatenate(extra_probs),
            decoding=self.decoding,
        )

    def _raw_chunk(
        self,
        sentences: list[list[str]],
        extra_spans: Sequence[Sequence[tuple[int, int]]] = (),
        groups: Sequence[int] | None = None,
        styles: Sequence[str] | None = None,
    ) -> RawPredictions:
        prepared = self.prepare_chunk(sentences, extra_spans, groups, styles)
        prepared.probs, prepared.feats = self._run(prepared.windows)
        return self.finish_chunk(prepared)

    def prepare_chunk(
        self,
        sentences: list[list[str]],
        extra_spans: Sequence[Sequence[tuple[int, int]]] = (),
        groups: Sequence[int] | None = None,
        styles: Sequence[str] | None = None,
    ) -> Chunk:
        """Subwords, packing and windows of a chunk of sentences; the backend not run yet.
        ``styles``: per sentence (None: the predictor's); a run of packed sentences is read
        as its first's (``groups`` keep two styles apart)."""
        subwords = self.builder.subwords(sentences)
        packing = (
            self.builder.packing(subwords, groups) if self.pack else Packing.single(len(sentences))
        )
        runs = packing.concat(sentences)
        run_styles = [self.style if styles is None else styles[a] for a, _ in packing.ranges]
        windows, owners = self.builder.prediction_windows(
            runs, packing.concat(subwords), run_styles
        )
        empty: list[npt.NDArray[np.float32]] = [np.empty(0, np.float32)] * len(windows)
        return Chunk(sentences, extra_spans, packing, runs, windows, owners, empty, list(empty))

    def finish_chunk(self, chunk: Chunk) -> RawPredictions:
        """Decoding and typing, once every window of the chunk has its outputs."""
        sentences, packing, windows, owners = (
            chunk.sentences,
            chunk.packing,
            chunk.windows,
            chunk.owners,
        )
        run_probs = word_tag_probs(chunk.runs, windows, owners, chunk.probs)
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

        def typed(spans: list[tuple[int, int, int]]) -> npt.NDArray[np.float32]:
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
    ) -> list[list[npt.NDArray[np.float32]]]:
        """Untempered type probabilities of given word spans ``[start, end)`` per sentence
        (gold mentions, to fit the type head's temperature)."""
        probs = iter(self.raw_predictions(sentences, spans).extra_type_probs)
        return [[next(probs) for _ in sent] for sent in spans]

    def _classify_spans(
        self,
        windows: list[Window],
        owners: list[list[int]],
        feats: list[npt.NDArray[np.float32]],
        spans: Sequence[tuple[int, int, int]],
    ) -> npt.NDArray[np.float32]:
        """Type probabilities [len(spans), C] of (sentence, start, end) word spans: the mean
        of the span's type features in the window that holds it."""
        if not spans:
            return np.zeros((0, len(self.types)), np.float32)
        pooled = span_features(windows, owners, feats, spans, self.first_subword_types)
        return self.backend.classify(pooled)


def _part(items: Sequence[T] | None, part: slice) -> Sequence[T] | None:
    return None if items is None else items[part]


def _style_groups(
    groups: Sequence[int] | None, styles: Sequence[str] | None
) -> Sequence[int] | None:
    """Groups that also keep sentences of two styles apart (packing never joins them)."""
    if styles is None:
        return groups
    ids: dict[tuple[int, str], int] = {}
    return [
        ids.setdefault((0 if groups is None else groups[i], style), len(ids))
        for i, style in enumerate(styles)
    ]
