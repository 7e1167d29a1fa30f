"""The vocabulary answers link to, in every replica: the deployment's own (MSLM_VOCABULARY —
the packaged MeSH vocabulary unless set otherwise) or one a site imported and activated
(``POST /v1/vocabularies/{id}/activate``), which every replica follows like the active model.
A linker's index is built once and read from the artifact store afterwards."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from mslm_core.errors import MSLMError
from mslm_core.linking import Linker
from mslm_settings import Settings
from store.errors import NotFound
from store.linking import build_linker
from store.serving import active_vocabulary_id
from store.vocabularies import find_vocabulary, set_active_vocabulary

log = logging.getLogger(__name__)

#: The id that stands for the deployment's own vocabulary in ``/v1/vocabularies/{id}/activate``.
DEFAULT = "default"


@dataclass(frozen=True)
class Linking:
    """What answers link to now: ``vocabulary_id`` None is the deployment's own."""

    vocabulary_id: str | None
    linker: Linker | None
    origin: str  # store | packaged | file | none

    def describe(self) -> dict[str, Any]:
        linker = self.linker
        reranker = linker.reranker if linker is not None else None
        return {
            "id": self.vocabulary_id or DEFAULT,
            "origin": self.origin,
            "name": linker.vocabulary.name if linker is not None else None,
            "concepts": len(linker.vocabulary) if linker is not None else 0,
            "rerank": reranker.encoder if reranker is not None else None,
        }


class VocabularyManager:
    """Builds the linker of the vocabulary the store names (the deployment's own when none),
    and follows the store when another replica activates one."""

    def __init__(self, settings: Settings, factory: sessionmaker[Session]):
        self.settings, self.factory = settings, factory
        self.last_error: str | None = None
        wanted = self._read_active()
        try:
            self.current = self.build(wanted)
        except (KeyError, MSLMError, OSError) as exc:
            if wanted is None:
                raise  # a bad MSLM_VOCABULARY stops the start
            self._failed(wanted, exc)
            self.current = self.build(None)

    @property
    def linker(self) -> Linker | None:
        return self.current.linker

    def _read_active(self) -> str | None:
        with self.factory() as session:
            return active_vocabulary_id(session)

    def build(self, vocabulary_id: str | None) -> Linking:
        """The linking of ``vocabulary_id`` (None: the deployment's own). KeyError for an
        unknown id; MSLMError (file, line, field) for a file that cannot be read."""
        linker, origin = build_linker(self.settings, self.factory, vocabulary_id)
        if linker is None:
            return Linking(None, None, "none")
        log.info(
            "linking to vocabulary %s (%s, %d concepts)",
            vocabulary_id or DEFAULT,
            origin,
            len(linker.vocabulary),
        )
        return Linking(vocabulary_id, linker, origin)

    def follow(self) -> Linking | None:
        """The new linking when the store names another vocabulary than this replica links
        to (built here: call it off the event loop), else None."""
        wanted = self._read_active()
        if wanted == self.current.vocabulary_id:
            return None
        try:
            return self.build(wanted)
        except (KeyError, MSLMError, OSError) as exc:
            self._failed(wanted, exc)
            return None

    def activate(self, vocabulary_id: str | None) -> Linking:
        """Build the linking of ``vocabulary_id`` (None: the deployment's own) and, only if
        that worked, record it in the store. NotFound for an unknown id."""
        try:
            linking = self.build(vocabulary_id)
        except KeyError:
            raise NotFound(f"vocabulary {vocabulary_id}") from None
        except (OSError, MSLMError):
            # deleted while its linker was being built (its row goes before its files): the
            # same answer as when it was gone before
            if vocabulary_id is not None and self._gone(vocabulary_id):
                raise NotFound(f"vocabulary {vocabulary_id}") from None
            raise
        with self.factory() as session:
            set_active_vocabulary(session, vocabulary_id)
        return linking

    def _gone(self, vocabulary_id: str) -> bool:
        with self.factory() as session:
            return find_vocabulary(session, vocabulary_id) is None

    def _failed(self, vocabulary_id: str | None, exc: BaseException) -> None:
        reason = f"vocabulary {vocabulary_id} cannot be used: {type(exc).__name__}: {exc}"
        if reason != self.last_error:
            current = getattr(self, "current", None)
            still = (current.vocabulary_id or DEFAULT) if current else DEFAULT
            log.error("%s; linking to %s", reason, still)
        self.last_error = reason
