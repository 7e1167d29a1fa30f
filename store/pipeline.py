"""The annotation pipeline of a stored model, built alike by every API replica and every
annotation worker: the engine as the settings serve it (MSLM_PRECISION, MSLM_DEVICE, the
thread counts), ConText with the site's rules unless MSLM_CONTEXT is off, and the linker it is
given (the vocabulary answers link to: ``store.linking.build_linker``)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session, sessionmaker

from mslm_core.context import ContextEngine
from mslm_core.pipeline import AnnotationPipeline
from mslm_settings import Settings

from .models import find_model

if TYPE_CHECKING:
    from mslm_core.linking import Linker

log = logging.getLogger(__name__)


def context_engine(settings: Settings) -> ContextEngine | None:
    """The ConText engine of ``settings`` (ours, extended or replaced by MSLM_CONTEXT_RULES),
    or None when MSLM_CONTEXT is off. A rules file that cannot be read is a ConfigError that
    names file, rule and field."""
    if not settings.context:
        return None
    engine = ContextEngine.configured(
        settings.context_rules, settings.context_rules_mode, settings.context_profile
    )
    log.info("ConText: %d rules (%s)", len(engine.rules), engine.rules.origin)
    return engine


def load_pipeline(
    settings: Settings,
    factory: sessionmaker[Session],
    model_id: str,
    *,
    context: ContextEngine | None,
    linker: Linker | None,
    spinning: bool = True,
) -> AnnotationPipeline:
    """The pipeline of the stored model ``model_id`` (KeyError when there is none), every
    checksum of its bundle verified. ``spinning=False``: idle inference threads sleep (an API
    replica shares its cores with the event loop)."""
    with factory() as session:
        row = find_model(session, model_id)
        if row is None:
            raise KeyError(model_id)
        path = settings.artifacts / row.path
    s = settings
    return AnnotationPipeline.from_bundle(
        path,
        context=context,
        linker=linker,
        precision=s.precision,
        device=s.device,
        intra_op_threads=s.intra_op_threads,
        inter_op_threads=s.inter_op_threads,
        spinning=spinning,
    )
