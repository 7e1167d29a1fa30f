"""API keys in the store: sha256 digests of the secrets (never the secrets), with their
scopes and where they came from — ``env`` (MSLM_API_KEYS, kept equal to it at every start)
or ``bootstrap`` (the admin key a store with no usable key gets once). Checking a request's
key, and what the scopes allow, is the API's (``api.auth``)."""

from __future__ import annotations

import hashlib
import secrets
import uuid
from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from .tables import ApiKey, utcnow


def hash_key(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def sync_configured(session: Session, configured: Iterable[tuple[str, frozenset[str]]]) -> None:
    """Make the store's ``env`` keys equal to ``configured`` (secret, scopes): a new one is
    added, a known one takes its scopes (and is usable again), one no longer configured is
    revoked. Separate API replicas starting at once may each add the same new key: the one
    whose commit loses the race reads the keys again and keeps the winner's row."""
    wanted = {hash_key(secret): scopes for secret, scopes in configured}
    try:
        _sync(session, wanted)
    except IntegrityError:
        session.rollback()
        _sync(session, wanted)


def _sync(session: Session, wanted: dict[str, frozenset[str]]) -> None:
    existing = {
        k.key_hash: k for k in session.scalars(select(ApiKey).where(ApiKey.source == "env"))
    }
    for digest, scopes in wanted.items():
        row = existing.get(digest)
        text = "+".join(sorted(scopes))
        if row is None:
            session.add(
                ApiKey(
                    id=f"key-{uuid.uuid4().hex[:10]}",
                    key_hash=digest,
                    prefix=digest[:8],
                    scopes=text,
                    source="env",
                )
            )
        else:
            row.scopes, row.revoked_at = text, None
    for digest, row in existing.items():
        if digest not in wanted and row.revoked_at is None:
            row.revoked_at = utcnow()
    session.commit()


def ensure_admin_key(session: Session) -> str | None:
    """Create an admin key when the store has no usable key; return its secret (shown once),
    or None when keys exist."""
    if session.scalar(select(ApiKey.id).where(ApiKey.revoked_at.is_(None)).limit(1)):
        return None
    secret = "mslm_" + secrets.token_urlsafe(32)
    session.add(
        ApiKey(
            id=f"key-{uuid.uuid4().hex[:10]}",
            key_hash=hash_key(secret),
            prefix=secret[:9],
            scopes="admin",
            source="bootstrap",
        )
    )
    session.commit()
    return secret


def is_admin(session: Session, key_id: str | None) -> bool:
    """Whether ``key_id`` names a usable (not revoked) key with the admin scope."""
    row = session.get(ApiKey, key_id) if key_id else None
    return row is not None and row.revoked_at is None and "admin" in row.scopes.split("+")


def usable_keys(session: Session) -> list[ApiKey]:
    """Every key not revoked."""
    return list(session.scalars(select(ApiKey).where(ApiKey.revoked_at.is_(None))))
