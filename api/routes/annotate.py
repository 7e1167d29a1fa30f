"""POST /v1/annotate: entities with offsets and confidences, micro-batched."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import ValidationError

from mslm_core.pipeline import AnnotateOptions, Rendered
from mslm_core.types import Entity

from ..admission import body
from ..deps import AnnotateKey, AppState, app_state
from ..problems import (
    V1_PROBLEMS,
    Problem,
    problem_responses,
    refuse_bad_characters,
    refuse_long_texts,
    refuse_other_languages,
)
from ..schemas import AnnotateRequest, AnnotateResponse, BioCCollection, LabelStudioTask
from ..serving import LoadedModel

router = APIRouter(prefix="/v1", tags=["annotate"], responses=V1_PROBLEMS)


async def _disconnected(request: Request) -> None:
    """Returns when the client closes the connection (the body has been read by then, so
    the next ASGI message is the disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        await asyncio.sleep(0.05)  # a server that answers with empty bodies must not spin


log = logging.getLogger(__name__)

#: Seconds an annotate request runs before its connection is watched: a client gone by then
#: has its work dropped (most requests are answered sooner, and a watch costs a task).
WATCH_AFTER_S = 0.5

#: Entities in a response rendered on the event loop; a larger one is rendered in a thread.
RENDER_ON_THE_LOOP = 2_000

_FORMATS_DOC = (
    "By `format`: `json` (default) the schema below; `bioc` a BioC JSON collection, one "
    "document per text (`id`: its index), annotations with `infons: {type, confidence}` and "
    "`locations: [{offset, length}]`; `labelstudio` a JSON array of Label Studio tasks with "
    "`predictions` (pre-annotations: `value: {start, end, text, labels}` and `score`); "
    "`pubtator` PubTator text (`text/plain`), one document per text, the text as its title; "
    "`fhir` a FHIR R4 Bundle (`application/fhir+json`; docs/fhir.md)."
)
_PUBTATOR_EXAMPLE = (
    "0|t|Cisplatin caused renal failure .\n0|a|\n0\t17\t30\trenal failure\tDisease\t-\n\n"
)


@router.post(
    "/annotate",
    openapi_extra=body("texts"),
    # documentation only (a Response is returned as built): the JSON shape depends on format
    response_model=AnnotateResponse | BioCCollection | list[LabelStudioTask],
    responses={
        **problem_responses(404, 413, 503),
        200: {
            "description": _FORMATS_DOC,
            "content": {
                "text/plain": {"schema": {"type": "string"}, "example": _PUBTATOR_EXAMPLE},
                "application/fhir+json": {
                    "schema": {"type": "object", "description": "a FHIR R4 Bundle"}
                },
            },
        },
    },
)
async def annotate(body: AnnotateRequest, request: Request, key: AnnotateKey) -> Response:
    """Entities in each text. Offsets index the submitted string (end exclusive) and
    ``text == texts[i][start:end]``; long texts are split into sentences and windows
    internally, never truncated. ``format`` chooses the response: this service's JSON, BioC
    JSON, PubTator or Label Studio pre-annotations, each after the confidence thresholds.
    (A client generated from this document reads the JSON ones; for PubTator it calls
    ``/v1/annotate/pubtator``, whose only answer is text.)"""
    options = body.options()
    state = app_state(request)
    found = await _annotate(body, options, request, state)
    if isinstance(found, Response):
        return found
    return await _respond(state, body, options, *found)


@router.post(
    "/annotate/pubtator",
    openapi_extra=body("texts"),
    response_class=PlainTextResponse,
    responses={
        **problem_responses(404, 413, 503),
        200: {
            "description": "PubTator text, one document per text (its index as PMID)",
            "content": {"text/plain": {"schema": {"type": "string"}, "example": _PUBTATOR_EXAMPLE}},
        },
    },
)
async def annotate_pubtator(body: AnnotateRequest, request: Request, key: AnnotateKey) -> Response:
    """``/v1/annotate`` answered in PubTator text whatever ``format`` says: the operation for
    clients generated from this document (they read one media type per status)."""
    options = body.options(format="pubtator")
    state = app_state(request)
    found = await _annotate(body, options, request, state)
    if isinstance(found, Response):
        return found
    return await _respond(state, body, options, *found)


async def _annotate(
    body: AnnotateRequest, options: AnnotateOptions, request: Request, state: AppState
) -> Response | tuple[LoadedModel, list[list[Entity]]]:
    """The model that answered and the entities of each text under ``options`` (thresholds,
    context, concepts), or the response to send instead (the client left)."""
    s = state.settings
    if len(body.texts) > s.max_texts:
        raise Problem(
            422,
            f"{len(body.texts)} texts in one request; the limit is {s.max_texts} (MSLM_MAX_TEXTS)",
            slug="too-many-texts",
            errors=[{"field": "body.texts", "message": f"at most {s.max_texts} texts"}],
        )
    refuse_long_texts(body.texts, s.max_text_chars, "text", "body.texts.{i}")
    refuse_bad_characters(body.texts, "text", "body.texts.{i}")
    if s.log_text:
        log.info("annotate texts (MSLM_LOG_TEXT is on): %r", body.texts)
    work = asyncio.ensure_future(state.models.annotate(body.model, body.texts, options))
    # most requests are answered before their client is watched: a watch costs a task
    try:
        await asyncio.wait({work}, timeout=WATCH_AFTER_S)
        if not work.done():
            gone = asyncio.ensure_future(_disconnected(request))
            try:
                await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                gone.cancel()
    except asyncio.CancelledError:  # the server stops (past its grace): the work goes too
        work.cancel()
        raise
    if not work.done():  # the client left: drop its work (nobody reads the answer)
        work.cancel()
        state.metrics.abandoned.inc()
        log.info("annotate: the client closed the connection; its work was dropped")
        return Response(status_code=499)
    try:
        loaded, results = work.result()
    except KeyError:
        raise Problem(404, f"model {body.model} not found", slug="not-found") from None
    if s.refuse_other_languages:
        refuse_other_languages(body.texts, loaded.pipeline, "body.texts.{i}")
    state.metrics.count_annotated(loaded.id, body.texts, results)
    return loaded, results


async def _respond(
    state: AppState,
    body: AnnotateRequest,
    options: AnnotateOptions,
    loaded: LoadedModel,
    kept: list[list[Entity]],
    render: Callable[[], Rendered] | None = None,
) -> Response:
    def respond() -> Response:
        # built once, in the documented shape (AnnotateResponse for json); not validated again
        rendered = (
            render() if render is not None else loaded.pipeline.render(body.texts, kept, options)
        )
        if isinstance(rendered.body, str):
            return PlainTextResponse(rendered.body, media_type=rendered.media_type)
        return JSONResponse(rendered.body, media_type=rendered.media_type)

    if sum(map(len, kept)) < RENDER_ON_THE_LOOP:
        response = respond()
    else:  # 100,000 entities take seconds to render: off the event loop, which keeps answering
        response = await asyncio.to_thread(respond)
    served_headers(response, loaded.id, state.models.coming)
    return response


def served_headers(response: Response, model_id: str, coming: dict[str, Any] | None) -> None:
    """Which model answered (``MSLM-Model``) and, when a better one is on its way to replace
    it (the first start's full model), its job and time left (``MSLM-Model-Coming``)."""
    response.headers["MSLM-Model"] = model_id
    if coming is not None and coming.get("replaces") == model_id:
        eta = coming.get("eta_s")
        response.headers["MSLM-Model-Coming"] = f"job={coming['job_id']}" + (
            "" if eta is None else f"; eta_s={float(eta):.0f}"
        )


_FHIR_BODY = {
    "required": True,
    "content": {
        "application/fhir+json": {
            "schema": {
                "type": "object",
                "description": "a FHIR R4 DocumentReference (the note's text as its "
                "attachment's base64 data), or a Bundle of them",
            }
        }
    },
}


@router.post(
    "/annotate/fhir",
    openapi_extra={**body("texts"), "requestBody": _FHIR_BODY},
    response_class=JSONResponse,
    responses={
        **problem_responses(404, 413, 422, 503),
        200: {
            "description": "a FHIR R4 Bundle (collection): per note, a Condition, "
            "MedicationStatement, Observation or Procedure per entity and a Provenance "
            "(docs/fhir.md)",
            "content": {"application/fhir+json": {"schema": {"type": "object"}}},
        },
    },
)
async def annotate_fhir(
    request: Request,
    key: AnnotateKey,
    model: Annotated[str | None, Query(max_length=200, description="default: the active")] = None,
    min_confidence: Annotated[float | None, Query(ge=0.0, le=1.0)] = None,
    context: bool = True,
    linking: bool = True,
) -> Response:
    """FHIR in, FHIR out: the notes of a ``DocumentReference`` (or a ``Bundle`` of them)
    annotated by the served model, answered as a FHIR ``Bundle`` whose resources refer to
    each ``DocumentReference`` and its subject. A resource that is no readable
    ``DocumentReference`` is a 422 that says where (``entry 3``) and why."""
    from mslm_core.fhir import bundle as fhir_bundle
    from mslm_core.fhir import notes_of

    raw = (await request.body()).decode("utf-8", errors="replace")  # UTF-8: checked before
    ids: list[str] = []
    texts: list[str] = []
    subjects: list[dict[str, Any] | None] = []
    errors: list[dict[str, str]] = []
    for n in notes_of(raw):
        if n.text is None or n.id is None:
            errors.append({"field": f"body ({n.where})", "message": n.problem or "no text"})
        else:
            ids.append(n.id)
            texts.append(n.text)
            subjects.append(n.subject)
    if errors or not texts:
        first = errors[0]["message"] if errors else "no DocumentReference in the body"
        detail = f"the body holds no readable FHIR DocumentReference: {first}"
        if errors and texts:
            detail = f"{len(errors)} resources could not be read: {first}"
        raise Problem(422, detail, slug="validation", errors=errors[:20] or None)
    given: dict[str, Any] = {"texts": texts, "model": model, "context": context}
    given |= {"linking": linking, "format": "json"}
    if min_confidence is not None:
        given["min_confidence"] = min_confidence
    try:
        request_body = AnnotateRequest(**given)
    except ValidationError as exc:
        errors = [
            {"field": ".".join(str(p) for p in e["loc"]), "message": e["msg"]} for e in exc.errors()
        ]
        raise Problem(422, "the notes are invalid", slug="validation", errors=errors[:20]) from None
    options = request_body.options()
    state = app_state(request)
    annotated = await _annotate(request_body, options, request, state)
    if isinstance(annotated, Response):
        return annotated
    loaded, kept = annotated

    def render() -> Rendered:
        out = fhir_bundle(texts, kept, loaded.id, ids, subjects)
        return Rendered(out, "application/fhir+json")

    return await _respond(state, request_body, options, loaded, kept, render)
