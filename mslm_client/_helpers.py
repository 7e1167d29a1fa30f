"""Helpers both clients share: batching texts, following a job with a progress bar, and the
pandas side of ``annotate_series`` (pandas is imported only there)."""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from itertools import islice
from typing import TYPE_CHECKING, Any, TypeVar

from .errors import JobError, WaitTimeout
from .results import AnnotationJob, Entity, Evaluation, Job

if TYPE_CHECKING:
    import pandas as pd

#: what ``wait_for_*`` follows
RunT = TypeVar("RunT", Job, Evaluation, AnnotationJob)


def check_batching(batch_size: int, concurrency: int = 1) -> None:
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")


def batches(texts: Iterable[str], size: int) -> Iterator[list[str]]:
    """Lists of at most ``size`` texts, read lazily from ``texts``."""
    it = iter(texts)
    while batch := list(islice(it, size)):
        _check_texts(batch)
        yield batch


async def abatches(
    texts: Iterable[str] | AsyncIterable[str], size: int
) -> AsyncIterator[list[str]]:
    if not isinstance(texts, AsyncIterable):
        for chunk in batches(texts, size):
            yield chunk
        return
    batch: list[str] = []
    async for text in texts:
        batch.append(text)
        if len(batch) == size:
            _check_texts(batch)
            yield batch
            batch = []
    if batch:
        _check_texts(batch)
        yield batch


def _check_texts(batch: list[str]) -> None:
    for text in batch:
        if not isinstance(text, str):
            raise TypeError(f"texts must be strings, got {type(text).__name__}: {text!r:.60}")


class Watch:
    """Follows a job (or evaluation, or annotation job) from its polled states: a tqdm bar
    over training steps (epoch, loss and dev F1 beside it) or over notes (notes per second),
    a deadline, and :class:`JobError` when it ends failed or cancelled."""

    def __init__(self, run_id: str, progress: bool, timeout: float | None):
        from tqdm.auto import tqdm

        self.run_id = run_id
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.bar = tqdm(
            total=None, desc=run_id, unit="step", disable=not progress, dynamic_ncols=True
        )

    def done(self, run: Job | Evaluation | AnnotationJob) -> bool:
        """True once ``run`` succeeded; raises when it failed or was cancelled."""
        if isinstance(run, Job):
            self._show(run)
        elif isinstance(run, AnnotationJob):
            self._show_notes(run)
        self.bar.set_postfix_str(self._postfix(run), refresh=True)
        if run.state == "succeeded":
            if self.bar.total:
                self.bar.update(self.bar.total - self.bar.n)
            self.bar.close()
            return True
        if run.finished:
            self.bar.close()
            raise JobError(run)
        if self.deadline is not None and time.monotonic() > self.deadline:
            self.bar.close()
            raise WaitTimeout(f"{self.run_id} still {run.state} after the time given to wait")
        return False

    def close(self) -> None:
        self.bar.close()

    def _show(self, job: Job) -> None:
        p = job.progress
        if p.steps and self.bar.total != p.steps:
            self.bar.total = p.steps
        if p.step is not None and p.step != self.bar.n:
            self.bar.update(p.step - self.bar.n)

    def _show_notes(self, job: AnnotationJob) -> None:
        p = job.progress
        self.bar.unit = "note"
        if p.total is not None and self.bar.total != p.total:
            self.bar.total = p.total
        if p.committed != self.bar.n:
            self.bar.update(p.committed - self.bar.n)

    @staticmethod
    def _postfix(run: Job | Evaluation | AnnotationJob) -> str:
        parts = [run.state]
        if isinstance(run, AnnotationJob):
            notes = run.progress
            parts.append(f"{notes.notes_per_second:.1f} notes/s")
            if notes.failed_notes:
                parts.append(f"{notes.failed_notes} not annotated")
        if isinstance(run, Job):
            p = run.progress
            if p.epoch is not None and p.epochs:
                parts.append(f"epoch {p.epoch}/{p.epochs}")
            if p.loss is not None:
                parts.append(f"loss {p.loss:.4f}")
            if p.dev_f1 is not None:
                parts.append(f"dev F1 {p.dev_f1:.3f}")
        return ", ".join(parts)


# -- pandas -----------------------------------------------------------------------------------
def series_texts(series: pd.Series) -> tuple[list[str], list[int]]:
    """The texts to annotate and their positions in ``series``; missing values (None, NaN,
    pd.NA) are skipped and get an empty entity list."""
    texts, positions = [], []
    for i, value in enumerate(series.tolist()):
        if _missing(value):
            continue
        if not isinstance(value, str):
            raise TypeError(
                f"annotate_series needs strings; position {i} holds {type(value).__name__}"
            )
        texts.append(value)
        positions.append(i)
    return texts, positions


def series_result(
    series: pd.Series, positions: list[int], found: Iterable[list[Entity]]
) -> pd.Series:
    """A Series of entity lists with the index and name of ``series``."""
    import pandas as pd

    values: list[list[Entity]] = [[] for _ in range(len(series))]
    for position, entities in zip(positions, found, strict=True):
        values[position] = entities
    return pd.Series(values, index=series.index, name=series.name, dtype=object)


def _missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    return type(value).__name__ in ("NAType", "NaTType")
