"""Relations: each modifier tied to its head — a dose, route, frequency or duration to its
drug, a value to its test, a body site to its finding, test or procedure, a severity to its
finding.

A modifier's head is chosen among the mentions of the types it may modify in its sentence
(:data:`ROLES`), or none: a small scorer rates each (modifier, candidate) pair and a
"no head" option from what lies between them — their types, which comes first, how far apart
they are, how many other candidates and modifiers of the same kind stand between, the words
and punctuation between ("of", "was", "(", ";"), and whether both sit at the same place of
two parallel lists ("WBC, Hb and Plt were 12.1, 8.2 and 50"). A softmax over the candidates
and "no head" gives each choice its probability: the relation's ``confidence``.

The scorer is trained from a corpus's relations (MACCROBAT2020's MODIFY links, a site's brat
``R`` lines or Label Studio relations) in seconds (:func:`train`), is saved as safetensors
with its ONNX graph (:meth:`RelationScorer.save`), and is served by ONNX Runtime.
:func:`nearest_head` is the baseline it is measured against (benchmarks/relations.py).
"""

from __future__ import annotations

import json
import math
import re
import zlib
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .errors import ConfigError
from .text import sentence_spans
from .types import Attachment, Entity, with_fields

#: modifier type → (its role for the head, the types it may modify, in order of preference)
ROLES: dict[str, tuple[str, tuple[str, ...]]] = {
    "Dosage": ("dose", ("Drug",)),
    "Route": ("route", ("Drug",)),
    "Frequency": ("frequency", ("Drug",)),
    "Duration": ("duration", ("Drug", "Problem")),
    "Result": ("value", ("Test", "Problem")),
    "Anatomy": ("site", ("Problem", "Test", "Procedure")),
    "Severity": ("severity", ("Problem",)),
}
MODIFIERS = tuple(ROLES)
HEADS = tuple(sorted({h for _, hs in ROLES.values() for h in hs}))
PAIRS = tuple((m, h) for m, (_, hs) in ROLES.items() for h in hs)
FORMAT = "mslm-relations-v1"
#: a bundle's files of its relation scorer
FILES = ("relations.json", "relations.safetensors", "relations.onnx")

_TOKEN = re.compile(r"\w+|[^\w\s]")
_LIST_GLUE = frozenset({",", "and", "or", ";", "/", "&"})
#: a drug's regimen: its modifiers one after another ("metoprolol 25 mg PO BID for 3 days")
REGIMEN = frozenset({"Dosage", "Route", "Frequency", "Duration"})
_CHAIN_GLUE = frozenset({",", "for", "x", "then", "and", "-", "(", ")", "over", "times", "/"})
_FLAGS: tuple[frozenset[str], ...] = tuple(
    frozenset(w.split("|"))
    for w in (
        ",",
        ";",
        ":",
        "(",
        ")",
        "and",
        "or",
        "with",
        "of",
        "in|within",
        "was|were|is|are|be|been",
        "showed|revealed|demonstrated|found|noted",
        "to",
        "at",
        "-",
        "/",
        "on",
        "for",
        "after|before|following",
        "due|because",
        "from",
        "which|that",
    )
)
_HASHED = 128
_WORDS = 64
_DISTANCE_EDGES = (0, 1, 2, 4, 7, 12, 20)  # buckets: 0, 1, 2, 3-4, 5-7, 8-12, 13-20, 21+


def _bucket3(n: int) -> list[float]:
    return [float(n == 0), float(n == 1), float(n >= 2)]


def _slots() -> dict[str, int]:
    sizes = {
        "none": 1,
        "none_type": len(MODIFIERS),
        "pair": len(PAIRS),
        "head_before": 1,
        "adjacent": 1,
        "distance": len(_DISTANCE_EDGES) + 1,
        "log_distance": 1,
        "rank": 4,
        "side_rank": 3,
        "nearest_any": 1,
        "between_candidates": 3,
        "between_same_heads": 3,
        "between_same_modifiers": 3,
        "between_others": 3,
        "flags": len(_FLAGS),
        "parenthesised": 1,
        "aligned": 1,
        "modifier_in_list": 1,
        "head_in_list": 1,
        "hashed": _HASHED,
        "head_words": _WORDS,
        "modifier_words": _WORDS,
        "other_kinds": 3,
        "regimen_chain": 1,
    }
    out, at = {}, 0
    for name, size in sizes.items():
        out[name] = at
        at += size
    out["_dim"] = at
    return out


SLOT = _slots()
DIM = SLOT["_dim"]


@dataclass(frozen=True)
class Segment:
    """A sentence's words (lower-cased) and its mentions as word spans."""

    words: list[str]
    spans: list[tuple[int, int]]  # per mention: [first word, last word + 1)
    types: list[str]
    runs: list[tuple[int, int]]  # per mention: (its place in a list of its type, the list size)


def segment(text: str, start: int, end: int, entities: Sequence[tuple[int, int, str]]) -> Segment:
    """``text[start:end]`` cut into words, with ``entities`` (character spans in ``text``,
    inside the sentence, in order) as word spans."""
    words, starts, ends = [], [], []
    for m in _TOKEN.finditer(text, start, end):
        words.append(m.group().lower())
        starts.append(m.start())
        ends.append(m.end())
    spans = []
    for a, b, _ in entities:
        first = bisect_right(ends, a)  # the first word ending after a
        last = bisect_left(starts, b)  # the words starting before b
        spans.append((first, max(last, first + 1)))
    types = [t for _, _, t in entities]
    return Segment(words, spans, types, _runs(words, spans, types))


def _runs(
    words: list[str], spans: list[tuple[int, int]], types: list[str]
) -> list[tuple[int, int]]:
    """Each mention's place in the list of same-type mentions it stands in ("A, B and C")."""
    groups: list[list[int]] = []
    for i in range(len(spans)):
        if (
            i
            and types[i] == types[i - 1]
            and all(w in _LIST_GLUE for w in words[spans[i - 1][1] : spans[i][0]])
        ):
            groups[-1].append(i)
        else:
            groups.append([i])
    out = [(0, 1)] * len(spans)
    for g in groups:
        for place, i in enumerate(g):
            out[i] = (place, len(g))
    return out


def _hash(word: str) -> int:
    return zlib.crc32(word.encode()) % _HASHED


def candidates(seg: Segment, m: int) -> list[int]:
    """The mentions the modifier ``m`` may modify in its sentence, in order."""
    kinds = ROLES[seg.types[m]][1]
    return [i for i, t in enumerate(seg.types) if i != m and t in kinds]


def features(seg: Segment, m: int, cands: Sequence[int]) -> NDArray[Any]:
    """One row per candidate head of the modifier ``m``, then the "no head" row."""
    rows = np.zeros((len(cands) + 1, DIM), dtype=np.float32)
    mtype = seg.types[m]
    ms, me = seg.spans[m]
    gaps = [
        (seg.spans[h][0] - me) if seg.spans[h][0] >= me else (ms - seg.spans[h][1]) for h in cands
    ]
    order = sorted(range(len(cands)), key=lambda k: gaps[k])
    nearest = order[0] if order else -1
    for r, k in enumerate(cands):
        row = rows[r]
        htype = seg.types[k]
        hs, he = seg.spans[k]
        before = hs < ms
        lo, hi = (he, ms) if before else (me, hs)
        lo, hi = min(lo, hi), max(lo, hi)
        gap = gaps[r]
        between = [
            i for i, (a, b) in enumerate(seg.spans) if a >= lo and b <= hi and i not in (m, k)
        ]
        same_type = [gaps[j] for j, c in enumerate(cands) if seg.types[c] == htype]
        rank = sum(g < gap for g in same_type)
        side = [
            gaps[j]
            for j, c in enumerate(cands)
            if seg.types[c] == htype and (seg.spans[c][0] < ms) == before
        ]
        side_rank = sum(g < gap for g in side)
        row[SLOT["pair"] + PAIRS.index((mtype, htype))] = 1
        row[SLOT["head_before"]] = before
        row[SLOT["adjacent"]] = gap == 0
        row[SLOT["distance"] + sum(gap > e for e in _DISTANCE_EDGES)] = 1
        row[SLOT["log_distance"]] = math.log1p(max(gap, 0)) / 3
        row[SLOT["rank"] + min(rank, 3)] = 1
        row[SLOT["side_rank"] + min(side_rank, 2)] = 1
        row[SLOT["nearest_any"]] = r == nearest
        in_between_cands = sum(1 for i in between if seg.types[i] in ROLES[mtype][1])
        row[SLOT["between_candidates"] : SLOT["between_candidates"] + 3] = _bucket3(
            in_between_cands
        )
        row[SLOT["between_same_heads"] : SLOT["between_same_heads"] + 3] = _bucket3(
            sum(1 for i in between if seg.types[i] == htype)
        )
        row[SLOT["between_same_modifiers"] : SLOT["between_same_modifiers"] + 3] = _bucket3(
            sum(1 for i in between if seg.types[i] == mtype)
        )
        row[SLOT["between_others"] : SLOT["between_others"] + 3] = _bucket3(
            len(between) - in_between_cands
        )
        words = seg.words[lo:hi]
        present = set(words)
        for f, flag in enumerate(_FLAGS):
            if present & flag:
                row[SLOT["flags"] + f] = 1
        row[SLOT["parenthesised"]] = before and bool(words) and words[0] == "(" and ")" not in words
        (mp, mn), (hp, hn) = seg.runs[m], seg.runs[k]
        row[SLOT["aligned"]] = mn > 1 and mn == hn and mp == hp
        row[SLOT["modifier_in_list"]] = mn > 1
        row[SLOT["head_in_list"]] = hn > 1
        for w in words[:15]:
            row[SLOT["hashed"] + _hash(w)] = 1
        for w in seg.words[hs:he][-3:]:
            row[SLOT["head_words"] + _hash(w) % _WORDS] = 1
        for w in seg.words[ms:me][-3:]:
            row[SLOT["modifier_words"] + _hash(w) % _WORDS] = 1
        row[SLOT["other_kinds"] : SLOT["other_kinds"] + 3] = _bucket3(
            sum(1 for c in cands if seg.types[c] != htype)
        )
        row[SLOT["regimen_chain"]] = _chained(seg, k, m) if before and htype == "Drug" else 0
    none = rows[-1]
    none[SLOT["none"]] = 1
    none[SLOT["none_type"] + MODIFIERS.index(mtype)] = 1
    none[SLOT["between_candidates"] : SLOT["between_candidates"] + 3] = _bucket3(len(cands))
    for w in seg.words[ms:me][-3:]:
        none[SLOT["modifier_words"] + _hash(w) % _WORDS] = 1
    return rows


def _chained(seg: Segment, head: int, m: int) -> bool:
    """Whether only the regimen's modifiers (and commas, "for", "x", "then" …) stand between
    the drug ``head`` and the modifier ``m`` after it."""
    taken: set[int] = set()
    for i, (a, b) in enumerate(seg.spans):
        if seg.spans[head][1] <= a and b <= seg.spans[m][0]:
            if seg.types[i] not in REGIMEN:
                return False
            taken.update(range(a, b))
    gap = range(seg.spans[head][1], seg.spans[m][0])
    return all(w in taken or seg.words[w] in _CHAIN_GLUE for w in gap)


# -- examples ----------------------------------------------------------------------------------
@dataclass
class Example:
    """A modifier in its sentence: its candidate heads' features (the last row: no head) and
    which of them are its gold heads (none: the last)."""

    rows: NDArray[Any]
    gold: NDArray[Any]  # bool, one per row
    pair: tuple[str, str] | None  # (modifier type, gold head type); None: no gold head
    nearest: bool | None = None  # the baseline's head is a gold head (None: no gold head)
    key: tuple[Any, ...] = ()  # (sentence id, modifier index) for end-to-end matching


@dataclass
class Sentence:
    """A sentence of a corpus with its mentions (character spans in ``text``, typed in the
    schema) and its relations (modifier index, head index)."""

    text: str
    entities: list[tuple[int, int, str]]
    relations: list[tuple[int, int]] = field(default_factory=list)
    document: str = ""


def examples(sentence: Sentence, key: Any = None) -> list[Example]:
    """Every modifier of ``sentence`` as an :class:`Example`."""
    ents = sorted(range(len(sentence.entities)), key=lambda i: sentence.entities[i][:2])
    place = {old: new for new, old in enumerate(ents)}
    ordered = [sentence.entities[i] for i in ents]
    seg = segment(sentence.text, 0, len(sentence.text), ordered)
    heads: dict[int, set[int]] = {}
    for mod, head in sentence.relations:
        heads.setdefault(place[mod], set()).add(place[head])
    out = []
    for m, t in enumerate(seg.types):
        if t not in ROLES:
            continue
        cands = candidates(seg, m)
        gold_heads = heads.get(m, set()) & set(cands)
        gold = np.array([c in gold_heads for c in cands] + [not gold_heads], dtype=bool)
        pair = None
        base = None
        if gold_heads:
            first = min(gold_heads, key=lambda c: abs(c - m))
            pair = (t, seg.types[first])
            same = [c for c in cands if seg.types[c] == pair[1]]
            base = _nearest(seg, m, same) in gold_heads
        out.append(Example(features(seg, m, cands), gold, pair, base, (key, ents[m])))
    return out


def _nearest(seg: Segment, m: int, cands: Sequence[int]) -> int | None:
    ms, me = seg.spans[m]

    def gap(h: int) -> tuple[int, int]:
        hs, he = seg.spans[h]
        return (hs - me if hs >= me else ms - he, h)

    return min(cands, key=gap) if cands else None


def nearest_head(text: str, entities: Sequence[Entity]) -> list[tuple[int, int]]:
    """The baseline: each modifier tied to the nearest mention (in words) of a type it may
    modify in its sentence. Pairs of (modifier index, head index) into ``entities``."""
    out = []
    for idx, seg in _segments(text, entities):
        for m, t in enumerate(seg.types):
            if t in ROLES:
                h = _nearest(seg, m, candidates(seg, m))
                if h is not None:
                    out.append((idx[m], idx[h]))
    return out


def _segments(text: str, entities: Sequence[Entity]) -> Iterable[tuple[list[int], Segment]]:
    """The sentences of ``text`` that hold a modifier, with their mentions' indexes."""
    kinds = [e.type for e in entities]
    if not any(k in ROLES for k in kinds):
        return
    order = sorted(range(len(entities)), key=lambda i: (entities[i].start, entities[i].end))
    spans = sentence_spans(text)
    j = 0
    for a, b in spans:
        inside: list[int] = []
        while j < len(order) and entities[order[j]].start < b:
            if entities[order[j]].start >= a:
                inside.append(order[j])
            j += 1
        if len(inside) > 1 and any(kinds[i] in ROLES for i in inside):
            picked = [(entities[i].start, entities[i].end, kinds[i]) for i in inside]
            yield inside, segment(text, a, b, picked)


def from_corpus(sentences: Iterable[Any]) -> list[Sentence]:
    """Corpus sentences (``mslm_core.corpus.Sentence``: their mentions and relations) as
    :class:`Sentence`."""
    return [Sentence(s.text, s.char_mentions(), list(s.relations)) for s in sentences]


def corpus_examples(sentences: Iterable[Sentence]) -> list[Example]:
    return [e for i, s in enumerate(sentences) for e in examples(s, i)]


# -- the scorer --------------------------------------------------------------------------------
class RelationScorer:
    """A trained scorer: two dense layers over :func:`features`, served by ONNX Runtime from
    its graph (``weights``: the trained tensors, which saving keeps beside the graph; a
    scorer loaded from a bundle needs the graph alone, so a service image needs neither
    torch nor safetensors)."""

    def __init__(
        self,
        graph: bytes,
        meta: dict[str, Any] | None = None,
        weights: dict[str, NDArray[Any]] | None = None,
    ):
        self.graph = graph
        self.meta = dict(meta or {})
        self.weights = weights
        features = self.meta.get("features", DIM)
        if features != DIM:
            raise ConfigError(
                f"the relation scorer reads {features} features; this version makes {DIM}"
            )
        self._session: Any = None

    @classmethod
    def from_weights(
        cls, weights: dict[str, NDArray[Any]], meta: dict[str, Any] | None = None
    ) -> RelationScorer:
        tensors = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in weights.items()}
        features = tensors["l1.weight"].shape[1]
        if features != DIM:
            raise ConfigError(
                f"the relation scorer reads {features} features; this version makes {DIM}"
            )
        return cls(_onnx(tensors), {**(meta or {}), "features": features}, tensors)

    # the forward pass --------------------------------------------------------------------
    def scores(self, rows: NDArray[Any]) -> NDArray[Any]:
        """One score per row of :func:`features` (higher: likelier the head)."""
        if not len(rows):
            return np.zeros(0, dtype=np.float32)
        if self._session is None:
            self._session = _session(self.graph)
        out = self._session.run(None, {"features": rows.astype(np.float32, copy=False)})[0]
        return np.asarray(out).reshape(-1)

    def choose(self, rows: NDArray[Any]) -> tuple[int, float]:
        """The chosen row (the last: no head) and its probability."""
        s = self.scores(rows).astype(np.float64)
        p = np.exp(s - s.max())
        p /= p.sum()
        best = int(p.argmax())
        return best, float(p[best])

    # the step ----------------------------------------------------------------------------
    def attach(self, text: str, entities: Sequence[Entity]) -> list[Entity]:
        """``entities`` with each modifier's :class:`~mslm_core.types.Attachment` set to its
        head (a modifier given none keeps ``head`` None)."""
        out = list(entities)
        for idx, seg in _segments(text, entities):
            blocks, owners = [], []
            for m, t in enumerate(seg.types):
                if t in ROLES:
                    cands = candidates(seg, m)
                    if cands:
                        blocks.append(features(seg, m, cands))
                        owners.append((m, cands))
            if not blocks:
                continue
            scores = self.scores(np.concatenate(blocks)).astype(np.float64)
            at = 0
            for rows, (m, cands) in zip(blocks, owners, strict=True):
                s = scores[at : at + len(rows)]
                at += len(rows)
                p = np.exp(s - s.max())
                p /= p.sum()
                best = int(p.argmax())
                if best == len(cands) and seg.types[m] in REGIMEN:
                    # a regimen written right after its drug ("lisinopril 10 mg PO daily"):
                    # tied to it, with the probability the scorer gives that tie
                    chain = [k for k, c in enumerate(cands) if c < m and _chained(seg, c, m)]
                    best = chain[-1] if chain and seg.types[cands[chain[-1]]] == "Drug" else best
                if best == len(cands):
                    continue
                head = entities[idx[cands[best]]]
                mod = idx[m]
                out[mod] = with_fields(
                    out[mod],
                    head=Attachment(
                        head.start, head.end, ROLES[seg.types[m]][0], round(float(p[best]), 4)
                    ),
                )
        return out

    # files ---------------------------------------------------------------------------------
    def save(self, folder: str | Path) -> None:
        """``relations.onnx`` (the graph that serves the scorer), ``relations.json`` (what it
        reads, and how it was trained) and ``relations.safetensors`` (its weights)."""
        from safetensors.numpy import save_file

        if self.weights is None:
            raise ConfigError("a scorer loaded from a bundle has no weights to save")
        where = Path(folder)
        where.mkdir(parents=True, exist_ok=True)
        save_file(self.weights, str(where / "relations.safetensors"))
        (where / "relations.onnx").write_bytes(self.graph)
        meta = {"format": FORMAT, "roles": ROLES, **self.meta, "features": DIM}
        (where / "relations.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, folder: str | Path) -> RelationScorer:
        """The scorer of a bundle (its graph; the bundle's checksums are verified by its
        loader)."""
        where = Path(folder)
        meta_file = where / "relations.json"
        try:
            meta = json.loads(meta_file.read_text(encoding="utf-8"))
            if not isinstance(meta, dict) or meta.get("format") != FORMAT:
                found = meta.get("format") if isinstance(meta, dict) else meta
                raise ConfigError(f"{meta_file}: format {found!r}, not {FORMAT}")
            graph = (where / "relations.onnx").read_bytes()
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{meta_file}: not a relation scorer ({exc})") from exc
        return cls(graph, meta)

    @staticmethod
    def present(folder: str | Path) -> bool:
        return (Path(folder) / "relations.json").is_file()


def _onnx(weights: dict[str, NDArray[Any]]) -> bytes:
    """The scorer as an ONNX graph: features [n, DIM] → scores [n]."""
    from onnx import TensorProto, helper, numpy_helper

    inits = [
        numpy_helper.from_array(weights["l1.weight"].T.copy(), "w1"),
        numpy_helper.from_array(weights["l1.bias"], "b1"),
        numpy_helper.from_array(weights["l2.weight"].T.copy(), "w2"),
        numpy_helper.from_array(weights["l2.bias"], "b2"),
    ]
    nodes = [
        helper.make_node("Gemm", ["features", "w1", "b1"], ["h"]),
        helper.make_node("Relu", ["h"], ["a"]),
        helper.make_node("Gemm", ["a", "w2", "b2"], ["s"]),
        helper.make_node("Flatten", ["s"], ["scores"], axis=0),
    ]
    graph = helper.make_graph(
        nodes,
        "mslm-relations",
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["n", DIM])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, "n"])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return bytes(model.SerializeToString())


def _session(graph: bytes) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])


# -- training ----------------------------------------------------------------------------------
def learnable(examples: Sequence[Example]) -> list[Example]:
    """The examples a scorer can learn from: modifiers with at least one candidate head
    beside "no head" (a small subset of a corpus can annotate relations and have none)."""
    return [e for e in examples if len(e.rows) > 1]


def train(
    train_examples: Sequence[Example],
    *,
    seed: int = 1,
    epochs: int = 60,
    hidden: int = 128,
    lr: float = 1e-3,
    batch: int = 64,
    none_weight: float = 0.5,
    members: int = 3,
) -> RelationScorer:
    """A scorer fitted to ``train_examples``: the softmax over each modifier's candidates and
    "no head", maximising the probability of its gold heads. A modifier whose gold is "no
    head" weighs ``none_weight``: in MACCROBAT many modify a type the schema does not keep (a
    duration of an admission, a frequency of an event), so at full weight the scorer learns to
    leave a regimen's frequency and duration untied, which 0.5 does not (docs/relations.md).

    ``members`` scorers from seeds ``seed``, ``seed + 1000`` … are averaged — one two-layer
    network again, their hidden units side by side and their outputs averaged, so the served
    graph is the same kind: one network's figures swing with its seed, so three (128 hidden
    units each, 60 epochs) are averaged to steady them (docs/relations.md)."""
    usable = learnable(train_examples)
    if not usable:
        raise ConfigError("no modifier with a candidate head to learn relations from")
    nets = [
        _fit(usable, seed + 1000 * k, epochs, hidden, lr, batch, none_weight)
        for k in range(members)
    ]
    weights = {
        "l1.weight": np.concatenate([n["l1.weight"] for n in nets]),
        "l1.bias": np.concatenate([n["l1.bias"] for n in nets]),
        "l2.weight": np.concatenate([n["l2.weight"] for n in nets], axis=1) / members,
        "l2.bias": np.mean([n["l2.bias"] for n in nets], axis=0),
    }
    return RelationScorer.from_weights(
        weights,
        {
            "seed": seed,
            "epochs": epochs,
            "hidden": hidden,
            "members": members,
            "examples": len(usable),
        },
    )


def _fit(
    usable: Sequence[Example],
    seed: int,
    epochs: int,
    hidden: int,
    lr: float,
    batch: int,
    none_weight: float,
) -> dict[str, NDArray[Any]]:
    """One network's weights (see :func:`train`)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    net = torch.nn.Sequential()
    net.add_module("l1", torch.nn.Linear(DIM, hidden))
    net.add_module("relu", torch.nn.ReLU())
    net.add_module("l2", torch.nn.Linear(hidden, 1))
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=1e-4)
    width = max(len(e.rows) for e in usable)
    x = torch.zeros(len(usable), width, DIM)
    gold = torch.zeros(len(usable), width, dtype=torch.bool)
    valid = torch.zeros(len(usable), width, dtype=torch.bool)
    weight = torch.ones(len(usable))
    for i, e in enumerate(usable):
        if e.pair is None:  # its gold is "no head"
            weight[i] = none_weight
        x[i, : len(e.rows)] = torch.from_numpy(e.rows)
        gold[i, : len(e.rows)] = torch.from_numpy(e.gold)
        valid[i, : len(e.rows)] = True
    for _ in range(epochs):
        for idx in torch.randperm(len(usable), generator=gen).split(batch):
            s = net(x[idx]).squeeze(-1).masked_fill(~valid[idx], -1e9)
            per = torch.logsumexp(s, -1) - torch.logsumexp(s.masked_fill(~gold[idx], -1e9), -1)
            loss = (per * weight[idx]).sum() / weight[idx].sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return {k: v.detach().numpy().copy() for k, v in net.state_dict().items()}


def accuracy(scorer: RelationScorer, test: Sequence[Example]) -> dict[str, dict[str, Any]]:
    """Per pair type (``Modifier→Head``; modifiers with a gold head), how often the scorer's
    best candidate (``accuracy``: its attachment, "no head" aside) and the baseline's are a
    gold head, and how often the scorer would have given none (``abstained``)."""
    out: dict[str, dict[str, Any]] = {}
    for e in test:
        if e.pair is None:
            continue
        s = scorer.scores(e.rows)
        best = int(s[:-1].argmax())
        row = out.setdefault(
            f"{e.pair[0]}→{e.pair[1]}", {"n": 0, "right": 0, "baseline": 0, "abstained": 0}
        )
        row["n"] += 1
        row["right"] += bool(e.gold[best])
        row["baseline"] += bool(e.nearest)
        row["abstained"] += bool(s[-1] >= s[best])
    for row in out.values():
        row["accuracy"] = round(row["right"] / row["n"], 4)
        row["baseline_accuracy"] = round(row["baseline"] / row["n"], 4)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["n"]))
