"""The corpus formats, each declared once by its own module: ``register(Format(...))`` at the
bottom of ``conll.py``, ``jsonl.py``, ``labelstudio.py``, ``bioc.py`` and ``pubtator.py`` (the
way spaCy's registries hold its readers). Everything that lists formats — the names a reader
accepts, the extensions that imply one, the extension a stored copy gets, the content sniffer,
the prediction formats of ``mslm annotate`` and ``POST /v1/annotate`` — reads this registry, so
adding a format is its module and the line in ``corpus/__init__.py`` that imports it
(docs/architecture.md, "How to add a format")."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..types import Entity
from .model import Corpus, Sink


class Fill(Protocol):
    def __call__(self, path: str, sink: Sink, /) -> None: ...


class FillTrusting(Protocol):
    """A reader that can replace a mention's text by the text at its offsets
    (``trust_offsets``: PubTator's mention column)."""

    def __call__(self, path: str, sink: Sink, trust_offsets: bool = False, /) -> None: ...


@dataclass(frozen=True)
class RenderOptions:
    """``model`` names the model that made the predictions; ``ids`` name the texts (default:
    their indices); ``from_name``/``to_name``: the names of a Label Studio labelling config
    (other formats ignore them); ``service``: what an answer of the service says beside its
    entities — ``{"model": …, "linking": …, "context": …, "languages": […]}``, asked only by
    a format that shows it (this service's ``json``)."""

    model: str
    ids: Sequence[str] | None = None
    from_name: str = "label"
    to_name: str = "text"
    service: Callable[[], dict[str, Any]] | None = None


#: Predictions (one list of entities per text) as a document of the format.
RenderPredictions = Callable[
    [Sequence[str], Sequence[Sequence[Entity]], RenderOptions],
    str | dict[str, Any] | list[dict[str, Any]],
]


@dataclass(frozen=True)
class Predictions:
    """How a format renders predictions: ``render`` returns text (served as ``media_type``) or
    a JSON document; ``help``: what it is, in a few words (the API's document, ``mslm annotate
    --help``)."""

    render: RenderPredictions
    media_type: str = "application/json"
    help: str = ""


@dataclass(frozen=True)
class Format:
    """A corpus format.

    ``extensions``: the file extensions (lower case, with the dot) that imply it (no two formats
    claim one); ``also_reads``: extensions of other formats that a file of this one may carry
    (Label Studio and BioC exports are ``.json``, PubTator files often ``.txt``) — reading such
    a file, its content chooses. ``suffix``: the extension a stored copy gets (read back as
    this format). ``sniff``: whether a file's first non-blank bytes (up to
    1 MiB, a byte-order mark removed) look like this format; the formats are asked in the
    order of ``sniff_rank`` and the first to say yes wins (None: this format is the fallback).
    ``fill_trusting``: the reader again, for a format whose reader takes ``trust_offsets``."""

    name: str
    fill: Fill
    write: Callable[[Corpus, str], None]
    extensions: tuple[str, ...]
    suffix: str
    sniff: Callable[[bytes], bool] | None
    also_reads: tuple[str, ...] = ()
    sniff_rank: int = 0
    fill_trusting: FillTrusting | None = None
    predictions: Predictions | None = None


_FORMATS: dict[str, Format] = {}


def register(fmt: Format) -> Format:
    """Add ``fmt`` to the registry (once per name)."""
    if fmt.name in _FORMATS:
        raise ValueError(f"corpus format {fmt.name!r} is registered twice")
    if fmt.suffix not in fmt.extensions + fmt.also_reads:
        raise ValueError(f"corpus format {fmt.name!r}: its suffix is not among its extensions")
    taken = {ext: f.name for f in _FORMATS.values() for ext in f.extensions}
    for ext in fmt.extensions:
        if ext in taken:
            raise ValueError(f"corpus format {fmt.name!r}: {ext} already implies {taken[ext]}")
    _FORMATS[fmt.name] = fmt
    return fmt


def formats() -> dict[str, Format]:
    """The registered formats by name, in registration order."""
    return dict(_FORMATS)


def get(name: str) -> Format:
    return _FORMATS[name]


def fill(name: str, path: str, sink: Sink, trust_offsets: bool = False) -> None:
    """Read ``path`` in format ``name`` into ``sink`` (``trust_offsets``: for the formats
    whose reader takes it)."""
    fmt = _FORMATS[name]
    if trust_offsets and fmt.fill_trusting is not None:
        fmt.fill_trusting(path, sink, True)
    else:
        fmt.fill(path, sink)


def sniff(head: bytes) -> str:
    """The format whose ``sniff`` first recognises ``head`` (see :class:`Format`)."""
    fallback = None
    for fmt in sorted(_FORMATS.values(), key=lambda f: f.sniff_rank):
        if fmt.sniff is None:
            fallback = fmt.name
        elif fmt.sniff(head):
            return fmt.name
    if fallback is None:
        raise LookupError("no corpus format is the sniffer's fallback")
    return fallback
