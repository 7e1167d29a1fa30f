"""The note-style check set (``benchmarks/data/note-style``): notes in an inline markup,
read into texts with character offsets (GUIDELINES.md there says how they are written).

    ### NOTE-ID | STYLE
    <<VS:>> [[BP|Test]] [[168/94|Result]], denies [[N/V|Problem|negated]]

``[[span|Type]]`` or ``[[span|Type|attr,attr]]`` an entity, ``<<HEADER>>`` a section header.
Errors name the file and line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

TYPES = ("Problem", "Drug", "Dosage", "Test", "Result", "Procedure", "Anatomy")
ATTRIBUTES = ("negated", "possible", "hypothetical", "historical", "family", "allergy")
STYLES = ("ed_triage", "med_list", "radiology", "discharge", "progress", "ocr")
#: the types context attributes are given to (allergy: Drug)
CONTEXT_TYPES = ("Problem", "Test", "Procedure")

_HEAD = re.compile(r"^### +(?P<id>[A-Za-z0-9_.-]+) *\| *(?P<style>[a-z_]+) *$")
_MARK = re.compile(
    r"\[\[(?P<span>[^\[\]|]+)\|(?P<type>[A-Za-z]+)(?:\|(?P<attrs>[a-z, ]*))?\]\]"
    r"|<<(?P<header>[^<>]+)>>"
)
_STRAY = ("[[", "]]", "<<", ">>")


class MarkupError(ValueError):
    pass


@dataclass(frozen=True)
class Mention:
    start: int
    end: int
    text: str
    type: str
    attributes: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Header:
    start: int
    end: int
    text: str


@dataclass
class Note:
    id: str
    style: str
    text: str
    source: str  # file:line of its ### line
    mentions: list[Mention] = field(default_factory=list)
    headers: list[Header] = field(default_factory=list)

    def sentences(self) -> int:
        """Its lines with words, and the sentences inside a line (a full stop, ! or ? before
        a space and a capital)."""
        n = 0
        for line in self.text.splitlines():
            if line.strip():
                n += 1 + len(re.findall(r"[.!?] +(?=[A-Z])", line.strip()))
        return n


def _line(text: str, where: str) -> tuple[str, list[Mention], list[Header]]:
    out: list[str] = []
    mentions: list[Mention] = []
    headers: list[Header] = []
    at = 0
    length = 0
    for m in _MARK.finditer(text):
        plain = text[at : m.start()]
        if any(mark in plain for mark in _STRAY):
            raise MarkupError(f"{where}: malformed markup near {plain.strip()[:40]!r}")
        out.append(plain)
        length += len(plain)
        if m.group("header") is not None:
            h = m.group("header")
            headers.append(Header(length, length + len(h), h))
            out.append(h)
            length += len(h)
        else:
            span, kind = m.group("span"), m.group("type")
            if kind not in TYPES:
                raise MarkupError(f"{where}: type {kind!r} of {span!r} is not one of {TYPES}")
            if span != span.strip():
                raise MarkupError(f"{where}: span {span!r} starts or ends with a space")
            attrs = frozenset(a.strip() for a in (m.group("attrs") or "").split(",") if a.strip())
            bad = attrs - set(ATTRIBUTES)
            if bad:
                raise MarkupError(f"{where}: attribute {sorted(bad)[0]!r} of {span!r} is unknown")
            if attrs and kind not in CONTEXT_TYPES and attrs != {"allergy"}:
                raise MarkupError(f"{where}: {kind} {span!r} takes no context attribute")
            if "allergy" in attrs and kind != "Drug":
                raise MarkupError(f"{where}: only a Drug takes 'allergy' ({span!r})")
            mentions.append(Mention(length, length + len(span), span, kind, attrs))
            out.append(span)
            length += len(span)
        at = m.end()
    rest = text[at:]
    if any(mark in rest for mark in _STRAY):
        raise MarkupError(f"{where}: malformed markup near {rest.strip()[:40]!r}")
    out.append(rest)
    return "".join(out), mentions, headers


def parse(path: str | Path) -> list[Note]:
    """The notes of one file, in order."""
    path = Path(path)
    notes: list[Note] = []
    lines: list[tuple[int, str]] = []

    def close() -> None:
        if not notes:
            return
        while lines and not lines[-1][1].strip():
            lines.pop()
        note = notes[-1]
        offset = 0
        texts = []
        for number, raw in lines:
            plain, mentions, headers = _line(raw, f"{path}:{number}")
            for m in mentions:
                note.mentions.append(
                    Mention(m.start + offset, m.end + offset, m.text, m.type, m.attributes)
                )
            for h in headers:
                note.headers.append(Header(h.start + offset, h.end + offset, h.text))
            texts.append(plain)
            offset += len(plain) + 1
        note.text = "\n".join(texts)
        if not note.text.strip():
            raise MarkupError(f"{note.source}: note {note.id} has no text")
        lines.clear()

    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        head = _HEAD.match(raw)
        if head:
            close()
            if head["style"] not in STYLES:
                raise MarkupError(f"{path}:{number}: style {head['style']!r}: one of {STYLES}")
            if any(n.id == head["id"] for n in notes):
                raise MarkupError(f"{path}:{number}: note id {head['id']!r} is used twice")
            notes.append(Note(head["id"], head["style"], "", f"{path}:{number}"))
        elif raw.startswith("###"):
            raise MarkupError(f"{path}:{number}: a note line is '### NOTE-ID | STYLE'")
        elif notes:
            if lines or raw.strip():
                lines.append((number, raw.rstrip()))
        elif raw.strip() and not raw.startswith("#"):
            raise MarkupError(f"{path}:{number}: text before the first '### ID | STYLE' line")
    close()
    for note in notes:
        for m in note.mentions:
            assert note.text[m.start : m.end] == m.text
    return notes
