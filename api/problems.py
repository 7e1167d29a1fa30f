"""RFC 9457 problem details for every error: ``application/problem+json`` with ``type``,
``title``, ``status``, ``detail``, ``request_id`` and, where useful, ``errors`` (field paths,
or file and line of a corpus). Internal errors never leak their message."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from mslm_core.errors import ConfigError, CorpusError, InferenceError, MSLMError, StyleError
from mslm_core.text import character_problem
from store.errors import Conflict, Forbidden, NotFound, QuotaExceeded

log = logging.getLogger(__name__)
PROBLEM_JSON = "application/problem+json"


class FieldError(BaseModel):
    field: str | None = Field(default=None, description="body.texts.0, query.state, …")
    message: str
    file: str | None = Field(default=None, description="a corpus file (uploads)")
    line: int | None = Field(default=None, description="its line (uploads)")


class ProblemDetails(BaseModel):
    """Every error this API answers (RFC 9457, ``application/problem+json``)."""

    type: str = Field(description="urn:mslm:problem:SLUG, or about:blank")
    title: str
    status: int
    detail: str
    instance: str | None = None
    request_id: str | None = None
    errors: list[FieldError] | None = None


_MEANING = {
    401: "no API key, or not a valid one",
    403: "the key lacks the scope",
    404: "no such resource",
    409: "conflicts with the resource's state",
    413: "the body is over the limit",
    422: "invalid input; errors name each field (or file and line)",
    429: "a quota is used up; Retry-After says when to try again",
    500: "internal error (the server log has it)",
    503: "no model can answer now",
}


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` declaring ``statuses`` as problem details."""
    ref = {"$ref": "#/components/schemas/ProblemDetails"}
    return {
        status: {"description": _MEANING[status], "content": {PROBLEM_JSON: {"schema": ref}}}
        for status in statuses
    }


# what every route under /v1 may answer (the key, its scope, the input, a fault)
V1_PROBLEMS = problem_responses(401, 403, 422, 500)


def install_openapi(app: FastAPI, base_models: list[str] | None = None) -> None:
    """The OpenAPI document with the problem-details schemas it refers to, and without
    FastAPI's own validation-error schema (this API never answers with it). ``base_models``:
    the encoders this deployment allows (MSLM_BASE_MODELS), listed as the only values of a
    job's ``base_model``."""
    from fastapi.openapi.utils import get_openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            doc = get_openapi(
                title=app.title, version=app.version, summary=app.summary, routes=app.routes
            )
            schemas = doc.setdefault("components", {}).setdefault("schemas", {})
            for model in (ProblemDetails, FieldError):
                schemas[model.__name__] = model.model_json_schema(
                    ref_template="#/components/schemas/{model}"
                )
            for unused in ("HTTPValidationError", "ValidationError"):
                schemas.pop(unused, None)
            job = schemas.get("JobCreate", {}).get("properties", {})
            if base_models and "base_model" in job:
                job["base_model"]["anyOf"] = [
                    {"type": "string", "enum": base_models},
                    {"type": "null"},
                ]
            app.openapi_schema = doc
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


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


def refuse_long_texts(texts: Sequence[str], limit: int, what: str, field: str) -> None:
    """A 422 naming every text over ``limit`` characters (MSLM_MAX_TEXT_CHARS), at most 20:
    ``what`` says what a text is ("text", "document"), ``field`` is its path with ``{i}``."""
    too_long = [i for i, t in enumerate(texts) if len(t) > limit]
    if too_long:
        raise Problem(
            422,
            f"{what} {too_long[0]} has more than {limit} characters (MSLM_MAX_TEXT_CHARS)",
            slug="text-too-long",
            errors=[
                {"field": field.format(i=i), "message": f"at most {limit} characters"}
                for i in too_long[:20]
            ],
        )


def refuse_bad_characters(texts: Sequence[str], what: str, field: str) -> None:
    """A 422 naming every text that holds a NUL or a lone surrogate (at most 20), and where:
    ``field`` is its path with ``{i}``."""
    bad = [(i, p) for i, t in enumerate(texts) if (p := character_problem(t)) is not None]
    if bad:
        first, problem = bad[0]
        raise Problem(
            422,
            f"{what} {first} holds {problem}",
            slug="bad-characters",
            errors=[{"field": field.format(i=i), "message": p} for i, p in bad[:20]],
        )


def refuse_other_languages(texts: Sequence[str], pipeline: Any, field: str) -> None:
    """A 422 naming every text surely written in another language than the model of
    ``pipeline`` reads (MSLM_REFUSE_OTHER_LANGUAGES), at most 20: ``field`` is its path with
    ``{i}``."""
    others = [(i, o) for i, o in enumerate(pipeline.other_languages(texts)) if o is not None]
    if others:
        first, language = others[0]
        raise Problem(
            422,
            f"text {first} is written in {language.code}; the model reads {pipeline.language} "
            "(MSLM_REFUSE_OTHER_LANGUAGES)",
            slug="other-language",
            errors=[
                {"field": field.format(i=i), "message": o.warning(pipeline.language)}
                for i, o in others[:20]
            ],
        )


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


def _where_in(doc: Any, pos: int) -> str:
    """``line L, column C`` of character ``pos`` of a JSON document."""
    text = doc.decode("utf-8", "replace") if isinstance(doc, bytes) else str(doc or "")
    line = text.count("\n", 0, pos) + 1
    return f"line {line}, column {pos - (text.rfind(chr(10), 0, pos) + 1) + 1}"


#: What a body read as something else than JSON fails with (a model wants an object).
_NOT_AN_OBJECT = frozenset({"model_attributes_type", "dict_type", "model_type"})


def _validation_errors(exc: RequestValidationError, request: Request) -> list[dict[str, Any]]:
    out = []
    sent = request.headers.get("content-type")
    for err in exc.errors():
        loc = [str(p) for p in err.get("loc", ())]
        # never echo the input back: it may be patient text
        message = err.get("msg", "invalid")
        if err.get("type") == "json_invalid" and len(loc) == 2 and loc[1].isdigit():
            reason = (err.get("ctx") or {}).get("error", "not JSON")
            message = f"not JSON: {reason} at {_where_in(exc.body, int(loc[1]))}"
            loc = loc[:1]
        elif loc == ["body"] and err.get("type") in _NOT_AN_OBJECT:
            how = f"as {sent.split(';')[0]}" if sent else "with no Content-Type"
            message = f"{message}: the body was sent {how}; send Content-Type: application/json"
        out.append({"field": ".".join(loc), "message": message})
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
        errors = _validation_errors(exc, request)
        detail = "the request is invalid"
        if len(errors) == 1 and errors[0]["field"] == "body":
            detail = f"the request is invalid: {errors[0]['message']}"
        return problem_response(request, 422, detail, "validation", errors)

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

    @app.exception_handler(Forbidden)
    async def _forbidden(request: Request, exc: Forbidden) -> JSONResponse:
        return problem_response(request, 403, str(exc.args[0]), "forbidden")

    @app.exception_handler(NotFound)
    async def _not_found(request: Request, exc: NotFound) -> JSONResponse:
        return problem_response(request, 404, f"{exc.args[0]} not found", "not-found")

    @app.exception_handler(QuotaExceeded)
    async def _quota(request: Request, exc: QuotaExceeded) -> JSONResponse:
        return problem_response(
            request, 429, str(exc.args[0]), "quota", headers={"Retry-After": str(exc.retry_after)}
        )

    @app.exception_handler(Conflict)
    async def _conflict(request: Request, exc: Conflict) -> JSONResponse:
        return problem_response(request, 409, exc.args[0], "conflict")

    @app.exception_handler(StyleError)
    async def _style(request: Request, exc: StyleError) -> JSONResponse:
        # a named thing the model does not have, as an unknown model or warehouse: 404
        errors = [{"field": "body.style", "message": str(exc)}]
        return problem_response(request, 404, str(exc), "unknown-style", errors)

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
