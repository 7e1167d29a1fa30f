"""Public corpora the product trains its first models on: fetched at pinned commits with
pinned sha256 into a cache outside any repository (``pinned``), read from brat standoff
(``brat``), and prepared for the clinical schema (``clinical``)."""

from .brat import (
    BratDocument,
    BratEntity,
    brat_documents,
    document_records,
    read_brat,
    resolve_overlaps,
)
from .pinned import (
    CACHE_ENV,
    PinnedCorpus,
    cached_names,
    corpora,
    default_cache,
    fetch_corpus,
    get_corpus,
    pack,
    unpack,
)

__all__ = [
    "CACHE_ENV",
    "BratDocument",
    "BratEntity",
    "PinnedCorpus",
    "brat_documents",
    "cached_names",
    "corpora",
    "default_cache",
    "document_records",
    "fetch_corpus",
    "get_corpus",
    "pack",
    "read_brat",
    "resolve_overlaps",
    "unpack",
]
