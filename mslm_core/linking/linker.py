"""Concept linking: candidate concepts for an entity's text by character n-gram TF-IDF nearest
neighbours over the vocabulary's names, an exact (normalised) name first, abbreviations defined
in the text expanded, and a threshold below which no concept is given. No torch: it runs in the
API image."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol
from urllib.parse import quote

import numpy as np
import numpy.typing as npt
from scipy import sparse

from ..types import Entity, LinkedConcept
from .abbreviations import abbreviations
from .vocabulary import Vocabulary

if TYPE_CHECKING:
    from sklearn.feature_extraction.text import TfidfVectorizer

#: Bumped whenever what LinkerIndex.save writes, or how it is built, changes.
INDEX_VERSION = 1

#: TF-IDF candidates a re-rank looks at (the linker returns its k of them).
POOL = 20


class Reranker(Protocol):
    """Re-scores candidate concepts (:class:`~mslm_core.linking.rerank.Reranker`)."""

    encoder: str

    def scores(
        self, queries: list[str], pools: list[list[tuple[int, float]]]
    ) -> list[list[tuple[int, float]]]: ...


#: A candidate concept (the type entities carry).
Candidate = LinkedConcept

_NOT_WORD = re.compile(r"[^0-9a-z]+")


def normalise(text: str) -> str:
    """Lower case, every run of other characters than letters and digits one space."""
    return _NOT_WORD.sub(" ", text.lower()).strip()


class Linker:
    """Links entity texts to the concepts of ``vocabulary``. ``threshold``: the lowest score a
    top candidate needs to be given as the concept; ``k``: candidates returned."""

    def __init__(
        self,
        vocabulary: Vocabulary,
        threshold: float = 0.5,
        k: int = 5,
        ngrams: tuple[int, int] = (2, 4),
        url_pattern: str | dict[str, str] = "",
        max_df: float = 0.02,
        index: LinkerIndex | None = None,
        reranker: Reranker | None = None,
    ):
        self.vocabulary, self.threshold, self.k = vocabulary, threshold, k
        self.url_patterns = _url_patterns(url_pattern)
        self.index = index if index is not None else LinkerIndex.build(vocabulary, ngrams, max_df)
        self.reranker = reranker  # None: TF-IDF order

    @property
    def url_pattern(self) -> str:
        """The pattern of ids without a namespace of their own (``""``: none)."""
        return self.url_patterns.get("", "")

    def candidates(self, texts: Sequence[str]) -> list[list[Candidate]]:
        """Up to ``k`` candidates per text, best first (any score). A text met several times
        in one call is looked up once."""
        if not texts:
            return []
        normalised = [normalise(t) for t in texts]
        queries = list(dict.fromkeys(normalised))
        index = self.index
        sims = (index.vectorizer.transform(queries) @ index.names).tocsr()
        pool = max(self.k, POOL) if self.reranker is not None else self.k
        ranked: list[list[tuple[int, float]]] = []
        for row, query in enumerate(queries):
            best: dict[int, float] = {}
            for concept in index.exact.get(query, []):
                best[concept] = 1.0
            start, end = sims.indptr[row], sims.indptr[row + 1]
            cols, vals = sims.indices[start:end], sims.data[start:end]
            if len(vals):
                top = np.argsort(-vals)[: 8 * pool]  # enough names for the distinct concepts
                for j in top:
                    concept = int(index.name_concept[cols[j]])
                    if concept not in best:
                        best[concept] = float(min(vals[j], 0.9999))  # below an exact name
                    if len(best) >= pool:
                        break
            ranked.append(sorted(best.items(), key=lambda kv: -kv[1]))
        if self.reranker is not None:
            ranked = self.reranker.scores(queries, ranked)
        found = {
            query: [self._candidate(c, s) for c, s in pairs[: self.k]]
            for query, pairs in zip(queries, ranked, strict=True)
        }
        return [found[q] for q in normalised]

    def link(self, texts: Sequence[str]) -> list[Candidate | None]:
        """The concept of each text: its top candidate when it scores at least the
        threshold, else None."""
        return [
            found[0] if found and found[0].score >= self.threshold else None
            for found in self.candidates(texts)
        ]

    def candidates_in_text(
        self, text: str, spans: Sequence[tuple[int, int]]
    ) -> list[list[Candidate]]:
        """Candidates for the entities ``text[start:end]``; an abbreviation the text defines
        (``renal failure (RF)``) is looked up by its long form. Offsets are not changed."""
        return self.candidates(self._lookups(text, spans))

    @staticmethod
    def _lookups(text: str, spans: Sequence[tuple[int, int]]) -> list[str]:
        """The strings to look up for ``spans``: an abbreviation the text defines by its long
        form, anything else as it is."""
        if not spans:
            return []
        expand = abbreviations(text)
        return [expand.get(text[a:b].strip(), text[a:b]) for a, b in spans]

    def apply_all(
        self, texts: Sequence[str], entities: Sequence[Sequence[Entity]]
    ) -> list[list[Entity]]:
        """``entities`` (per text) with their ``concept`` (None below the threshold) and
        ``candidates``; spans, types and confidences unchanged."""
        lookups = [
            self._lookups(text, [(e.start, e.end) for e in ents])
            for text, ents in zip(texts, entities, strict=True)
        ]
        found = iter(self.candidates([q for qs in lookups for q in qs]))  # one batch for all
        return [
            [
                replace(
                    e,
                    concept=c[0] if c and c[0].score >= self.threshold else None,
                    candidates=tuple(c),
                )
                for e, c in zip(ents, (next(found) for _ in ents), strict=True)
            ]
            for ents in entities
        ]

    def _candidate(self, concept: int, score: float) -> Candidate:
        cid = self.index.ids[concept]
        name = self.vocabulary.concepts[cid].name
        return Candidate(cid, name, score, self.vocabulary.name, self.url_of(cid))

    def url_of(self, cid: str) -> str | None:
        """The concept's page: the pattern of the longest prefix of ``cid`` that has one
        (``OMIM:`` before ``""``), or None."""
        for prefix, pattern in self.url_patterns.items():
            if cid.startswith(prefix):
                return pattern.replace("{id}", quote(cid.removeprefix(prefix), safe=":"))
        return None


def _url_patterns(value: str | dict[str, str]) -> dict[str, str]:
    """``{id prefix: pattern}``, longest prefix first, each pattern checked."""
    patterns = {"": value} if isinstance(value, str) else dict(value)
    for pattern in patterns.values():
        if pattern and ("{id}" not in pattern or not pattern.startswith(("https://", "http://"))):
            raise ValueError(f"URL pattern {pattern!r}: an http(s) URL with {{id}} in it")
    ordered = sorted(((p, u) for p, u in patterns.items() if u), key=lambda pu: -len(pu[0]))
    return dict(ordered)


@dataclass
class LinkerIndex:
    """What the linker searches: the names' character n-gram TF-IDF vectors (a column per
    name), each name's concept, and the exact normalised names. Built from a vocabulary
    (scikit-learn's vectoriser), or loaded from what :meth:`save` wrote (a JSON file and a
    NumPy archive: no pickle), which is what a service start reads instead of refitting."""

    ids: list[str]
    name_concept: npt.NDArray[np.int64]
    exact: dict[str, list[int]]
    vectorizer: TfidfVectorizer
    names: sparse.csr_matrix
    params: dict[str, float | int]

    @classmethod
    def build(cls, vocabulary: Vocabulary, ngrams: tuple[int, int], max_df: float) -> LinkerIndex:
        pairs = name_pairs(vocabulary)
        if not pairs:
            raise ValueError(f"vocabulary {vocabulary.name!r} has no usable name")
        ids = sorted({cid for cid, _ in pairs})
        position = {cid: i for i, cid in enumerate(ids)}
        exact: dict[str, list[int]] = {}
        for cid, n in pairs:
            hits = exact.setdefault(n, [])
            if position[cid] not in hits:
                hits.append(position[cid])
        # n-grams in more than max_df of the names say little and cost the most (every query
        # meets every name that has one): left out of the index when the vocabulary is large
        max_df = max_df if len(pairs) >= 10_000 else 1.0
        params = {"low": ngrams[0], "high": ngrams[1], "max_df": max_df}
        vectorizer = _vectorizer(params)
        names = vectorizer.fit_transform([n for _, n in pairs]).T.tocsr()
        name_concept = np.array([position[cid] for cid, _ in pairs], dtype=np.int64)
        return cls(ids, name_concept, exact, vectorizer, names, params)

    def save(self, folder: str | os.PathLike[str]) -> None:
        """Write ``index.json`` and ``index.npz`` into ``folder`` (created; the files are
        written under temporary names and renamed, the JSON last)."""
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        arrays = {
            "idf": self.vectorizer.idf_.astype(np.float32),
            "name_concept": self.name_concept,
            "data": self.names.data,
            "indices": self.names.indices,
            "indptr": self.names.indptr,
            "shape": np.array(self.names.shape, dtype=np.int64),
        }
        tmp = out / f".index.{os.getpid()}.npz"
        np.savez(tmp, **arrays)
        os.replace(tmp, out / "index.npz")
        meta = {
            "version": INDEX_VERSION,
            "params": self.params,
            "ids": self.ids,
            "ngrams": self.vectorizer.vocabulary_,
            "exact": self.exact,
        }
        tmp = out / f".index.{os.getpid()}.json"
        tmp.write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, out / "index.json")

    @classmethod
    def load(cls, folder: str | os.PathLike[str]) -> LinkerIndex:
        """What :meth:`save` wrote; ValueError when it is missing, of another version, or
        does not hold together."""
        src = Path(folder)
        try:
            meta = json.loads((src / "index.json").read_text(encoding="utf-8"))
            with np.load(src / "index.npz", allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        except (OSError, ValueError, KeyError) as exc:
            raise ValueError(f"no usable linker index in {src}: {exc}") from None
        if meta.get("version") != INDEX_VERSION:
            raise ValueError(f"linker index in {src}: version {meta.get('version')!r}")
        vectorizer = _vectorizer(meta["params"])
        vectorizer.vocabulary_ = {str(k): int(v) for k, v in meta["ngrams"].items()}
        vectorizer.idf_ = arrays["idf"]
        shape = tuple(int(v) for v in arrays["shape"])
        names = sparse.csr_matrix((arrays["data"], arrays["indices"], arrays["indptr"]), shape)
        name_concept = arrays["name_concept"]
        ids = [str(i) for i in meta["ids"]]
        if (
            shape != (len(vectorizer.vocabulary_), len(name_concept))
            or len(vectorizer.idf_) != shape[0]
            or (len(name_concept) and int(name_concept.max()) >= len(ids))
        ):
            raise ValueError(f"linker index in {src} does not hold together")
        exact = {str(k): [int(i) for i in v] for k, v in meta["exact"].items()}
        return cls(ids, name_concept, exact, vectorizer, names, meta["params"])


def name_pairs(vocabulary: Vocabulary) -> list[tuple[str, str]]:
    """(concept id, normalised name) of every name that has a letter or digit, in the order
    an index holds them."""
    pairs = [(cid, normalise(n)) for cid, n in vocabulary.names()]
    return [(cid, n) for cid, n in pairs if n]


def _vectorizer(params: dict[str, float | int]) -> TfidfVectorizer:
    from sklearn.feature_extraction.text import TfidfVectorizer

    return TfidfVectorizer(
        analyzer="char_wb",
        ngram_range=(int(params["low"]), int(params["high"])),
        sublinear_tf=True,
        dtype=np.float32,
        max_df=float(params["max_df"]),
    )
