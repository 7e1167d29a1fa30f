"""Concept linking: vocabularies (TSV, OBO, or a corpus's mention → concept pairs; the
packaged MeSH default in :mod:`.builtin`), abbreviations defined in a text (Schwartz–Hearst),
and a character n-gram TF-IDF linker with a threshold, whose index can be saved and loaded."""

from .abbreviations import abbreviations, best_long_form
from .linker import Candidate, Linker, LinkerIndex, normalise
from .vocabulary import Concept, Vocabulary, from_corpora, read_obo, read_tsv, read_vocabulary

__all__ = [
    "Candidate",
    "Concept",
    "Linker",
    "LinkerIndex",
    "Vocabulary",
    "abbreviations",
    "best_long_form",
    "from_corpora",
    "normalise",
    "read_obo",
    "read_tsv",
    "read_vocabulary",
]
