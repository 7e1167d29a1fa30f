"""Errors raised by the client. Every one is an :class:`MSLMError`.

An answer other than 2xx becomes an :class:`APIError` (a subclass per common status) that
carries the problem details the service sent: ``status``, ``title``, ``detail``, ``errors``
(field paths, or file and line of a corpus) and the ``request_id`` to quote in a bug report.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from .results import AnnotationJob, Evaluation, Job


class MSLMError(Exception):
    """Base class of every error raised by ``mslm_client``."""


class APIConnectionError(MSLMError):
    """The service could not be reached (or stopped answering) after every retry."""


class APIError(MSLMError):
    """The service answered with an error (RFC 9457 problem details)."""

    def __init__(
        self,
        status: int,
        title: str,
        detail: str | None = None,
        *,
        errors: list[dict[str, Any]] | None = None,
        type: str = "about:blank",
        request_id: str | None = None,
        body: Any = None,
        retry_after: float | None = None,
    ):
        self.status, self.title, self.detail = status, title, detail
        self.errors = errors or []
        self.type, self.request_id, self.body = type, request_id, body
        self.retry_after = retry_after
        message = f"{status} {title}" + (f": {detail}" if detail else "")
        if self.errors:
            message += " [" + "; ".join(_describe(e) for e in self.errors[:5]) + "]"
        if request_id:
            message += f" (request {request_id})"
        super().__init__(message)

    @classmethod
    def from_response(cls, response: httpx.Response) -> APIError:
        """The error for a non-2xx ``response``, of the subclass its status calls for."""
        body: Any = None
        try:
            body = response.json()
        except ValueError:
            body = response.text or None
        problem = body if isinstance(body, dict) else {}
        status = response.status_code
        errors = problem.get("errors")
        error_class = _BY_STATUS.get(status, ServerError if status >= 500 else APIError)
        return error_class(
            status,
            str(problem.get("title") or response.reason_phrase or "error"),
            problem.get("detail") if problem else (body if isinstance(body, str) else None),
            errors=errors if isinstance(errors, list) else None,
            type=str(problem.get("type") or "about:blank"),
            request_id=problem.get("request_id") or response.headers.get("x-request-id"),
            body=body,
            retry_after=parse_retry_after(response.headers.get("retry-after")),
        )


class AuthenticationError(APIError):
    """401: no API key, or one the service does not know."""


class PermissionDeniedError(APIError):
    """403: the API key lacks the scope the operation needs."""


class NotFoundError(APIError):
    """404: no such dataset, job, model or evaluation."""


class ConflictError(APIError):
    """409: e.g. an idempotency key reused with another request, or deleting a dataset in use."""


class RequestTooLargeError(APIError):
    """413: the request body is over the service's limit."""


class ValidationError(APIError):
    """422: the request (or an uploaded corpus) is invalid; ``errors`` says where."""


class RateLimitError(APIError):
    """429: too many requests (retried first, honouring ``Retry-After``)."""


class ServerError(APIError):
    """5xx: the service failed or is unavailable."""


_BY_STATUS: dict[int, type[APIError]] = {
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: RequestTooLargeError,
    422: ValidationError,
    429: RateLimitError,
}


class JobError(MSLMError):
    """A job (or evaluation, or annotation job) the client waited for ended ``failed`` or
    ``cancelled``."""

    def __init__(self, run: Job | Evaluation | AnnotationJob):
        self.job = run
        self.state, self.error = run.state, run.error
        kind = type(run).__name__.lower()
        reason = f": {run.error}" if run.error else ""
        super().__init__(f"{kind} {run.id} {run.state}{reason}")


class WaitTimeout(MSLMError):
    """A job (or evaluation) did not finish within the time given to wait for it."""


def _describe(error: dict[str, Any]) -> str:
    where = error.get("field") or ""
    if error.get("file"):
        where = f"{error['file']}:{error.get('line', '?')}" + (f" {where}" if where else "")
    message = str(error.get("message", ""))
    return f"{where}: {message}" if where else message


def parse_retry_after(value: str | None) -> float | None:
    """``Retry-After`` in seconds: a number of seconds or an HTTP date; None when absent or
    unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    import email.utils
    import time

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
