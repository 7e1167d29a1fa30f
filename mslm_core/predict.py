"""Prediction: words or raw text → typed mentions with confidences (MSLM.md §4).

One code path serves dev evaluation during training, ``mslm evaluate`` and annotation, so
they cannot disagree. It never masks its input and never sees gold labels: it receives
words or text only. The numeric work is behind a small backend interface (PyTorch here; the
inference engine adds ONNX Runtime).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Protocol

import numpy as np

from .features import B, I, O, Window, WindowBuilder
from .text import sentence_spans, word_spans


@dataclass(frozen=True, order=True)
class ScoredMention:
    """A predicted mention over words ``[start, end)`` of one sentence."""

    start: int
    end: int
    label: str
    confidence: float
    detection_score: float
    type_score: float


@dataclass(frozen=True)
class Entity:
    """A predicted entity in raw text: ``text == input[start:end]`` (code points)."""

    start: int
    end: int
    text: str
    type: str
    confidence: float
    detection_score: float
    type_score: float

    def to_dict(self) -> dict:
        return asdict(self)


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
    ):
        self.backend = backend
        self.builder = builder
        self.types = list(types)
        self.batch_size = batch_size
        self.max_batch_tokens = max_batch_tokens
        self.chunk_sentences = chunk_sentences
        self.pad_id = pad_id

    # -- raw text ---------------------------------------------------------------------------
    def annotate(self, texts: Sequence[str]) -> list[list[Entity]]:
        """Entities per text; offsets index the given Python string, end exclusive."""
        sentences: list[list[str]] = []
        where: list[tuple[int, list[tuple[int, int]]]] = []  # (text index, word char spans)
        for t, text in enumerate(texts):
            for a, b in sentence_spans(text):
                spans = [(a + x, a + y) for x, y in word_spans(text[a:b])]
                if spans:
                    sentences.append([text[x:y] for x, y in spans])
                    where.append((t, spans))
        results: list[list[Entity]] = [[] for _ in texts]
        for (t, spans), mentions in zip(where, self.predict_words(sentences), strict=True):
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
    def predict_words(self, sentences: Sequence[list[str]]) -> list[list[ScoredMention]]:
        """Mentions per sentence of pre-split words (bounded memory: chunks of sentences)."""
        out: list[list[ScoredMention]] = []
        for i in range(0, len(sentences), self.chunk_sentences):
            out.extend(self._predict_chunk(list(sentences[i : i + self.chunk_sentences])))
        return out

    def _run(self, windows: list[Window]) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Length-sorted, per-batch padded runs; outputs trimmed to each window's length."""
        probs: list[np.ndarray] = [np.empty(0)] * len(windows)
        feats: list[np.ndarray] = [np.empty(0)] * len(windows)
        order = sorted(range(len(windows)), key=lambda i: (len(windows[i]), i))
        pos = 0
        while pos < len(order):
            batch = [order[pos]]
            longest = len(windows[order[pos]])
            pos += 1
            while pos < len(order) and len(batch) < self.batch_size:
                nxt = len(windows[order[pos]])
                if nxt * (len(batch) + 1) > self.max_batch_tokens:
                    break
                batch.append(order[pos])
                longest = nxt
                pos += 1
            ids = np.full((len(batch), longest), self.pad_id, np.int64)
            mask = np.zeros((len(batch), longest), np.int64)
            for r, w in enumerate(batch):
                n = len(windows[w])
                ids[r, :n] = windows[w].input_ids
                mask[r, :n] = 1
            p, f = self.backend.features(ids, mask)
            for r, w in enumerate(batch):
                n = len(windows[w])
                probs[w], feats[w] = p[r, :n], f[r, :n]
        return probs, feats

    def _predict_chunk(self, sentences: list[list[str]]) -> list[list[ScoredMention]]:
        windows, owners = self.builder.prediction_windows(sentences)
        probs, feats = self._run(windows)
        firsts = [w.first_subword() for w in windows]
        by_sentence: dict[int, list[int]] = {}
        for k, w in enumerate(windows):
            by_sentence.setdefault(w.sentence, []).append(k)

        pending: list[tuple[int, int, int, float]] = []  # sentence, start, end, det score
        pooled: list[np.ndarray] = []
        for s, words in enumerate(sentences):
            tag_probs = np.zeros((len(words), 3), np.float32)
            tag_probs[:, O] = 1.0  # a word with no subword (e.g. a lone control char) is O
            for j in range(len(words)):
                k = owners[s][j]
                p = firsts[k].get(j)
                if p is not None:
                    tag_probs[j] = probs[k][p]
            for start, end in decode_bio(tag_probs.argmax(-1).tolist()):
                chosen = tag_probs[np.arange(start, end), tag_probs[start:end].argmax(-1)]
                det = float(np.exp(np.log(np.clip(chosen, 1e-12, 1.0)).mean()))
                k = self._window_for(windows, by_sentence[s], owners[s][start], start, end)
                inside = (windows[k].word_index >= start) & (windows[k].word_index < end)
                pooled.append(feats[k][inside].mean(0))
                pending.append((s, start, end, det))

        out: list[list[ScoredMention]] = [[] for _ in sentences]
        if pending:
            type_probs = self.backend.classify(np.stack(pooled).astype(np.float32))
            for (s, start, end, det), tp in zip(pending, type_probs, strict=True):
                c = int(tp.argmax())
                ts = float(tp[c])
                out[s].append(ScoredMention(start, end, self.types[c], det * ts, det, ts))
        return out

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


def load_predictor(bundle_dir, device: str = "cpu", batch_size: int = 64) -> Predictor:
    """A PyTorch predictor for a bundle (checksums verified on load)."""
    from .bundle import load_bundle

    bundle = load_bundle(bundle_dir, device=device)
    tok = bundle.tokenizer
    predictor = Predictor(
        TorchBackend(bundle.model, device),
        WindowBuilder(tok, int(bundle.manifest.get("max_length", 128))),
        bundle.manifest["types"],
        batch_size=batch_size,
        pad_id=tok.pad_token_id or 0,
    )
    predictor.bundle = bundle  # type: ignore[attr-defined]
    return predictor
