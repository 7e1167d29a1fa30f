"""What the three character-offset formats share (BioC, Label Studio, PubTator):
:class:`CharSpan` and :func:`sentence_from_spans`, which turn validated character spans into a
:class:`~mslm_core.corpus.model.Sentence` the way JSONL does, and :class:`JsonStream`, the
streaming reader of the two JSON formats (one element at a time, with line numbers for the
errors)."""

from __future__ import annotations

import codecs
import json
import logging
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import IO, TYPE_CHECKING, Any

from ..errors import CorpusError
from ..text import word_spans
from ._io import MAX_LINE_BYTES, IssueCollector, _type_name
from .model import Mention, Sentence

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CharSpan:
    """An entity as character offsets into a text (end exclusive), and where it was found:
    ``where`` is whatever the reader's ``report`` callback understands (a JSON path, a line)."""

    start: int
    end: int
    label: str
    where: Any = None
    concept: str | None = None
    region: Any = None  # the reader's id of the region it was read from (Label Studio)


#: ``report(where, message)``: record a problem found at ``where``.
Report = Callable[[Any, str], None]


def label_problem(label: object, name: str = "type") -> str | None:
    """Why ``label`` cannot be an entity type (the rules of the JSONL reader), or ``None``."""
    if not isinstance(label, str):
        return f"{name!r} must be a string, found {_type_name(label)}"
    if not label.strip():
        return f"{name!r} is empty"
    if any(c.isspace() for c in label):
        return f"{name!r} {label!r} contains whitespace"
    if not label.isprintable():
        return f"{name!r} {label!r} contains control characters"
    return None


def sentence_from_spans(
    text: str, spans: Sequence[CharSpan], report: Report
) -> tuple[Sentence | None, int]:
    """The sentence of ``text`` with ``spans`` as mentions, and how many spans were trimmed.

    Spans must already lie inside ``text``. Leading and trailing whitespace is trimmed from
    each span (counted); a span of whitespace only, or one overlapping another, is reported
    and the sentence is ``None``; an exact duplicate (same offsets, same type) is kept once.
    Words come from :func:`~mslm_core.text.word_spans` with every span boundary as a cut, as
    in JSONL. A text without words gives ``None`` too.
    """
    trimmed: list[CharSpan] = []
    stripped = 0
    ok = True
    for span in spans:
        start, end = span.start, span.end
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if start == end:
            report(span.where, f"entity [{span.start}, {span.end}) is only whitespace")
            ok = False
            continue
        stripped += (start, end) != (span.start, span.end)
        trimmed.append(replace(span, start=start, end=end))
    trimmed.sort(key=lambda s: (s.start, s.end, s.label))
    kept: list[CharSpan] = []
    reach: CharSpan | None = None  # the kept span reaching furthest so far
    for span in trimmed:
        if kept and (span.start, span.end, span.label) == (
            kept[-1].start,
            kept[-1].end,
            kept[-1].label,
        ):
            continue
        if reach is not None and span.start < reach.end:
            report(
                span.where,
                f"entity [{span.start}, {span.end}) {span.label} overlaps the entity "
                f"[{reach.start}, {reach.end}) {reach.label}",
            )
            ok = False
        kept.append(span)
        if reach is None or span.end > reach.end:
            reach = span
    if not ok:
        return None, stripped
    words = word_spans(text, boundaries=[b for s in kept for b in (s.start, s.end)])
    if not words:
        return None, stripped
    starts = {a: i for i, (a, _) in enumerate(words)}
    ends = {b: i + 1 for i, (_, b) in enumerate(words)}
    mentions = [Mention(starts[s.start], ends[s.end], s.label, s.concept) for s in kept]
    return Sentence(text, words, mentions), stripped


_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()

JsonPath = tuple[str | int, ...]


def skip_json_space(text: str, pos: int) -> int:
    """The first position at or after ``pos`` that is not JSON whitespace."""
    match = _WS.match(text, pos)
    return match.end() if match else pos


def json_field(path: JsonPath, prefix: str = "") -> str:
    """``("annotations", 0, "value")`` → ``prefix + "annotations[0].value"``."""
    out = prefix
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else step)
    return out


@dataclass(frozen=True)
class JsonElement:
    """One value read by :class:`JsonStream`: its source text and the line it starts on."""

    text: str
    line: int

    def line_of(self, path: JsonPath) -> int:
        """The line of the value at ``path`` inside this element; where the path cannot be
        followed (a missing key), the line of the last value on it that exists."""
        pos = 0
        for step in path:
            found = _child(self.text, pos, step)
            if found is None:
                break
            pos = found
        return self.line + self.text.count("\n", 0, pos)


def _child(text: str, pos: int, step: str | int) -> int | None:
    """Where the value at ``step`` (an index or a key) of the array or object starting at
    ``pos`` starts; ``None`` when it has none."""
    try:
        opener, pos = text[pos], skip_json_space(text, pos + 1)
        if isinstance(step, int):
            if opener != "[":
                return None
            for _ in range(step):
                pos = skip_json_space(text, _DECODER.raw_decode(text, pos)[1])
                if text[pos] != ",":
                    return None
                pos = skip_json_space(text, pos + 1)
            return None if text[pos] == "]" else pos
        if opener != "{":
            return None
        while text[pos] == '"':
            key, pos = _DECODER.raw_decode(text, pos)
            pos = skip_json_space(text, skip_json_space(text, pos) + 1)  # past the colon
            if key == step:
                return pos
            pos = skip_json_space(text, _DECODER.raw_decode(text, pos)[1])
            if text[pos] != ",":
                return None
            pos = skip_json_space(text, pos + 1)
    except (ValueError, IndexError, RecursionError):
        pass
    return None


class JsonStream:
    """Reads a JSON file value by value, so that an array of tasks or documents is never held
    whole: memory stays at one element (at most :data:`MAX_LINE_BYTES` of text) plus a read
    chunk. Every problem names its line; a syntax error stops the reading."""

    CHUNK = 1 << 20

    def __init__(self, path: str, handle: IO[bytes], issues: IssueCollector) -> None:
        self.path, self.handle, self.issues = path, handle, issues
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self._buf = ""
        self._pos = 0
        self._line = 1  # the line of _buf[0]
        self._mark = (0, 1)  # a position in _buf and its line: counting goes on from there
        self._eof = False
        self._started = False

    def line_at(self, pos: int) -> int:
        """The line of ``_buf[pos]``."""
        at, line = self._mark if pos >= self._mark[0] else (0, self._line)
        line += self._buf.count("\n", at, pos)
        self._mark = (pos, line)
        return line

    def fail(self, message: str, pos: int | None = None) -> CorpusError:
        """Add ``message`` at ``pos`` (default: the current position); the error to raise."""
        self.issues.add(self.line_at(self._pos if pos is None else pos), message)
        return CorpusError(self.issues.items)

    def _fill(self) -> None:
        if self._pos > self.CHUNK:  # drop what has been read, keeping the line count
            self._line = self.line_at(self._pos)
            self._buf, self._pos, self._mark = self._buf[self._pos :], 0, (0, self._line)
        raw = self.handle.read(self.CHUNK)
        self._eof = not raw
        try:
            text = self._utf8.decode(raw, final=self._eof)
        except UnicodeDecodeError as e:
            line = self.line_at(len(self._buf)) + raw.count(b"\n", 0, max(e.start, 0))
            self.issues.add(line, "invalid UTF-8")
            raise CorpusError(self.issues.items) from None
        if not self._started and text:
            self._started = True
            text = text.removeprefix("\ufeff")
        self._buf += text

    def peek(self) -> str:
        """The next non-whitespace character ("" at the end of the file)."""
        while True:
            self._pos = skip_json_space(self._buf, self._pos)
            if self._pos < len(self._buf):
                return self._buf[self._pos]
            if self._eof:
                return ""
            self._fill()

    def value(self) -> tuple[Any, JsonElement]:
        """The next JSON value, and its text and line."""
        self.peek()
        start = self._pos
        while True:
            try:
                value, end = _DECODER.raw_decode(self._buf, start)
            except RecursionError:
                raise self.fail("JSON nested too deeply", start) from None
            except json.JSONDecodeError as e:
                # an error well before the end of what has been read is not a value cut by
                # the chunk boundary (an unterminated string may be one, wherever it starts)
                cut = e.pos >= len(self._buf) - 16 or e.msg.startswith("Unterminated string")
                if self._eof or not cut:
                    raise self.fail(f"invalid JSON: {e.msg}", e.pos) from None
                if len(self._buf) - start > MAX_LINE_BYTES:
                    raise self.fail(
                        f"a JSON value longer than {MAX_LINE_BYTES >> 20} MiB", start
                    ) from None
                start -= self._pos
                self._fill()
                start += self._pos
                continue
            except ValueError as e:  # an integer of more digits than Python converts
                raise self.fail(f"invalid JSON: {e}", start) from None
            if end >= len(self._buf) and not self._eof:  # a number may go on in the next chunk
                if len(self._buf) - start > MAX_LINE_BYTES:
                    raise self.fail(
                        f"a JSON value longer than {MAX_LINE_BYTES >> 20} MiB", start
                    ) from None
                start -= self._pos
                self._fill()
                start += self._pos
                continue
            self._pos = end
            return value, JsonElement(self._buf[start:end], self.line_at(start))

    def expect(self, char: str, what: str) -> None:
        found = self.peek()
        if found != char:
            raise self.fail(
                f"invalid JSON: expected {what}, found {found or 'the end of the file'}"
            )
        self._pos += 1

    def array(self) -> Iterator[tuple[int, Any, JsonElement]]:
        """``(index, value, element)`` for each element of the array that comes next."""
        self.expect("[", "'['")
        if self.peek() == "]":
            self._pos += 1
            return
        index = 0
        while True:
            value, element = self.value()
            yield index, value, element
            index += 1
            if self.peek() != ",":
                self.expect("]", "',' or ']'")
                return
            self._pos += 1

    def object_keys(self) -> Iterator[str]:
        """The keys of the object that comes next; the caller reads each key's value (with
        :meth:`value` or :meth:`array`) before asking for the next key."""
        self.expect("{", "'{'")
        if self.peek() == "}":
            self._pos += 1
            return
        while True:
            if self.peek() != '"':
                raise self.fail("invalid JSON: expected a key")
            key, _ = self.value()
            self.expect(":", "':'")
            yield key
            if self.peek() != ",":
                self.expect("}", "',' or '}'")
                return
            self._pos += 1

    def end(self) -> None:
        """Refuse anything after the top-level value."""
        if self.peek():
            raise self.fail("invalid JSON: unexpected content after the top-level value")


def json_reporter(issues: IssueCollector, element: JsonElement, prefix: str) -> Report:
    """A :data:`Report` for paths inside ``element``, named from ``prefix``."""

    def report(where: JsonPath, message: str) -> None:
        issues.add(element.line_of(where), message, json_field(where, prefix))

    return report


def json_array_lines(head: str, items: Sequence[Any], tail: str) -> Iterator[str]:
    """``head``, then the items one per line separated by commas, then ``tail``: compact, and
    a reader's line numbers name the item."""
    yield head
    for i, item in enumerate(items):
        yield ("" if i == 0 else ",\n") + json.dumps(item, ensure_ascii=False)
    yield tail


#: a relation as a reader finds it: each end's (where it is written, the region id it names),
#: the modifier's first unless the types say otherwise, and its direction ("left": reversed)
Link = tuple[tuple[tuple[Any, Any], tuple[Any, Any]], Any]


def region_pairs(
    spans: list[CharSpan], links: list[Link]
) -> tuple[list[tuple[CharSpan, CharSpan]], int]:
    """The (modifier, head) regions of relations between regions' ids (``CharSpan.region``):
    the end of a modifier type (Dosage, Result…: ``mslm_core.relations``) is the modifier
    and the other its head; between two others, the first end modifies the second (the
    reverse for the direction ``"left"``). Returns them and how many relations name an id
    that is no region's (not kept: the reader counts them in its warning)."""
    from ..relations import ROLES

    by_id = {span.region: span for span in spans if span.region is not None}
    out = []
    unresolved = 0
    for ends, direction in links:
        found = [
            by_id[value]
            for _, value in ends
            if not isinstance(value, (dict, list)) and value in by_id
        ]
        if len(found) < 2:
            unresolved += 1
            continue
        a, b = found if direction != "left" else found[::-1]
        if b.label in ROLES and a.label not in ROLES:
            a, b = b, a
        out.append((a, b))
    return out, unresolved


def mention_pairs(
    mentions: list[tuple[int, int, str]], links: list[tuple[CharSpan, CharSpan]]
) -> list[tuple[int, int]]:
    """Region pairs as (modifier, head) indexes of the sentence's mentions (a region is the
    mention inside it: regions are trimmed of their spaces)."""

    def index(span: CharSpan) -> int | None:
        for i, (a, b, label) in enumerate(mentions):
            if span.start <= a and b <= span.end and label == span.label:
                return i
        return None

    out = []
    for m, h in links:
        i, j = index(m), index(h)
        if i is not None and j is not None and i != j and (i, j) not in out:
            out.append((i, j))
    return out
