"""The linker of a vocabulary: the deployment's own (MSLM_VOCABULARY) or one a site imported
into the store. One builder for every API replica and every annotation worker."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session, sessionmaker

from mslm_core.errors import ConfigError
from mslm_settings import Settings

from .tables import StoredVocabulary
from .vocabularies import vocabulary_file

if TYPE_CHECKING:
    from mslm_core.linking import Linker


def deployment_vocabulary(settings: Settings) -> Path | None:
    """MSLM_VOCABULARY's file: the packaged one for ``mesh`` (the default), None for
    ``none``, else the path given."""
    from mslm_core.linking.builtin import DEFAULT_VOCABULARY

    value = str(settings.vocabulary).strip()
    if value.lower() == "none":
        return None
    if value.lower() == "mesh":
        return DEFAULT_VOCABULARY
    return Path(value).expanduser()


def build_linker(
    settings: Settings, factory: sessionmaker[Session], vocabulary_id: str | None
) -> tuple[Linker | None, str]:
    """The linker of ``vocabulary_id`` (None: the deployment's own) and where it came from
    (store | packaged | file | none). KeyError for an unknown id; MSLMError (file, line,
    field) for a file that cannot be read."""
    from mslm_core.linking.builtin import DEFAULT_VOCABULARY, load_linker

    s = settings
    if vocabulary_id is None:
        path = deployment_vocabulary(s)
        if path is None:
            return None, "none"
        try:
            linker = load_linker(
                path,
                cache=s.artifacts / "linking",
                name=s.vocabulary_name or None,
                threshold=s.link_threshold,
                k=s.link_candidates,
                url_pattern=s.vocabulary_url,
            )
        except ValueError as exc:
            raise ConfigError(f"MSLM_VOCABULARY_URL: {exc}") from None
        return linker, "packaged" if path == DEFAULT_VOCABULARY else "file"
    with factory() as session:
        row = session.get(StoredVocabulary, vocabulary_id)
        if row is None:
            raise KeyError(vocabulary_id)
        session.expunge(row)
    rerank = s.artifacts / row.path / "rerank"
    linker = load_linker(
        vocabulary_file(s, row),
        cache=s.artifacts / row.path / "index",
        rerank=rerank if rerank.is_dir() else None,
        name=row.name,
        threshold=s.link_threshold,
        k=s.link_candidates,
        url_pattern=row.url_pattern,
    )
    return linker, "store"
