"""The pure parts of serving as a Label Studio ML backend (``api/routes/labelstudio.py``): a
project's labelling config read for its span labels, an annotation's regions read back as
entities, the model's types mapped onto the project's labels, and the prediction scores
that put Label Studio's task order in our active-learning order (``active.rank``).

Label Studio's "Uncertainty sampling" (``Project.sampling``) hands out the unlabelled task
whose current prediction has the LOWEST ``score`` first; :func:`order_scores` turns our
ranking into scores that sort that way.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET  # nosec B405 - see parse_label_config
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .active import Suggestion
from .errors import ConfigError

#: A labelling config is a few kilobytes; anything far larger is not one.
MAX_CONFIG_CHARS = 1 << 20


@dataclass(frozen=True)
class LabelConfig:
    """What a labelling config says about named entities: the ``<Labels name=FROM
    toName=TO>`` control, the ``<Text name=TO value="$KEY">`` it labels, and its labels."""

    from_name: str
    to_name: str
    text_key: str
    labels: tuple[str, ...]


def parse_label_config(xml: str) -> LabelConfig:
    """The first ``<Labels>`` of ``xml`` that labels a ``<Text>``; a ConfigError says what
    is missing. (Expat ≥ 2.4.1, which Python ships, refuses entity-expansion bombs, and the
    config comes from a key holder's Label Studio; its size is bounded here.)"""
    if not isinstance(xml, str) or not xml.strip():
        raise ConfigError("label_config: empty")
    if len(xml) > MAX_CONFIG_CHARS:
        raise ConfigError(f"label_config: over {MAX_CONFIG_CHARS} characters")
    try:
        root = ET.fromstring(xml)  # nosec B314 - see the docstring
    except ET.ParseError as exc:
        raise ConfigError(f"label_config: not XML ({exc})") from None
    texts = {
        el.get("name"): el.get("value", "")
        for el in root.iter()
        if el.tag in ("Text", "HyperText") and el.get("name")
    }
    for el in root.iter("Labels"):
        to_name, from_name = el.get("toName", ""), el.get("name", "")
        value = texts.get(to_name)
        if not from_name or value is None:
            continue
        if not value.startswith("$") or len(value) < 2:
            raise ConfigError(f"label_config: <Text name={to_name!r}> has no value='$field'")
        labels = tuple(v for v in (lb.get("value") for lb in el.iter("Label")) if v)
        if not labels:
            raise ConfigError(f"label_config: <Labels name={from_name!r}> has no <Label>")
        return LabelConfig(from_name, to_name, value[1:], labels)
    raise ConfigError(
        "label_config: no <Labels toName=…> labels a <Text>; this backend finds named "
        "entities in text (see docs/labelstudio.md)"
    )


def annotation_entities(
    text: str, result: Sequence[Any], config: LabelConfig
) -> list[tuple[int, int, str]]:
    """The spans an annotation's ``result`` labels with the project's labels, as
    ``(start, end, label)`` character offsets, sorted; regions of other controls, unknown
    labels and offsets outside the text are left out."""
    labels = set(config.labels)
    out: set[tuple[int, int, str]] = set()
    for item in result:
        if not isinstance(item, Mapping) or item.get("type") != "labels":
            continue
        if item.get("from_name") != config.from_name:
            continue
        value = item.get("value")
        if not isinstance(value, Mapping):
            continue
        start, end, names = value.get("start"), value.get("end"), value.get("labels")
        if not isinstance(start, int) or not isinstance(end, int) or not 0 <= start < end:
            continue
        if end > len(text) or not isinstance(names, list) or not names:
            continue
        label = names[0]
        if isinstance(label, str) and label in labels:
            out.add((start, end, label))
    return sorted(out)


def type_map(model_types: Sequence[str], labels: Sequence[str]) -> dict[str, str]:
    """The model's types that the project labels, mapped onto the project's spelling
    (compared case-insensitively): ``{"Disease": "disease"}``. A type the project lacks is
    absent, and its entities are left out of the predictions."""
    by_fold = {label.casefold(): label for label in labels}
    return {t: by_fold[t.casefold()] for t in model_types if t.casefold() in by_fold}


def order_scores(ranking: Sequence[Suggestion], n: int, diversity: float) -> list[float]:
    """Prediction scores in [0, 1] for ``n`` tasks ranked by ``active.rank``: lower for a
    task ranked earlier, so that Label Studio's uncertainty sampling (lowest score first)
    follows our order. A ranked task's MMR priority lies in [−diversity, 1 − diversity]
    and never rises along the ranking; the score is ``1 − (priority + diversity)``, so a
    lone task's is ``(1 − diversity) × (1 − uncertainty)`` — comparable across requests —
    nudged up by 1e-6 where ties would hide the order."""
    scores = [1.0] * n
    last = -1.0
    for s in ranking:
        score = min(1.0, max(0.0, 1.0 - (s.score + diversity)))
        score = max(score, last + 1e-6)
        scores[s.index] = last = score
    return scores
