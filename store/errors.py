"""What the store's operations raise when a request cannot be done as asked; the API turns
each into its problem (``api.problems``: 409, 403, 404, 429)."""

from __future__ import annotations

from mslm_core.errors import MSLMError


class Conflict(MSLMError):
    """The request conflicts with the store's state (HTTP 409)."""

    code = "E101"


class Forbidden(MSLMError):
    """The key may not do this, whatever its scopes allow elsewhere (HTTP 403)."""

    code = "E104"


class NotFound(MSLMError):
    """No such row (HTTP 404)."""

    code = "E102"


class QuotaExceeded(MSLMError):
    """A key's quota (or the service's) is used up (HTTP 429 with ``retry_after`` seconds)."""

    code = "E103"

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after
