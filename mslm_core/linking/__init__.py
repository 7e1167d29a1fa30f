"""Concept linking (issue 21, in progress): vocabularies (TSV, OBO, or a corpus's mention →
concept pairs), abbreviations defined in a text (Schwartz–Hearst), and a character n-gram
TF-IDF linker with a threshold. Not yet wired into annotate: see the README's "Concepts"."""

from .abbreviations import abbreviations, best_long_form
from .linker import Candidate, Linker, normalise
from .vocabulary import Concept, Vocabulary, from_corpora, read_obo, read_tsv

__all__ = [
    "Candidate",
    "Concept",
    "Linker",
    "Vocabulary",
    "abbreviations",
    "best_long_form",
    "from_corpora",
    "normalise",
    "read_obo",
    "read_tsv",
]
