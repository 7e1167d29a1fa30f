"""Shared reading and writing machinery: issue collection, line streaming, atomic writes."""

from __future__ import annotations

import contextlib
import gzip
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TypeAlias, cast

from ..errors import CorpusError, CorpusIssue

StrPath: TypeAlias = "str | os.PathLike[str]"

_BOM = "\ufeff"


def open_binary(path: str, decompress: bool = False) -> IO[bytes]:
    """``path`` opened for reading bytes (``decompress``: a ``.gz`` path through gzip); a
    missing file, a directory or an unreadable file is a CorpusError naming it. The caller
    closes it."""
    try:
        if decompress and str(path).endswith(".gz"):
            return cast(IO[bytes], gzip.open(path, "rb"))  # a GzipFile reads as one
        return open(path, "rb")
    except FileNotFoundError:
        raise CorpusError.single(path, None, "file not found") from None
    except IsADirectoryError:
        raise CorpusError.single(path, None, "is a directory, not a corpus file") from None
    except OSError as e:
        raise CorpusError.single(path, None, f"cannot open: {e.strerror or e}") from None


#: How many problems a reader collects before it stops and raises.
MAX_ISSUES = 20

#: The longest line a reader accepts (a JSONL line holds a whole document; a clinical note of
#: 100,000 characters with its entities is well under 1 MiB). Longer lines are refused
#: without being held in memory.
MAX_LINE_BYTES = 8 << 20


class IssueCollector:
    """Collects the problems of one file; raises once :data:`MAX_ISSUES` are collected."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.items: list[CorpusIssue] = []

    def add(self, line: int | None, message: str, field: str | None = None) -> None:
        self.items.append(CorpusIssue(self.path, line, message, field))
        if len(self.items) >= MAX_ISSUES:
            raise CorpusError(self.items)

    def raise_if_any(self) -> None:
        if self.items:
            raise CorpusError(self.items)


def numbered_lines(path: str, issues: IssueCollector) -> Iterator[tuple[int, str]]:
    """``(line number, text without line terminator)`` for each line that is valid UTF-8.

    Reads in binary and decodes line by line, so an encoding error names its line; a UTF-8
    byte-order mark at the start of the file is dropped.
    """
    # a packaged vocabulary is gzip-compressed; what a service stores never is
    with open_binary(path, decompress=True) as handle:
        number = 0
        while raw := handle.readline(MAX_LINE_BYTES + 1):
            number += 1
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                # a pathological line (a binary file, a 100 MB single line): refuse it and
                # skip the rest of it without ever holding more than one chunk in memory
                while (rest := handle.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                    pass
                issues.add(number, f"line longer than {MAX_LINE_BYTES // (1 << 20)} MiB")
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                issues.add(number, f"invalid UTF-8 (byte {e.start + 1} of the line)")
                continue
            if number == 1 and text.startswith(_BOM):
                text = text[1:]
            yield number, text.rstrip("\r\n")


def atomic_write(path: StrPath, lines: Iterator[str]) -> None:
    """Write ``lines`` to ``path`` through a temporary file in the same directory.

    The temporary file is created with the usual permissions (0666 less the umask; those of
    ``path`` when it exists), flushed to disk, then moved over ``path`` with ``os.replace``.
    Parent directories are created. On any error the temporary file is removed.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with open(fd, "w", encoding="utf-8", newline="\n") as out:
            for line in lines:
                out.write(line)
            out.flush()
            os.fsync(out.fileno())
        with contextlib.suppress(FileNotFoundError):
            os.chmod(tmp, target.stat().st_mode & 0o7777)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _type_name(value: object) -> str:
    """A JSON value's type as a message names it (``null`` for None)."""
    return "null" if value is None else type(value).__name__
