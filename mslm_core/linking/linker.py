"""Concept linking: candidate concepts for an entity's text by character n-gram TF-IDF nearest
neighbours over the vocabulary's names, an exact (normalised) name first, abbreviations defined
in the text expanded, and a threshold below which no concept is given. No torch: it runs in the
API image."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from urllib.parse import quote

import numpy as np

from ..types import Entity, LinkedConcept
from .abbreviations import abbreviations
from .vocabulary import Vocabulary

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
        url_pattern: str = "",
        max_df: float = 0.02,
    ):
        from sklearn.feature_extraction.text import TfidfVectorizer

        self.vocabulary, self.threshold, self.k = vocabulary, threshold, k
        if url_pattern and (
            "{id}" not in url_pattern or not url_pattern.startswith(("https://", "http://"))
        ):
            raise ValueError(f"URL pattern {url_pattern!r}: an http(s) URL with {{id}} in it")
        self.url_pattern = url_pattern
        pairs = [(cid, normalise(n)) for cid, n in vocabulary.names()]
        pairs = [(cid, n) for cid, n in pairs if n]
        if not pairs:
            raise ValueError(f"vocabulary {vocabulary.name!r} has no usable name")
        self._ids = sorted({cid for cid, _ in pairs})
        index = {cid: i for i, cid in enumerate(self._ids)}
        self._name_concept = np.array([index[cid] for cid, _ in pairs])
        self._exact: dict[str, list[int]] = {}
        for cid, n in pairs:
            hits = self._exact.setdefault(n, [])
            if index[cid] not in hits:
                hits.append(index[cid])
        # n-grams in more than max_df of the names say little and cost the most (every query
        # meets every name that has one): left out of the index when the vocabulary is large
        self._vectorizer = TfidfVectorizer(
            analyzer="char_wb",
            ngram_range=ngrams,
            sublinear_tf=True,
            dtype=np.float32,
            max_df=max_df if len(pairs) >= 10_000 else 1.0,
        )
        self._names = self._vectorizer.fit_transform([n for _, n in pairs]).T.tocsr()

    def candidates(self, texts: Sequence[str]) -> list[list[Candidate]]:
        """Up to ``k`` candidates per text, best first (any score). A text met several times
        in one call is looked up once."""
        if not texts:
            return []
        normalised = [normalise(t) for t in texts]
        queries = list(dict.fromkeys(normalised))
        sims = (self._vectorizer.transform(queries) @ self._names).tocsr()
        found: dict[str, list[Candidate]] = {}
        for row, query in enumerate(queries):
            best: dict[int, float] = {}
            for concept in self._exact.get(query, []):
                best[concept] = 1.0
            start, end = sims.indptr[row], sims.indptr[row + 1]
            cols, vals = sims.indices[start:end], sims.data[start:end]
            if len(vals):
                top = np.argsort(-vals)[: 8 * self.k]  # enough names for k distinct concepts
                for j in top:
                    concept = int(self._name_concept[cols[j]])
                    if concept not in best:
                        best[concept] = float(min(vals[j], 0.9999))  # below an exact name
                    if len(best) >= self.k:
                        break
            ranked = sorted(best.items(), key=lambda kv: -kv[1])[: self.k]
            found[query] = [self._candidate(c, s) for c, s in ranked]
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
        cid = self._ids[concept]
        url = self.url_pattern.replace("{id}", quote(cid, safe=":")) if self.url_pattern else None
        return Candidate(cid, self.vocabulary.concepts[cid].name, score, self.vocabulary.name, url)
