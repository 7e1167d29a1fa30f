"""Active learning: which unlabelled notes an annotator should label next.

A note's *uncertainty* is read from one prediction pass of the served model, over the
decisions it makes: each word's tag (B, I or O) and each found span's type, with the
calibrated temperatures applied (``Predictor.temperatures``), so that a score of 0.3 means
the same thing from one model to the next:

- ``least_confidence``: 1 − the geometric mean of the chosen probabilities over all decisions
  (the length-normalised sequence confidence, "MNLP" of Shen et al., 2018: a long note is not
  more uncertain merely for being long);
- ``margin``: 1 − the smallest gap between the best and the second-best choice of any
  decision (the one closest call decides; Scheffer et al., 2001);
- ``entropy``: the mean entropy of the decisions, each divided by the log of its number of
  choices (so tag and type decisions weigh alike; Settles & Craven, 2008, normalised).

:func:`rank` orders notes by uncertainty with *diversity*: maximal marginal relevance
(Carbonell & Goldstein, 1998) over TF-IDF vectors of words, so that ten near-identical notes
are not all put first — each pick's priority is ``(1 − diversity) × uncertainty − diversity ×
(its highest cosine similarity to a note already picked)``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .predict.confidence import temper
from .predict.windows import sentences_of

if TYPE_CHECKING:
    from .predict import Predictor
    from .predict.confidence import RawPredictions

STRATEGIES = ("least_confidence", "margin", "entropy")
#: a word, for the TF-IDF vectors of diversity (any run of letters or digits, one letter too)
WORD = r"(?u)\w+"
#: what the pool simulation also compares: notes in random order
BASELINE = "random"


@dataclass(frozen=True)
class Suggestion:
    """One note in the suggested order: its index in the given notes, its priority after
    diversity, its uncertainty, and the already ranked note it is most like (``None``: the
    first, or diversity off)."""

    index: int
    score: float
    uncertainty: float
    similar_to: int | None = None


def check_strategy(strategy: str) -> None:
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")


def uncertainties(predictor: Predictor, texts: Sequence[str], strategy: str) -> list[float]:
    """Each text's uncertainty in [0, 1] under ``strategy`` (see the module's docstring); a
    text with no word is 0."""
    check_strategy(strategy)
    sentences, where = sentences_of(texts)
    groups = [t for t, *_ in where]
    return _per_text(predictor, sentences, groups, len(texts), strategy)


def raw_uncertainties(
    raw: RawPredictions,
    groups: Sequence[int],
    n_texts: int,
    strategy: str,
    temperatures: tuple[float, float],
) -> list[float]:
    """:func:`uncertainties` from a prediction pass already made (``groups``: each
    sentence's text): what annotates and ranks with one pass reads."""
    check_strategy(strategy)
    t_det, t_type = temperatures
    decisions: list[list[npt.NDArray[np.float32]]] = [[] for _ in range(n_texts)]
    for s, probs in enumerate(raw.word_probs):
        if len(probs):
            decisions[groups[s]].append(temper(probs, t_det))
    if raw.spans and raw.type_probs.shape[-1] > 1:  # one type: no type decision to doubt
        typed = temper(raw.type_probs, t_type)
        for (s, _, _), row in zip(raw.spans, typed, strict=True):
            decisions[groups[s]].append(row[None, :])
    return [_score(rows, strategy) for rows in decisions]


def sentence_uncertainties(
    predictor: Predictor, sentences: Sequence[list[str]], strategy: str
) -> list[float]:
    """:func:`uncertainties` of pre-split sentences, each its own note (the pool simulation)."""
    check_strategy(strategy)
    return _per_text(predictor, sentences, list(range(len(sentences))), len(sentences), strategy)


def _per_text(
    predictor: Predictor,
    sentences: Sequence[list[str]],
    groups: list[int],
    n_texts: int,
    strategy: str,
) -> list[float]:
    raw = predictor.raw_predictions(sentences, groups=groups if predictor.pack else None)
    return raw_uncertainties(raw, groups, n_texts, strategy, predictor.temperatures)


def _score(rows: list[npt.NDArray[np.float32]], strategy: str) -> float:
    """The uncertainty of one note from its decisions, grouped by their number of choices."""
    if not rows:
        return 0.0
    by_width: dict[int, list[npt.NDArray[np.float32]]] = {}
    for r in rows:
        by_width.setdefault(r.shape[-1], []).append(r)
    mats = [np.concatenate(group).astype(np.float64) for group in by_width.values()]
    n = sum(len(m) for m in mats)
    if strategy == "least_confidence":
        logs = sum(float(np.log(np.clip(m.max(-1), 1e-12, 1.0)).sum()) for m in mats)
        return float(1.0 - np.exp(logs / n))
    if strategy == "margin":
        gaps = []
        for m in mats:
            top2 = np.sort(m, axis=-1)[:, -2:]
            gaps.append(float((top2[:, 1] - top2[:, 0]).min()))
        return float(np.clip(1.0 - min(gaps), 0.0, 1.0))
    total = 0.0
    for m in mats:
        p = np.clip(m, 1e-12, 1.0)
        total += float((-(p * np.log(p)).sum(-1) / np.log(m.shape[-1])).sum())
    return float(np.clip(total / n, 0.0, 1.0))


class Similarities:
    """Cosine similarities of the texts' TF-IDF vectors (words and word pairs, lower-cased; a
    text with no word is like none), a row at a time: ranking needs the rows of the texts it
    picks only (an n × n matrix of 10,000 documents would take 3 GB)."""

    def __init__(self, texts: Sequence[str]):
        from sklearn.feature_extraction.text import TfidfVectorizer

        self.n = len(texts)
        self.vectors: Any = None
        if self.n < 2:
            return
        vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, token_pattern=WORD)
        try:
            self.vectors = vectorizer.fit_transform(texts).tocsr()  # rows L2-normalised
        except ValueError:  # no text has a word
            self.vectors = None

    def row(self, i: int) -> npt.NDArray[np.float64]:
        """Text ``i``'s similarity to every text (0 to itself)."""
        if self.vectors is None:
            return np.zeros(self.n)
        out: npt.NDArray[np.float64] = (
            (self.vectors @ self.vectors[i].T).toarray().ravel().astype(np.float64)
        )
        out[i] = 0.0
        return out


def rank(
    texts: Sequence[str],
    scores: Sequence[float],
    limit: int | None = None,
    diversity: float = 0.5,
) -> list[Suggestion]:
    """The texts in the order to label them (at most ``limit``): greedy maximal marginal
    relevance of their uncertainties ``scores`` and their TF-IDF dissimilarity to the texts
    picked before. ``diversity`` 0: by uncertainty alone; 1: by dissimilarity alone. Ties go
    to the earlier text, so the order is deterministic."""
    if len(texts) != len(scores):
        raise ValueError(f"{len(scores)} scores for {len(texts)} texts")
    if not 0.0 <= diversity <= 1.0:
        raise ValueError(f"diversity must be in [0, 1], got {diversity}")
    n = len(texts)
    wanted = n if limit is None else max(0, min(limit, n))
    u = np.asarray(scores, np.float64)
    if diversity == 0.0:
        order = sorted(range(n), key=lambda i: (-u[i], i))[:wanted]
        return [Suggestion(i, float(u[i]), float(u[i])) for i in order]
    sims = Similarities(texts)
    closest: npt.NDArray[np.float64] = np.zeros(n)  # highest similarity to a picked text
    nearest: npt.NDArray[np.int64] = np.full(n, -1, np.int64)
    left = np.ones(n, bool)
    out: list[Suggestion] = []
    for _ in range(wanted):
        priority = np.where(left, (1 - diversity) * u - diversity * closest, -np.inf)
        i = int(np.argmax(priority))  # the first of equals
        out.append(
            Suggestion(
                i, float(priority[i]), float(u[i]), int(nearest[i]) if nearest[i] >= 0 else None
            )
        )
        left[i] = False
        row = sims.row(i)
        closer = row > closest
        closest = np.where(closer, row, closest)
        nearest = np.where(closer, i, nearest)
    return out


def random_order(n: int, seed: int) -> list[int]:
    """The baseline: the pool in a random order (seeded)."""
    order = list(range(n))
    # bandit's B311 is about secrets; this is the order of a simulation
    random.Random(seed).shuffle(order)  # nosec B311
    return order
