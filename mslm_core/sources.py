"""What a training run reads: one corpus (``train``/``dev``/``test``), or several mapped onto
one target schema (``sources``), each with its type map and sampling weight.

With several corpora every sentence records the types its corpus annotates
(``Sentence.annotated``): training turns the rest into partial labels (``mslm_core.partial``)
and evaluation judges each sentence on its own corpus's types (``metrics.judge``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from .corpus import Corpus, read_corpus
from .errors import ConfigError
from .typemap import TypeMap

SPLITS = ("train", "dev", "test")
MAX_SOURCES = 16
MAX_WEIGHT = 100.0


@dataclass(frozen=True)
class CorpusSource:
    """One corpus of a multi-corpus run. ``weight``: how many times each of its training
    sentences is seen per epoch on average (0.5: a random half of them each epoch, drawn
    anew; 2: each twice)."""

    name: str
    train: str
    dev: str | None = None
    test: str | None = None
    type_map: TypeMap = field(default_factory=TypeMap)
    weight: float = 1.0

    @classmethod
    def parse(cls, data: Any, where: str) -> CorpusSource:
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: must be an object {{name, train, dev, test, …}}")
        known = {"name", "train", "dev", "test", "type_map", "weight"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"{where}: unknown field(s) {', '.join(unknown)}")
        for key in ("name", "train"):
            if not isinstance(data.get(key), str) or not data[key].strip():
                raise ConfigError(f"{where}.{key}: required, a non-empty string")
        for key in ("dev", "test"):
            if data.get(key) is not None and not isinstance(data[key], str):
                raise ConfigError(f"{where}.{key}: must be a path (string) or null")
        weight = data.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)):
            raise ConfigError(f"{where}.weight: must be a number")
        if not 0 < weight <= MAX_WEIGHT or not math.isfinite(weight):
            raise ConfigError(f"{where}.weight: must be in (0, {MAX_WEIGHT:g}], got {weight}")
        return cls(
            name=data["name"],
            train=data["train"],
            dev=data.get("dev") or None,
            test=data.get("test") or None,
            type_map=TypeMap.parse(data.get("type_map"), f"{where}.type_map"),
            weight=float(weight),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "train": self.train,
            "dev": self.dev,
            "test": self.test,
            "type_map": self.type_map.to_json(),
            "weight": self.weight,
        }


def parse_sources(raw: Any) -> list[CorpusSource]:
    """The ``sources`` of a TrainConfig, validated (a bad entry names its index and field)."""
    if not isinstance(raw, list):
        raise ConfigError("sources: must be a list of corpora")
    if len(raw) > MAX_SOURCES:
        raise ConfigError(f"sources: at most {MAX_SOURCES} corpora, got {len(raw)}")
    sources = [CorpusSource.parse(item, f"sources[{i}]") for i, item in enumerate(raw)]
    names = [s.name for s in sources]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise ConfigError(f"sources[{i}].name: {name!r} is used twice")
    if sources and not any(s.dev for s in sources):
        raise ConfigError("sources: at least one corpus needs a dev split (model selection)")
    return sources


@dataclass
class SourceData:
    """One corpus as read and mapped: its splits and the target types it annotates."""

    source: CorpusSource
    splits: dict[str, Corpus]
    annotated: frozenset[str]


@dataclass
class TrainingData:
    """The corpora of a run. ``partial``: several corpora (or a mapped one): sentences carry
    what their corpus annotates and labels may be partial; False: one corpus read as is."""

    sources: list[SourceData]
    types: list[str]
    partial: bool

    def merged(self, split: str) -> Corpus | None:
        """Every corpus's ``split``, one after the other (None: no corpus has it)."""
        parts = [d.splits[split] for d in self.sources if split in d.splits]
        if not parts:
            return None
        if len(parts) == 1:
            return parts[0]
        sentences = [s for c in parts for s in c.sentences]
        return Corpus(
            sentences,
            path=" + ".join(str(c.path) for c in parts),
            repairs=sum(c.repairs for c in parts),
            stripped=sum(c.stripped for c in parts),
        )

    def corpora(self) -> dict[str, Corpus]:
        """``train``, ``dev`` and (when any corpus has one) ``test``, merged."""
        out = {}
        for split in SPLITS:
            corpus = self.merged(split)
            if corpus is not None:
                out[split] = corpus
        return out

    def ranges(self, split: str) -> dict[str, tuple[int, int]]:
        """Each corpus's sentences in :meth:`merged` ``split``: name → (first, end)."""
        out, pos = {}, 0
        for d in self.sources:
            if split in d.splits:
                n = len(d.splits[split])
                out[d.source.name] = (pos, pos + n)
                pos += n
        return out

    def train_source(self) -> list[int]:
        """The index of the corpus of each merged training sentence."""
        return self.split_source("train")

    def split_source(self, split: str) -> list[int]:
        """The index of the corpus of each sentence of merged ``split``."""
        return [
            k
            for k, d in enumerate(self.sources)
            if split in d.splits
            for _ in d.splits[split].sentences
        ]

    def unannotated(self, k: int, type_ids: dict[str, int]) -> frozenset[int]:
        """The ids of the schema types corpus ``k`` leaves unannotated."""
        return frozenset(type_ids[t] for t in self.types if t not in self.sources[k].annotated)


def map_corpus(
    corpus: Corpus, type_map: TypeMap, annotated: frozenset[str] | None = None
) -> Corpus:
    """``corpus`` with ``type_map`` applied, each sentence knowing the types it annotates:
    ``annotated``, or what the map makes of the corpus's own types."""
    if annotated is None:
        annotated = frozenset(type_map.targets(corpus.types))
    return replace(
        corpus,
        sentences=[replace(s, annotated=annotated) for s in type_map.apply(corpus.sentences)],
    )


def load_training_data(config: Any, partial_labels: bool = True) -> TrainingData:
    """Read the corpora a TrainConfig names (``train``/``dev``/``test``, or ``sources``);
    ``max_train_sentences`` keeps the first K training sentences of each,
    ``max_eval_sentences`` the first K of its dev and test."""
    if not config.sources:
        if not config.train or not config.dev:
            raise ConfigError("train and dev corpora are both required")
        splits = {"train": read_corpus(config.train), "dev": read_corpus(config.dev)}
        if config.test:
            splits["test"] = read_corpus(config.test)
        _cut_all(splits, config)
        types = splits["train"].types
        only = CorpusSource(name="train", train=config.train, dev=config.dev, test=config.test)
        return TrainingData([SourceData(only, splits, frozenset(types))], types, partial=False)

    loaded: list[SourceData] = []
    for source in parse_sources(config.sources):
        raw = {"train": read_corpus(source.train)}
        for split in ("dev", "test"):
            path = getattr(source, split)
            if path:
                raw[split] = read_corpus(path)
        _cut_all(raw, config)
        source_types = {m.label for c in raw.values() for s in c.sentences for m in s.mentions}
        annotated = frozenset(source.type_map.targets(source_types))
        if not annotated:
            raise ConfigError(
                f"source {source.name!r}: no entity type left after its type map "
                f"(its types: {', '.join(sorted(source_types)) or 'none'})"
            )
        splits = {
            split: replace(
                corpus,
                sentences=[
                    replace(s, annotated=annotated) for s in source.type_map.apply(corpus.sentences)
                ],
            )
            for split, corpus in raw.items()
        }
        loaded.append(SourceData(source, splits, annotated))
    types = sorted(set().union(*(d.annotated for d in loaded)))
    if not partial_labels:  # every corpus is taken to annotate every type
        loaded = [replace(d, annotated=frozenset(types)) for d in loaded]
    return TrainingData(loaded, types, partial=True)


def _cut_all(splits: dict[str, Corpus], config: Any) -> None:
    """The first ``max_train_sentences`` of train, ``max_eval_sentences`` of dev and test."""
    for split, corpus in splits.items():
        limit = getattr(config, "max_train_sentences" if split == "train" else "max_eval_sentences")
        if limit:
            corpus.sentences = corpus.sentences[:limit]
