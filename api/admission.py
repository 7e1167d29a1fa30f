"""What the API decides about a request before its body is read, as the routes declare it.

A route says it once, where it is defined: the key scope it wants is its ``require(...)``
dependency (``deps.AnnotateKey`` …); a multipart form is an upload (``MSLM_MAX_UPLOAD_MB``, and
it counts toward the key's upload quota); a JSON body bigger than a few settings says so with
``openapi_extra=body("texts")`` or ``body("upload")`` (which the API document shows as
``x-mslm-body``); any other body is small settings (4 MiB). :class:`RoutePolicies` reads this
off the routes once, and the middleware (``api/middleware.py``) asks it per request.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from fastapi import params
from fastapi.routing import APIRoute
from starlette.routing import Match
from starlette.types import Scope

from mslm_settings import Settings

BodyKind = Literal["upload", "texts", "settings"]
BODY_EXTENSION = "x-mslm-body"
SETTINGS_BODY_LIMIT = 4 << 20


def body(kind: Literal["upload", "texts"]) -> dict[str, Any]:
    """A route's ``openapi_extra`` for a JSON body bigger than settings: ``texts`` (up to
    MSLM_MAX_TEXTS × MSLM_MAX_TEXT_CHARS) or ``upload`` (up to MSLM_MAX_UPLOAD_MB, without the
    upload quota, which counts files)."""
    return {BODY_EXTENSION: kind}


@dataclass(frozen=True)
class RoutePolicy:
    """``scope``: the key scope the route wants (None: no key); ``body``: which limit its
    body has; ``upload_quota``: whether a request counts toward the key's uploads."""

    scope: str | None
    body: BodyKind
    upload_quota: bool


def _required_scope(dependant: Any) -> str | None:
    for dep in dependant.dependencies:
        found = getattr(dep.call, "required_scope", None) or _required_scope(dep)
        if found:
            return str(found)
    return None


def _is_form(route: APIRoute) -> bool:
    """Whether the route's body is a form (``File`` is a kind of ``Form``)."""
    return any(isinstance(p.field_info, params.Form) for p in route.dependant.body_params)


def policy_of(route: APIRoute) -> RoutePolicy:
    declared = (route.openapi_extra or {}).get(BODY_EXTENSION)
    form = _is_form(route)
    kind: BodyKind = "upload" if form else declared or "settings"
    return RoutePolicy(_required_scope(route.dependant), kind, upload_quota=form)


def text_body_limit(settings: Settings) -> int:
    """JSON's worst case: every character escaped as a surrogate pair (12 bytes)."""
    return settings.max_texts * settings.max_text_chars * 12 + (1 << 20)


class RoutePolicies:
    """Each route's :class:`RoutePolicy`, and the body limit of a request."""

    def __init__(self, routers: Iterable[Any], settings: Settings):
        self.table = [
            (route, policy_of(route))
            for router in routers
            for route in router.routes
            if isinstance(route, APIRoute)
        ]
        # a path without parameters is found by a lookup, not a match against every route —
        # when the scan would find it first too (no route before it takes the same request)
        self.static: dict[tuple[str, str], RoutePolicy] = {}
        for i, (route, policy) in enumerate(self.table):
            if route.param_convertors:
                continue
            for method in route.methods or ():
                probe = {"type": "http", "method": method, "path": route.path, "root_path": ""}
                if all(r.matches(probe)[0] != Match.FULL for r, _ in self.table[:i]):
                    self.static.setdefault((method, route.path), policy)
        self.limits: dict[BodyKind, int] = {
            "upload": int(settings.max_upload_mb * (1 << 20)),
            "texts": text_body_limit(settings),
            "settings": SETTINGS_BODY_LIMIT,
        }

    def __call__(self, scope: Scope) -> RoutePolicy | None:
        """The policy of the route the request goes to (None: no route takes it); looked up
        once a request."""
        state = scope.setdefault("state", {})
        if "route_policy" not in state:
            static = self.static.get((scope.get("method", ""), scope.get("path", "")))
            state["route_policy"] = static or next(
                (p for route, p in self.table if route.matches(scope)[0] == Match.FULL), None
            )
        found: RoutePolicy | None = state["route_policy"]
        return found

    def body_limit(self, scope: Scope) -> int:
        policy = self(scope) if scope.get("method") in ("POST", "PUT", "PATCH") else None
        return self.limits[policy.body if policy else "settings"]
