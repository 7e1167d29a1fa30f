"""POST /v1/annotate: entities with offsets and confidences, micro-batched."""

from __future__ import annotations

import logging
from collections import Counter

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from ..deps import AnnotateKey, StateDep
from ..problems import Problem
from ..schemas import AnnotateRequest, AnnotateResponse

router = APIRouter(prefix="/v1", tags=["annotate"])
log = logging.getLogger(__name__)


@router.post("/annotate", response_model=AnnotateResponse)
async def annotate(body: AnnotateRequest, state: StateDep, key: AnnotateKey) -> JSONResponse:
    """Entities in each text. Offsets index the submitted string (end exclusive) and
    ``text == texts[i][start:end]``; long texts are split into sentences and windows
    internally, never truncated."""
    s = state.settings
    if len(body.texts) > s.max_texts:
        raise Problem(
            422,
            f"{len(body.texts)} texts in one request; the limit is {s.max_texts} (MSLM_MAX_TEXTS)",
            slug="too-many-texts",
            errors=[{"field": "body.texts", "message": f"at most {s.max_texts} texts"}],
        )
    too_long = [i for i, t in enumerate(body.texts) if len(t) > s.max_text_chars]
    if too_long:
        raise Problem(
            422,
            f"text {too_long[0]} has more than {s.max_text_chars} characters (MSLM_MAX_TEXT_CHARS)",
            slug="text-too-long",
            errors=[
                {"field": f"body.texts.{i}", "message": f"at most {s.max_text_chars} characters"}
                for i in too_long[:20]
            ],
        )
    try:
        loaded = await state.models.get(body.model)
    except KeyError:
        raise Problem(404, f"model {body.model} not found", slug="not-found") from None
    if s.log_text:
        log.info("annotate texts (MSLM_LOG_TEXT is on): %r", body.texts)
    results = await loaded.batcher.annotate(body.texts)
    thresholds = body.min_confidence_per_type
    out = []
    found: Counter[str] = Counter()
    for entities in results:
        kept = [
            e
            for e in entities
            if e.confidence >= max(body.min_confidence, thresholds.get(e.type, 0.0))
        ]
        found.update(e.type for e in kept)
        out.append({"entities": [e.to_dict() for e in kept]})
    m = state.metrics
    m.texts.labels(loaded.id).inc(len(body.texts))
    m.characters.labels(loaded.id).inc(sum(len(t) for t in body.texts))
    for etype, n in found.items():
        m.entities.labels(loaded.id, etype).inc(n)
    # built once, in the documented shape (AnnotateResponse); not validated a second time
    return JSONResponse({"model": loaded.describe(), "results": out})
