"""RFC 9457 problem details for every error: ``application/problem+json`` with ``type``,
``title``, ``status``, ``detail``, ``request_id`` and, where useful, ``errors`` (field paths,
or file and line of a corpus). Internal errors never leak their message."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from mslm_core.errors import ConfigError, CorpusError, InferenceError, MSLMError
from store.service import Conflict, NotFound

log = logging.getLogger(__name__)
PROBLEM_JSON = "application/problem+json"


class Problem(Exception):
    """An error answered as problem details."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        slug: str | None = None,
        errors: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(detail)
        self.status, self.detail, self.slug = status, detail, slug
        self.errors, self.headers = errors, headers


def problem_response(
    request: Request,
    status: int,
    detail: str,
    slug: str | None = None,
    errors: list[dict[str, Any]] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    body: dict[str, Any] = {
        "type": f"urn:mslm:problem:{slug}" if slug else "about:blank",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "instance": request.url.path,
        "request_id": getattr(request.state, "request_id", None),
    }
    if errors:
        body["errors"] = errors
    return JSONResponse(body, status_code=status, media_type=PROBLEM_JSON, headers=headers)


def _validation_errors(exc: RequestValidationError) -> list[dict[str, Any]]:
    out = []
    for err in exc.errors():
        loc = [str(p) for p in err.get("loc", ())]
        # never echo the input back: it may be patient text
        out.append({"field": ".".join(loc), "message": err.get("msg", "invalid")})
    return out


def install(app: FastAPI) -> None:
    @app.exception_handler(Problem)
    async def _problem(request: Request, exc: Problem) -> JSONResponse:
        return problem_response(request, exc.status, exc.detail, exc.slug, exc.errors, exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = exc.detail if isinstance(exc.detail, str) else HTTPStatus(exc.status_code).phrase
        return problem_response(request, exc.status_code, detail, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        return problem_response(
            request, 422, "the request is invalid", "validation", _validation_errors(exc)
        )

    @app.exception_handler(CorpusError)
    async def _corpus(request: Request, exc: CorpusError) -> JSONResponse:
        errors = [
            {"file": i.path, "line": i.line, "field": i.field, "message": i.message}
            for i in exc.issues
        ]
        return problem_response(
            request, 422, f"invalid corpus: {exc.issues[0]}", "invalid-corpus", errors
        )

    @app.exception_handler(ConfigError)
    async def _config(request: Request, exc: ConfigError) -> JSONResponse:
        return problem_response(request, 422, str(exc), "invalid-settings")

    @app.exception_handler(NotFound)
    async def _not_found(request: Request, exc: NotFound) -> JSONResponse:
        return problem_response(request, 404, f"{exc.args[0]} not found", "not-found")

    @app.exception_handler(Conflict)
    async def _conflict(request: Request, exc: Conflict) -> JSONResponse:
        return problem_response(request, 409, exc.args[0], "conflict")

    @app.exception_handler(InferenceError)
    async def _inference(request: Request, exc: InferenceError) -> JSONResponse:
        return problem_response(request, 503, str(exc), "model-unavailable")

    @app.exception_handler(MSLMError)
    async def _mslm(request: Request, exc: MSLMError) -> JSONResponse:
        return problem_response(request, 422, str(exc), exc.code.lower())

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        log.error(
            "unhandled %s on %s %s (request %s)",
            type(exc).__name__,
            request.method,
            request.url.path,
            getattr(request.state, "request_id", "-"),
            exc_info=(type(exc), exc, exc.__traceback__),
        )
        return problem_response(request, 500, "internal error; see the server log", "internal")
