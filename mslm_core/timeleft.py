"""A job's time left as the worker writes it and as every reader shows it.

The worker's :class:`~mslm_core.train.pace.Pace` makes an :class:`Estimate`; the job's progress
carries it (``phase``, ``elapsed_s``, ``steps_per_s``, ``eta_s``); ``mslm up``'s console,
``mslm train``'s bar and ``/readyz`` say it with :func:`left_text`. No torch here: the API
imports this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Estimate:
    phase: str
    elapsed_s: float
    steps_per_s: float | None
    eta_s: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "elapsed_s": round(self.elapsed_s, 1),
            "steps_per_s": None if self.steps_per_s is None else round(self.steps_per_s, 4),
            "eta_s": None if self.eta_s is None else round(self.eta_s, 1),
        }


def left_text(seconds: object) -> str:
    """``"about 12 min left"`` (seconds from 90 on), ``"about 40 s left"``; ``""`` when there
    is no estimate (``seconds`` not a number: a job's progress before its first steps)."""
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool):
        return ""
    amount = f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"
    return f"about {amount} left"
