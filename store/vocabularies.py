"""Vocabularies a site imports (``mslm vocab import``, ``POST /v1/vocabularies``): the file
checked and indexed, stored and recorded; listed, looked up, made the one answers link to,
and deleted when answers do not link to it. The linker built from one is ``store.linking``."""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from mslm_core.bundle import sha256_file
from mslm_core.errors import ConfigError, CorpusError
from mslm_settings import Settings

from .access import page
from .errors import Conflict, NotFound
from .files import record, shown_name, staged
from .paths import vocabulary_dir
from .serving import lock_state
from .tables import StoredVocabulary, new_id, utcnow

if TYPE_CHECKING:
    from mslm_core.linking.linker import LinkerIndex
    from mslm_core.linking.vocabulary import Vocabulary


def import_vocabulary(
    settings: Settings,
    session: Session,
    path: Path,
    filename: str,
    name: str | None = None,
    url_pattern: str = "",
    created_by: str | None = None,
    rerank_encoder: str | None = None,
) -> StoredVocabulary:
    """Check a vocabulary file (TSV, or OBO by its name ``*.obo``), index it, and store both;
    a bad file raises :class:`CorpusError` naming ``filename``'s line and field, and stores
    nothing. ``url_pattern``: a concept's page, ``{id}`` standing for its id.
    ``rerank_encoder``: also prepare the re-rank of candidates by this encoder's embeddings
    (``minilm``; needs torch, so the command line of an install with torch, not the API)."""
    from mslm_core.linking import Linker
    from mslm_core.linking.builtin import cached_index
    from mslm_core.linking.vocabulary import is_obo, read_vocabulary

    shown = shown_name(filename, "vocabulary").removesuffix(".gz") or "vocabulary"
    fmt = "obo" if is_obo(shown) else "tsv"
    vocabulary_id = new_id("voc")
    with staged(settings.artifacts / "vocabularies") as staging:
        stored = staging / f"vocabulary.{fmt}"
        if path.suffix == ".gz":  # a local file (the packaged one); uploads are spooled plain
            with gzip.open(path, "rb") as src, open(stored, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
        else:
            shutil.copyfile(path, stored)
        try:
            # named by the form, else by the file's first line, else by the client's file
            vocabulary = read_vocabulary(stored, name or None)
            if not name and vocabulary.source == os.fspath(stored):
                vocabulary.name = Path(shown).stem or vocabulary.name
            # the index is built now, so that activating it later is quick and cannot fail
            # on a vocabulary with no usable name
            index = cached_index(stored, staging / "index", vocabulary)
            Linker(vocabulary, url_pattern=url_pattern, index=index)
            if rerank_encoder:
                _prepare_rerank(vocabulary, index, staging / "rerank", rerank_encoder)
        except CorpusError as exc:  # name the file as the client knows it
            raise CorpusError(
                [type(i)(shown, i.line, i.message, i.field) for i in exc.issues]
            ) from None
        except ValueError as exc:
            raise CorpusError.single(shown, None, str(exc)) from None
        target = vocabulary_dir(settings, vocabulary_id)
        os.replace(staging, target)
    row = StoredVocabulary(
        id=vocabulary_id,
        name=vocabulary.name[:200],
        filename=shown,
        format=fmt,
        path=str(target.relative_to(settings.artifacts)),
        sha256=sha256_file(target / stored.name),
        bytes=(target / stored.name).stat().st_size,
        concepts=len(vocabulary),
        names=len(vocabulary.names()),
        url_pattern=url_pattern,
        source="" if vocabulary.source == os.fspath(stored) else vocabulary.source[:2000],
        created_by=created_by,
    )
    record(session, row, target)
    return row


def _prepare_rerank(vocabulary: Vocabulary, index: LinkerIndex, folder: Path, encoder: str) -> None:
    try:
        from mslm_core.linking.rerank import prepare
    except ImportError as exc:  # pragma: no cover - the API image has no torch
        raise ConfigError(f"the re-rank needs torch and transformers ({exc})") from None
    try:
        prepare(vocabulary, index, folder, encoder)
    except ImportError as exc:
        raise ConfigError(
            f"the re-rank needs torch and transformers: run mslm vocab import --rerank where "
            f"they are installed, such as the worker image ({exc})"
        ) from None
    except OSError as exc:
        raise ConfigError(f"encoder {encoder!r} for the re-rank: {exc}") from None


def vocabulary_file(settings: Settings, row: StoredVocabulary) -> Path:
    return settings.artifacts / row.path / f"vocabulary.{row.format}"


def find_vocabulary(session: Session, vocabulary_id: str) -> StoredVocabulary | None:
    return session.get(StoredVocabulary, vocabulary_id)


def get_vocabulary(session: Session, vocabulary_id: str) -> StoredVocabulary:
    """The vocabulary (every key sees every vocabulary), or NotFound."""
    row = session.get(StoredVocabulary, vocabulary_id)
    if row is None:
        raise NotFound(f"vocabulary {vocabulary_id}")
    return row


def list_vocabularies(
    session: Session, limit: int, offset: int
) -> tuple[list[StoredVocabulary], int]:
    """One page of the imported vocabularies, newest first, and their count."""
    return page(session, StoredVocabulary, limit, offset)


def set_active_vocabulary(session: Session, vocabulary_id: str | None) -> None:
    """Link answers to ``vocabulary_id`` (None: the deployment's own). One deleted meanwhile
    is NotFound (the serving state's row is locked first, then the vocabulary's)."""
    state = lock_state(session)
    if (
        vocabulary_id is not None
        and session.get(StoredVocabulary, vocabulary_id, with_for_update=True) is None
    ):
        session.rollback()
        raise NotFound(f"vocabulary {vocabulary_id}")
    state.active_vocabulary_id, state.updated_at = vocabulary_id, utcnow()
    session.commit()


def delete_vocabulary(settings: Settings, session: Session, vocabulary_id: str) -> None:
    """Delete a stored vocabulary answers do not link to (the same locks as activation)."""
    state = lock_state(session)
    row = session.get(StoredVocabulary, vocabulary_id, with_for_update=True)
    if row is None:
        session.rollback()
        raise NotFound(f"vocabulary {vocabulary_id}")
    if state.active_vocabulary_id == vocabulary_id:
        session.rollback()
        raise Conflict(
            f"vocabulary {vocabulary_id} is in use; activate another one (or 'default') first"
        )
    session.delete(row)
    session.commit()
    shutil.rmtree(settings.artifacts / row.path, ignore_errors=True)
