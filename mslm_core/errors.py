"""Every error the library raises, in one place, each with a stable code.

Library code raises these; the CLI prints them and the service turns them into problem
details. A message says *what* is wrong and *where* (file, line, field).
"""

from __future__ import annotations

from dataclasses import dataclass


class MSLMError(Exception):
    """Base class. ``code`` is stable across releases (``E0xx``)."""

    code = "E000"

    def __str__(self) -> str:
        return f"[{self.code}] {super().__str__()}"


@dataclass(frozen=True)
class CorpusIssue:
    """One problem found in a corpus file."""

    path: str
    line: int | None
    message: str
    field: str | None = None

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        if self.field:
            where += f" ({self.field})"
        return f"{where}: {self.message}"


class CorpusError(MSLMError):
    """A corpus file is malformed. ``issues`` lists the first problems found (file, line)."""

    code = "E001"

    def __init__(self, issues: list[CorpusIssue]):
        if not issues:
            raise ValueError("CorpusError needs at least one issue")
        self.issues = list(issues)
        more = f" (and {len(issues) - 1} more)" if len(issues) > 1 else ""
        super().__init__(f"{issues[0]}{more}")

    @classmethod
    def single(
        cls, path: str, line: int | None, message: str, field: str | None = None
    ) -> CorpusError:
        return cls([CorpusIssue(str(path), line, message, field)])


class ConfigError(MSLMError):
    """A training or run configuration is invalid (names the field)."""

    code = "E002"


class MaskingError(MSLMError):
    """Masking cannot be done as asked (for example nothing would ever be masked)."""

    code = "E003"


class BundleError(MSLMError):
    """A model bundle is missing, incomplete, or does not match its checksums."""

    code = "E004"


class UnknownNameError(MSLMError):
    """A registry lookup failed; the message lists the valid names."""

    code = "E005"

    def __init__(self, kind: str, name: str, valid: list[str]):
        self.kind, self.name, self.valid = kind, name, sorted(valid)
        super().__init__(f"unknown {kind} {name!r}; valid: {', '.join(self.valid)}")


class CheckpointError(MSLMError):
    """A training checkpoint cannot be resumed (missing, corrupt, or from another config)."""

    code = "E006"


class ExportError(MSLMError):
    """An ONNX export failed or its parity check against PyTorch did not pass."""

    code = "E007"


class InferenceError(MSLMError):
    """The inference engine cannot run as asked (missing runtime, provider or file)."""

    code = "E008"


class StyleError(InferenceError):
    """A model is asked to read text in a style it was not trained with (the message names
    the ones it was)."""
