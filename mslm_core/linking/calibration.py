"""How likely a linked concept is right, and when to give none: a logistic model over what the
candidates look like (the top score, its margin over the next, an exact name, a name several
concepts share, the text's length), fitted on the gold mentions of development corpora, and
per entity type the lowest confidence at which the concepts given reach a target precision on
them. "Not linked" beats a wrong code: below its type's threshold an entity gets no concept
(its candidates are still listed).

Saved as JSON beside its vocabulary (``mesh-default.calibration.json``); ``mslm vocab
calibrate`` fits one for a site's vocabulary on its own annotated corpora."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..types import LinkedConcept

#: What the confidence is computed from, in order (see :func:`features`).
FEATURES = ("score", "margin", "exact", "shared_exact", "log_length")
#: The threshold of a type the calibration has too few examples of.
ANY = "*"
VERSION = 1


def features(found: Sequence[LinkedConcept], query: str) -> list[float]:
    """The top candidate's score, its margin over the second, whether it is an exact name,
    whether a second concept has that exact name too, and log(1 + the text's length)."""
    first = found[0].score
    second = found[1].score if len(found) > 1 else 0.0
    exact = float(first >= 1.0)
    return [first, first - second, exact, float(exact and second >= 1.0), math.log1p(len(query))]


@dataclass(frozen=True)
class LinkCalibration:
    """``weights`` and ``bias`` of the logistic model over :data:`FEATURES`; ``thresholds``:
    per entity type the lowest confidence given as a concept (:data:`ANY`: any other type);
    ``source``: what it was fitted on; ``report``: the figures on that data."""

    weights: tuple[float, ...]
    bias: float
    thresholds: Mapping[str, float]
    source: str = ""
    report: Mapping[str, Any] = field(default_factory=dict)

    def confidence(self, found: Sequence[LinkedConcept], query: str) -> float:
        z = self.bias + sum(
            w * x for w, x in zip(self.weights, features(found, query), strict=True)
        )
        return round(1.0 / (1.0 + math.exp(-z)), 4)

    def threshold(self, entity_type: str | None) -> float:
        return float(self.thresholds.get(entity_type or ANY, self.thresholds[ANY]))

    def to_json(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "features": list(FEATURES),
            "weights": list(self.weights),
            "bias": self.bias,
            "thresholds": dict(self.thresholds),
            "source": self.source,
            "report": dict(self.report),
        }

    def save(self, path: str | os.PathLike[str]) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=1) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> LinkCalibration:
        """What :meth:`save` wrote; a ConfigError naming the file and field otherwise."""
        where = os.fspath(path)
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{where}: not a linking calibration ({exc})") from None
        if not isinstance(data, dict) or data.get("version") != VERSION:
            raise ConfigError(f"{where}: not a linking calibration of version {VERSION}")
        if data.get("features") != list(FEATURES):
            raise ConfigError(f"{where}: field 'features' must be {list(FEATURES)}")
        weights, thresholds = data.get("weights"), data.get("thresholds")
        if not isinstance(weights, list) or len(weights) != len(FEATURES):
            raise ConfigError(f"{where}: field 'weights' must hold {len(FEATURES)} numbers")
        if not isinstance(thresholds, dict) or ANY not in thresholds:
            raise ConfigError(f"{where}: field 'thresholds' must map types (and '*') to numbers")
        try:
            return cls(
                tuple(float(w) for w in weights),
                float(data.get("bias", 0.0)),
                {str(k): float(v) for k, v in thresholds.items()},
                str(data.get("source", "")),
                dict(data.get("report") or {}),
            )
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: weights, bias and thresholds must be numbers") from None


@dataclass(frozen=True)
class Example:
    """A gold mention as linked: its candidates, the text looked up, its type, its gold ids."""

    found: Sequence[LinkedConcept]
    query: str
    type: str
    gold: frozenset[str]

    @property
    def right(self) -> bool:
        return bool(self.found) and self.found[0].id in self.gold


def fit(
    examples: Sequence[Example],
    precision: float = 0.93,
    min_examples: int = 100,
    aliases: Mapping[str, str] | None = None,
    source: str = "",
) -> LinkCalibration:
    """The calibration of ``examples`` (gold mentions with candidates): the logistic model,
    then per type with at least ``min_examples`` the lowest confidence whose concepts reach
    ``precision`` on them (every type together: :data:`ANY`). ``aliases``: another type →
    the type whose threshold it takes (``Problem → Disease``)."""
    from sklearn.linear_model import LogisticRegression

    usable = [e for e in examples if e.found]
    if len({e.right for e in usable}) < 2:
        raise ConfigError("calibration needs linked mentions both right and wrong")
    x = [features(e.found, e.query) for e in usable]
    y = [int(e.right) for e in usable]
    model = LogisticRegression(C=1.0, max_iter=1000).fit(x, y)
    calibration = LinkCalibration(
        tuple(float(w) for w in model.coef_[0]), float(model.intercept_[0]), {ANY: 0.5}, source
    )
    scored = [(calibration.confidence(e.found, e.query), e) for e in usable]
    thresholds = {ANY: _threshold([(c, e.right) for c, e in scored], precision)}
    report: dict[str, Any] = {"precision_target": precision, "types": {}}
    for kind in sorted({e.type for e in usable}):
        pairs = [(c, e.right) for c, e in scored if e.type == kind]
        if len(pairs) >= min_examples:
            thresholds[kind] = _threshold(pairs, precision)
        report["types"][kind] = _at(pairs, thresholds.get(kind, thresholds[ANY]))
    report["all"] = _at([(c, e.right) for c, e in scored], thresholds[ANY])
    for other, kind in (aliases or {}).items():
        if kind in thresholds:
            thresholds[other] = thresholds[kind]
    return LinkCalibration(calibration.weights, calibration.bias, thresholds, source, report)


def _threshold(pairs: Sequence[tuple[float, bool]], precision: float) -> float:
    """The lowest confidence at which the pairs at or above it are right at ``precision``
    (1.0 when none is: nothing is linked)."""
    best = 1.0
    right = total = 0
    ordered = sorted(pairs, key=lambda p: -p[0])
    for i, (confidence, ok) in enumerate(ordered):
        right, total = right + ok, total + 1
        last_of_its_value = i + 1 == len(ordered) or ordered[i + 1][0] < confidence
        if last_of_its_value and right / total >= precision:
            best = confidence
    return best


def _at(pairs: Sequence[tuple[float, bool]], threshold: float) -> dict[str, float]:
    kept = [ok for c, ok in pairs if c >= threshold]
    return {
        "mentions": len(pairs),
        "accuracy_at_1": round(sum(ok for _, ok in pairs) / max(len(pairs), 1), 4),
        "threshold": threshold,
        "coverage": round(len(kept) / max(len(pairs), 1), 4),
        "precision": round(sum(kept) / max(len(kept), 1), 4),
    }


def precision_coverage(
    pairs: Sequence[tuple[float, bool]], steps: int = 10
) -> list[dict[str, float]]:
    """Precision of the most confident share of the mentions, at each tenth of coverage."""
    ordered = sorted(pairs, key=lambda p: -p[0])
    out = []
    for k in range(1, steps + 1):
        n = max(1, round(len(ordered) * k / steps))
        top = ordered[:n]
        out.append(
            {
                "coverage": round(n / max(len(ordered), 1), 4),
                "precision": round(sum(ok for _, ok in top) / max(len(top), 1), 4),
                "confidence": top[-1][0] if top else 1.0,
            }
        )
    return out


def gold_examples(linker: Any, corpora: Sequence[Any]) -> list[Example]:
    """Every gold mention with a concept id in ``corpora`` (each sentence one text: a PubTator
    title or abstract), linked by ``linker`` from its text as its type: the examples
    :func:`fit` reads. Composite ids count as right when the top candidate is one of them;
    mentions without an id (BC5CDR's ``-1``) are left out."""
    from .vocabulary import COMPOSITE, NO_ID

    out: list[Example] = []
    for corpus in corpora:
        for sentence in corpus:
            mentions = [m for m in sentence.linked_char_mentions() if m[3] and m[3] != NO_ID]
            if not mentions:
                continue
            spans = [(a, b) for a, b, _, _ in mentions]
            kinds = [kind for _, _, kind, _ in mentions]
            queries = linker._lookups(sentence.text, spans)
            found = linker.candidates(queries, kinds)
            for (_, _, kind, gold), query, candidates in zip(mentions, queries, found, strict=True):
                out.append(Example(candidates, query, kind, frozenset(COMPOSITE.split(gold))))
    return out
