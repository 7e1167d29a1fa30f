"""A notes export's bytes as text.

Its encoding is the one given (``encoding``), else the one its byte-order mark names (UTF-8,
UTF-16, UTF-32), else UTF-8 when every byte decodes as UTF-8, else charset-normalizer's best
guess on the first MiB (a detector kept up to date with the encodings of real exports: cp1252,
Latin-1, Shift JIS…). :func:`to_utf8` then writes the file as UTF-8 for the readers of
``mslm_core.notes``. A byte that does not decode in the encoding chosen is replaced by U+FFFD
and reported with its line and byte offset: the note that holds it is kept, and said to.
"""

from __future__ import annotations

import codecs
import contextvars
import itertools
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from .errors import ConfigError

#: Byte-order marks, the longer first (UTF-32-LE's begins with UTF-16-LE's).
BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
#: Encodings whose lines cannot be cut at a newline byte (a character spans bytes around it).
WIDE = frozenset({"utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be"})
SAMPLE_BYTES = 1 << 20
CHUNK_BYTES = 1 << 20
#: Undecodable bytes reported one by one; past these, counted.
MAX_REPORTED = 100


#: How an encoding was told: given, a byte-order mark, the bytes all (or nearly) UTF-8, a guess.
DetectedBy = Literal["given", "bom", "utf-8", "charset-normalizer"]


@dataclass(frozen=True)
class Encoding:
    """How a file was read: ``name`` (Python's codec name), ``detected_by`` (``given``,
    ``bom``, ``utf-8`` or ``charset-normalizer``) and, for a guess, charset-normalizer's
    confidence (1 - its measure of chaos in the decoded sample)."""

    name: str
    detected_by: DetectedBy
    confidence: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Undecodable:
    """A byte of the file (``byte``: its offset from the file's start) on line ``line`` that
    does not decode in the file's encoding."""

    line: int
    byte: int


_ERRORS: contextvars.ContextVar[list[int]] = contextvars.ContextVar("undecodable")


def _replace_and_note(exc: UnicodeError) -> tuple[str, int]:
    """The ``mslm-undecodable`` error handler: U+FFFD for each undecodable byte run, where it
    starts noted (counted from the end of the bytes being decoded, which may begin with
    bytes an incremental decoder kept from the last piece)."""
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    _ERRORS.get().append(exc.start - len(exc.object))  # from the end of what is decoded
    return "\ufffd", exc.end


codecs.register_error("mslm-undecodable", _replace_and_note)


def codec_name(given: str) -> str:
    """Python's name of the encoding ``given``; a ConfigError naming it when Python has none."""
    try:
        return codecs.lookup(given).name
    except LookupError:
        raise ConfigError(
            f"encoding {given[:40]!r}: not an encoding Python knows "
            "(utf-8, utf-8-sig, utf-16, latin-1, cp1252, …)"
        ) from None


def _utf8_share(path: Path) -> float:
    """How much of ``path`` reads as UTF-8: 1.0 when all of it does; else the share of its
    multi-byte sequences that are valid UTF-8 (text in an 8-bit encoding has almost none: its
    accented letters are single bytes, and those are invalid UTF-8)."""
    decoder = codecs.getincrementaldecoder("utf-8")("mslm-undecodable")
    valid = invalid = 0
    with open(path, "rb") as handle:
        for raw in itertools.chain(iter(lambda: handle.read(CHUNK_BYTES), b""), [b""]):
            token = _ERRORS.set([])
            try:
                text = decoder.decode(raw, final=not raw)
                invalid += len(_ERRORS.get())
            finally:
                _ERRORS.reset(token)
            # non-ASCII characters decoded, at C speed (a U+FFFD is a replacement, not valid)
            valid += len(text) - len(text.encode("ascii", "ignore")) - text.count("\ufffd")
    return 1.0 if invalid == 0 else valid / (valid + invalid)


#: Of detections that fit equally well, the encodings of most Western exports first.
PREFERRED = ("cp1252", "iso8859-1")


def detect(path: Path, given: str | None = None, filename: str = "notes") -> Encoding:
    """The encoding ``path`` is read in (the module's docstring says how it is chosen)."""
    if given:
        return Encoding(codec_name(given), "given")
    with open(path, "rb") as handle:
        sample = handle.read(SAMPLE_BYTES)
    for bom, name in BOMS:
        if sample.startswith(bom):
            return Encoding(name, "bom")
    share = _utf8_share(path)
    if share == 1.0:
        return Encoding("utf-8", "utf-8")
    if share >= 0.5:  # UTF-8 with a few bad bytes: read as UTF-8, the bad bytes reported
        return Encoding("utf-8", "utf-8", round(share, 3))
    from charset_normalizer import from_bytes

    matches = list(from_bytes(sample))
    if not matches:
        raise ConfigError(
            f"{filename}: not text in an encoding that can be told from its bytes; "
            "give its encoding (encoding=…)"
        )
    best = min(matches, key=lambda m: (m.chaos, -m.coherence))
    ties = [m for m in matches if (m.chaos, m.coherence) == (best.chaos, best.coherence)]
    names = [codec_name(m.encoding) for m in ties]
    name = next((n for n in PREFERRED if n in names), names[0])
    return Encoding(name, "charset-normalizer", round(1 - best.chaos, 3))


def to_utf8(source: Path, target: Path, encoding: str) -> tuple[list[Undecodable], int]:
    """``source`` in ``encoding`` written to ``target`` as UTF-8 (a byte-order mark dropped);
    returns the first :data:`MAX_REPORTED` undecodable bytes and how many there were."""
    found: list[Undecodable] = []
    count = 0
    wide = codecs.lookup(encoding).name in WIDE
    decoder = codecs.getincrementaldecoder(encoding)("mslm-undecodable")
    line, fed = 1, 0
    with open(source, "rb") as src, open(target, "w", encoding="utf-8", newline="") as out:
        # lines (cut at the newline byte) where a character never spans one; else chunks
        pieces = iter(lambda: src.read(CHUNK_BYTES), b"") if wide else src
        for raw in itertools.chain(pieces, [b""]):
            token = _ERRORS.set([])
            try:
                text = decoder.decode(raw, final=not raw)
                starts = _ERRORS.get()
            finally:
                _ERRORS.reset(token)
            if fed == 0:
                text = text.removeprefix("\ufeff")
            # the n-th replacement made here is the n-th U+FFFD of the text: its line
            at = -1
            for start in starts:
                count += 1
                at = text.find("\ufffd", at + 1)
                if len(found) < MAX_REPORTED:
                    where = line + text.count("\n", 0, max(at, 0))
                    found.append(Undecodable(where, fed + len(raw) + start))
            out.write(text)
            line += text.count("\n")
            fed += len(raw)
    return found, count
