"""What every API replica does beside its requests: follow the active model, and count the
store's work by state for /metrics. (Work whose worker died is the reaper's:
``worker.reaper``, its own process.)"""

from __future__ import annotations

import asyncio
import logging

from store import transitions
from store.tables import AnnotationJob, Evaluation, Job

from .deps import AppState

log = logging.getLogger(__name__)


async def follow_active_model(state: AppState) -> None:
    while True:
        try:
            await state.models.refresh()
        except Exception as exc:
            log.warning("model refresh failed: %s", type(exc).__name__)
        await asyncio.sleep(state.settings.model_poll_seconds)


#: What the store counts by state for /metrics: ``mslm_<name>{state}``.
COUNTED = (("jobs", Job), ("evaluations", Evaluation), ("annotation_jobs", AnnotationJob))


def counts(state: AppState) -> dict[str, dict[str, int]]:
    with state.factory() as session:
        return {name: transitions.count_by_state(session, cls) for name, cls in COUNTED}
