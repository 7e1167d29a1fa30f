"""Concept linking: candidate concepts for an entity's text by character n-gram TF-IDF nearest
neighbours over the vocabulary's names, an exact (normalised) name first, abbreviations defined
in the text expanded, and a threshold below which no concept is given. No torch: it runs in the
API image."""

from __future__ import annotations

import json
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote

import numpy as np
import numpy.typing as npt
from scipy import sparse

from ..clinical_types import CLINICAL_TYPES
from ..ocr import mended_text
from ..types import Entity, LinkedConcept, with_fields
from .abbreviations import abbreviations
from .calibration import LinkCalibration
from .vocabulary import Vocabulary

if TYPE_CHECKING:
    from sklearn.feature_extraction.text import TfidfVectorizer

#: Bumped whenever what LinkerIndex.save writes, or how it is built, changes.
INDEX_VERSION = 1

#: TF-IDF candidates a re-rank looks at (the linker returns its k of them).
POOL = 20
#: Texts whose candidates a linker keeps for its next calls (notes repeat their mentions).
CACHED = 50_000
#: A look-up retrieves the names that share one of its text's heaviest (rarest) n-grams, and
#: scores the best of them exactly (:meth:`LinkerIndex.search`).
RETRIEVE, RESCORED = 12, 64
#: An n-gram in more names than this retrieves none (its names are still scored by it): in a
#: vocabulary of 700,000 names the heaviest n-grams of a mention are shared by up to 14,000
#: names each, and their product would be most of a look-up. Above the most names an n-gram
#: has in the packaged MeSH (3,440: its index leaves out those in more than 2 %), which it
#: leaves whole. A text whose n-grams are all that common retrieves by them all the same.
RETRIEVE_MAX_NAMES = 4000


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


#: The share of a short form's uses in clinical notes its sense must have for an entity written
#: as it to be looked up by its long form.
SHORTHAND_MEANT = 0.9


@lru_cache(maxsize=1)
def long_forms() -> dict[str, str]:
    """Spelling of a short form as notes write it → the long form it stands for
    (``mslm_core.shorthand``, a sense meant in at least :data:`SHORTHAND_MEANT` of its uses)."""
    from ..shorthand import packaged

    out: dict[str, str] = {}
    for senses in packaged().senses.values():
        if senses[0].frequency >= SHORTHAND_MEANT:
            for spelling in senses[0].spellings():
                out.setdefault(spelling, senses[0].long)
    return out


class Linker:
    """Links entity texts to the concepts of ``vocabulary``. ``threshold``: the lowest score a
    top candidate needs to be given as the concept; ``k``: candidates returned;
    ``calibration``: how likely a top candidate is right, and the per-type confidence below
    which no concept is given (:class:`LinkCalibration`; None: the score threshold alone).

    An entity of a type the vocabulary's type map names (:attr:`Vocabulary.types`) gets
    candidates of the parts that fit it only (an Anatomy entity: MeSH's tree A); a candidate
    that maps to another concept (an OMOP non-standard one) stands for that concept."""

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
        calibration: LinkCalibration | None = None,
    ):
        self.vocabulary, self.threshold, self.k = vocabulary, threshold, k
        self.url_patterns = _url_patterns(url_pattern)
        self.index = index if index is not None else LinkerIndex.build(vocabulary, ngrams, max_df)
        self._cache = _Cache(CACHED)
        self._fields: dict[int, dict[str, Any]] = {}  # a concept's candidate fields, once
        self._reranker = reranker  # None: TF-IDF order
        self._calibration = calibration
        self._masks = self._type_masks()
        for mask in self._masks.values():  # each type's part of the index, made now
            self.index.names_of(mask)
        # the concept each index concept stands for (itself, or what it maps to)
        position = {cid: i for i, cid in enumerate(self.index.ids)}
        self._target = np.array(
            [
                position.get(vocabulary.concepts[cid].maps_to or cid, i)
                if cid in vocabulary.concepts
                else i
                for i, cid in enumerate(self.index.ids)
            ],
            dtype=np.int64,
        )

    @property
    def reranker(self) -> Reranker | None:
        return self._reranker

    @reranker.setter
    def reranker(self, value: Reranker | None) -> None:
        self._reranker = value
        self.clear_cache()

    @property
    def calibration(self) -> LinkCalibration | None:
        return self._calibration

    @calibration.setter
    def calibration(self, value: LinkCalibration | None) -> None:
        self._calibration = value
        self.clear_cache()

    def clear_cache(self) -> None:
        """Forget the texts looked up (after changing what ranks or calibrates them)."""
        self._cache = _Cache(CACHED)

    @property
    def url_pattern(self) -> str:
        """The pattern of ids without a namespace of their own (``""``: none)."""
        return self.url_patterns.get("", "")

    def names_a(self, text: str, entity_type: str) -> bool:
        """Whether ``text`` is exactly a name of a concept an entity of ``entity_type`` may be
        linked to ("chest pain": Chest Pain, a Problem's)."""
        allowed = self.mask(entity_type)
        hits = self.index.exact.get(normalise(text), ())
        return any(allowed is None or allowed[c] for c in hits)

    def mask(self, entity_type: str | None) -> npt.NDArray[np.bool_] | None:
        """Which of the index's concepts an entity of ``entity_type`` may be linked to (None:
        any — the vocabulary's type map does not name the type)."""
        if entity_type is None or entity_type not in self.vocabulary.types:
            return None
        return self._masks[entity_type]

    def _type_masks(self) -> dict[str, npt.NDArray[np.bool_]]:
        """Every mapped type's mask, built once: each distinct part is matched against the
        type's prefixes once (an OMOP import has a few dozen parts, MeSH tens of thousands of
        tree numbers), then spread over the concepts that lie in it."""
        concepts = self.vocabulary.concepts
        part_ids: dict[str, int] = {}
        owners: list[int] = []
        parts: list[int] = []
        for i, cid in enumerate(self.index.ids):
            found = concepts.get(cid)
            for part in found.parts if found is not None else ():
                owners.append(i)
                parts.append(part_ids.setdefault(part, len(part_ids)))
        names = list(part_ids)
        owner, lies_in = np.array(owners, dtype=np.int64), np.array(parts, dtype=np.int64)
        masks: dict[str, npt.NDArray[np.bool_]] = {}
        for kind, prefixes in self.vocabulary.types.items():
            fits = np.array([n.startswith(prefixes) for n in names], dtype=bool)
            mask = np.zeros(len(self.index.ids), dtype=bool)
            if len(owner):
                np.logical_or.at(mask, owner, fits[lies_in])
            masks[kind] = mask
        return masks

    def candidates(
        self, texts: Sequence[str], types: Sequence[str | None] | None = None
    ) -> list[list[Candidate]]:
        """Up to ``k`` candidates per text, best first (any score), each of the parts its
        type fits (``types``: per text, its entity type; None: any concept), the first with
        its calibrated confidence. A text that is a concept's exact name gets the concepts of
        that name only; the others their nearest names by character n-grams. A text met
        several times is looked up once (and kept for the next calls, up to
        :data:`CACHED` texts)."""
        if not texts:
            return []
        normalised = [normalise(t) for t in texts]
        kinds = list(types) if types is not None else [None] * len(texts)
        wanted = list(zip(normalised, kinds, strict=True))
        known = self._cache.get_many(wanted)
        missing = [key for key in dict.fromkeys(wanted) if key not in known]
        if missing:
            found = self._look_up(missing)
            self._cache.put_many(found)
            known.update(found)
        return list(map(list, map(known.__getitem__, wanted)))

    def _look_up(
        self, keys: list[tuple[str, str | None]]
    ) -> dict[tuple[str, str | None], tuple[Candidate, ...]]:
        index = self.index
        pool = max(self.k, POOL) if self.reranker is not None else self.k
        ranked: list[list[tuple[int, float]]] = [[] for _ in keys]
        through: list[dict[int, int]] = [{} for _ in keys]  # concepts reached through another
        searched: list[int] = []  # the keys with no exact name: their nearest names
        for n, (query, kind) in enumerate(keys):
            allowed = self.mask(kind)
            hits = [c for c in index.exact.get(query, []) if allowed is None or allowed[c]]
            if hits and self.reranker is None:
                ranked[n], through[n] = _distinct([(c, 1.0) for c in hits], self._target, pool)
            else:
                searched.append(n)
        if searched:
            texts = [keys[n][0] for n in searched]
            masks = [self.mask(keys[n][1]) for n in searched]
            nearest = index.search(index.vectorizer.transform(texts).tocsr(), masks, 8 * pool)
            for n, allowed, (cols, vals) in zip(searched, masks, nearest, strict=True):
                scored = [
                    (c, 1.0)
                    for c in index.exact.get(keys[n][0], [])
                    if allowed is None or allowed[c]
                ]
                concepts = index.name_concept[cols].tolist()
                # below an exact name
                scored += zip(concepts, np.minimum(vals, 0.9999).tolist(), strict=True)
                ranked[n], through[n] = _distinct(scored, self._target, pool)
        if self.reranker is not None:
            ranked = self.reranker.scores([q for q, _ in keys], ranked)
        out = {}
        for key, pairs, via in zip(keys, ranked, through, strict=True):
            found = [self._candidate(c, score, via.get(c)) for c, score in pairs[: self.k]]
            out[key] = tuple(self._calibrated(found, key[0]))
        return out

    def _calibrated(self, found: list[Candidate], query: str) -> list[Candidate]:
        """The candidates, the first with its calibrated confidence."""
        if self.calibration is None or not found:
            return found
        confidence = self.calibration.confidence(found, query)
        return [with_fields(found[0], confidence=confidence), *found[1:]]

    def chosen(self, found: Sequence[Candidate], entity_type: str | None) -> Candidate | None:
        """The concept given for these candidates: the first, when it is confident enough
        for its type (calibrated), or scores at least the threshold (uncalibrated)."""
        if not found:
            return None
        top = found[0]
        if self.calibration is None or top.confidence is None:
            return top if top.score >= self.threshold else None
        return top if top.confidence >= self.calibration.threshold(entity_type) else None

    def link(
        self, texts: Sequence[str], types: Sequence[str | None] | None = None
    ) -> list[Candidate | None]:
        """The concept of each text (:meth:`chosen`), or None."""
        kinds = list(types) if types is not None else [None] * len(texts)
        found = self.candidates(texts, kinds)
        return [self.chosen(f, t) for f, t in zip(found, kinds, strict=True)]

    def candidates_in_text(
        self,
        text: str,
        spans: Sequence[tuple[int, int]],
        types: Sequence[str | None] | None = None,
    ) -> list[list[Candidate]]:
        """Candidates for the entities ``text[start:end]`` (of ``types``); an abbreviation the
        text defines (``renal failure (RF)``) is looked up by its long form. Offsets are not
        changed."""
        return self.candidates(self._lookups(text, spans, types), types)

    @staticmethod
    def _lookups(
        text: str,
        spans: Sequence[tuple[int, int]],
        types: Sequence[str | None] | None = None,
    ) -> list[str]:
        """The strings to look up for ``spans``: an abbreviation the text defines by its long
        form; clinical shorthand of an entity of the clinical schema's ``types`` by what notes
        mean by it ("CP" → chest pain, not the PubMed corpora's cleft palate); anything else
        as it is, its words a scanner damaged mended (``mslm_core.ocr``)."""
        if not spans:
            return []
        expand = abbreviations(text)
        shorthand = long_forms() if types is not None else {}
        out = []
        for k, (a, b) in enumerate(spans):
            written = mended_text(text[a:b].strip())  # as written before a scanner ("AKl")
            found = expand.get(written)
            if found is None and types is not None and types[k] in CLINICAL_TYPES:
                found = shorthand.get(written)
            out.append(found or written)
        return out

    def apply_all(
        self, texts: Sequence[str], entities: Sequence[Sequence[Entity]]
    ) -> list[list[Entity]]:
        """``entities`` (per text) with their ``concept`` (:meth:`chosen`; None when it
        abstains) and ``candidates``, each of the parts its type fits; spans, types and
        confidences unchanged."""
        lookups = [
            self._lookups(text, [(e.start, e.end) for e in ents], [e.type for e in ents])
            for text, ents in zip(texts, entities, strict=True)
        ]
        kinds = [e.type for ents in entities for e in ents]
        found = iter(self.candidates([q for qs in lookups for q in qs], kinds))  # one batch
        return [
            [
                with_fields(e, concept=self.chosen(c, e.type), candidates=tuple(c))
                for e, c in zip(ents, (next(found) for _ in ents), strict=True)
            ]
            for ents in entities
        ]

    def _candidate(self, concept: int, score: float, via: int | None = None) -> Candidate:
        """The candidate of the index's ``concept``; ``via``: the concept whose name matched
        when it is another (one that maps to this)."""
        fields = self._fields.get(concept)
        if fields is None:  # what does not depend on the look-up, worked out once a concept
            cid = self.index.ids[concept]
            c = self.vocabulary.concepts[cid]
            omop = c.vocabulary is not None and c.code is not None and cid.isdigit()
            fields = {
                "id": cid,
                "name": c.name,
                "vocabulary": c.vocabulary or self.vocabulary.name,
                "url": self.url_of(cid),
                "code": c.code or cid,
                "concept_id": int(cid) if omop else None,
            }
            self._fields[concept] = fields
        source = None if via is None else self.index.ids[via]
        return Candidate(score=score, source_id=source, **fields)

    def url_of(self, cid: str) -> str | None:
        """The concept's page: the pattern of the longest prefix of ``cid`` that has one
        (``OMIM:`` before ``""``), or None."""
        for prefix, pattern in self.url_patterns.items():
            if cid.startswith(prefix):
                return pattern.replace("{id}", quote(cid.removeprefix(prefix), safe=":"))
        return None


def _heaviest(vectors: sparse.csr_matrix, k: int) -> sparse.csr_matrix:
    """``vectors`` with each row's ``k`` heaviest entries only."""
    if not len(vectors.indptr) or int(np.diff(vectors.indptr).max(initial=0)) <= k:
        return vectors
    keep = np.zeros(len(vectors.data), dtype=bool)
    for r in range(vectors.shape[0]):
        start, end = vectors.indptr[r], vectors.indptr[r + 1]
        if end - start <= k:
            keep[start:end] = True
        else:
            keep[start + np.argpartition(-vectors.data[start:end], k)[:k]] = True
    kept = np.concatenate([[0], np.cumsum(keep)])
    indptr = kept[vectors.indptr]
    return sparse.csr_matrix(
        (vectors.data[keep], vectors.indices[keep], indptr), shape=vectors.shape
    )


def _top(values: npt.NDArray[np.float32], n: int) -> npt.NDArray[np.intp]:
    """The positions of the ``n`` largest ``values``, largest first."""
    if len(values) > n:
        part = np.argpartition(-values, n)[:n]
        return part[np.argsort(-values[part], kind="stable")]
    return np.argsort(-values, kind="stable")


def _distinct(
    scored: Sequence[tuple[int, float]], target: npt.NDArray[np.int64], pool: int
) -> tuple[list[tuple[int, float]], dict[int, int]]:
    """Up to ``pool`` distinct concepts of (concept, score) pairs in their order, each
    replaced by the concept it stands for, best first; and the concepts reached through
    another's name."""
    best: dict[int, float] = {}
    via: dict[int, int] = {}
    for concept, score in scored:
        chosen = int(target[concept])
        if chosen not in best:
            best[chosen] = score
            if chosen != concept:
                via[chosen] = concept
            if len(best) >= pool:
                break
    return sorted(best.items(), key=lambda kv: -kv[1]), via


class _Cache:
    """Candidates of texts already looked up, the most recently used kept (thread-safe: a
    service's inference threads share one linker)."""

    def __init__(self, size: int):
        self.size = size
        self._items: OrderedDict[tuple[str, str | None], tuple[Candidate, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def get_many(
        self, keys: Sequence[tuple[str, str | None]]
    ) -> dict[tuple[str, str | None], tuple[Candidate, ...]]:
        with self._lock:
            found = {k: self._items[k] for k in keys if k in self._items}
            for key in found:
                self._items.move_to_end(key)
        return found

    def put_many(self, found: dict[tuple[str, str | None], tuple[Candidate, ...]]) -> None:
        with self._lock:
            self._items.update(found)
            while len(self._items) > self.size:
                self._items.popitem(last=False)


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

    def __post_init__(self) -> None:
        # each name's n-grams, a row per name: the exact scores of the names a search retrieves
        self._by_name = self.names.T.tocsr()
        self._common = np.diff(self.names.indptr) > RETRIEVE_MAX_NAMES  # per n-gram
        self._parts: dict[int, tuple[Any, npt.NDArray[np.int64], sparse.csr_matrix]] = {}

    def _retrieving(self, vectors: sparse.csr_matrix) -> sparse.csr_matrix:
        """``vectors`` without the n-grams too common to retrieve by, but for a row that
        would be left with none."""
        common = self._common[vectors.indices]
        if not common.any():
            return vectors
        n = vectors.shape[0]
        rows = np.repeat(np.arange(n), np.diff(vectors.indptr))
        keep = ~common
        keep |= (np.bincount(rows[keep], minlength=n) == 0)[rows]
        indptr = np.concatenate([[0], np.cumsum(np.bincount(rows[keep], minlength=n))])
        return sparse.csr_matrix(
            (vectors.data[keep], vectors.indices[keep], indptr), shape=vectors.shape
        )

    def names_of(
        self, mask: npt.NDArray[np.bool_] | None
    ) -> tuple[npt.NDArray[np.int64] | None, sparse.csr_matrix]:
        """The names of the concepts ``mask`` allows (None: every name) and their columns of
        :attr:`names`, worked out once a mask: a search multiplies by these only (a type's
        part of a large vocabulary is a fraction of it)."""
        if mask is None:
            return None, self.names
        found = self._parts.get(id(mask))
        if found is None or found[0] is not mask:
            allowed = np.flatnonzero(mask[self.name_concept])
            found = (mask, allowed, self.names[:, allowed].tocsr())
            self._parts[id(mask)] = found  # holds the mask: its id is not reused
        return found[1], found[2]

    def search(
        self,
        vectors: sparse.csr_matrix,
        masks: Sequence[npt.NDArray[np.bool_] | None],
        n: int,
    ) -> list[tuple[npt.NDArray[np.int32], npt.NDArray[np.float32]]]:
        """Per query (a row of ``vectors``: n-gram TF-IDF, unit length), up to ``n`` names of
        the concepts its mask allows (None: any), by their cosine with it, best first.

        The names are retrieved by the query's :data:`RETRIEVE` heaviest (rarest) n-grams of
        those in at most :data:`RETRIEVE_MAX_NAMES` names — a name that shares only common
        ones with it is not a candidate — and the
        :data:`RESCORED` best of those are scored exactly: a large vocabulary's common
        n-grams are shared by thousands of names each, and were what a look-up cost."""
        heavy = _heaviest(self._retrieving(vectors), RETRIEVE)
        groups: dict[int, list[int]] = {}  # the queries of each mask: a product each
        for r, mask in enumerate(masks):
            groups.setdefault(0 if mask is None else id(mask), []).append(r)
        picked: list[npt.NDArray[np.int32]] = [np.zeros(0, np.int32)] * len(masks)
        for members in groups.values():
            allowed, names = self.names_of(masks[members[0]])
            partial = (heavy[members] @ names).tocsr()
            for j, r in enumerate(members):
                start, end = partial.indptr[j], partial.indptr[j + 1]
                cols, vals = partial.indices[start:end], partial.data[start:end]
                top = cols[_top(vals, max(n, RESCORED))] if len(vals) else cols[:0]
                picked[r] = (top if allowed is None else allowed[top]).astype(np.int32)
        rows = [np.full(len(p), r, dtype=np.int64) for r, p in enumerate(picked)]
        flat = np.concatenate(picked) if picked else np.zeros(0, np.int32)
        if not len(flat):
            return [(p, np.zeros(0, np.float32)) for p in picked]
        exact = np.asarray(
            self._by_name[flat].multiply(vectors[np.concatenate(rows)]).sum(axis=1)
        ).ravel()
        out = []
        at = 0
        for names in picked:
            scores = exact[at : at + len(names)].astype(np.float32)
            at += len(names)
            best = _top(scores, n)
            out.append((names[best], scores[best]))
        return out

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
