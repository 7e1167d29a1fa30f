"""The language a text is written in, and whether a model reads it.

A model reads the language it was trained on (every corpus of the clinical recipe is English);
a note in another language gets a warning, or, where a deployment asks for it
(``MSLM_REFUSE_OTHER_LANGUAGES``), is refused. The language is identified by py3langid
(Lui & Baldwin's langid.py: a naive Bayes model over byte n-grams, its model an npz read
without pickle), limited to the languages below, a text as a whole: a line of shorthand
("Pt c/o SOB, N/V") is too little to tell from, so a text of fewer than
:data:`MIN_LETTERS` letters gets no verdict and no warning.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

#: A text with fewer letters than this is not judged.
MIN_LETTERS = 40
#: The probability under which another language's verdict is not believed (on the note-style
#: check set's 99 English notes and their lines, none other than English reached 0.35; its 60
#: Spanish, French, German, Italian, Portuguese and Dutch notes, 49 reached 0.5 as themselves:
#: benchmarks/results/note-style).
MIN_PROBABILITY = 0.5
#: The languages told apart: the most written ones with a Latin, Cyrillic, Greek, Arabic,
#: Hebrew or CJK script (so that a note of clinical shorthand is not read as a language of a
#: few thousand speakers).
LANGUAGES = (
    "en", "es", "fr", "de", "it", "pt", "nl", "sv", "da", "no", "fi", "pl", "cs", "sk", "hu",
    "ro", "hr", "sl", "et", "lv", "lt", "tr", "el", "ru", "uk", "bg", "sr", "ar", "he", "fa",
    "hi", "zh", "ja", "ko", "vi", "id", "ms", "tl",
)  # fmt: skip


@dataclass(frozen=True)
class Language:
    """A text's language (ISO 639-1) and how sure the identification is (0–1)."""

    code: str
    probability: float

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "probability": round(self.probability, 4)}

    def warning(self, expected: str) -> str:
        """What an answer says of a text in this language when the model reads ``expected``."""
        return (
            f"the text is written in {self.code} (probability {self.probability:.2f}); the "
            f"model reads {expected or 'another language'}: its entities may be wrong"
        )


@lru_cache(maxsize=1)
def _identifier() -> Any:
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    identifier.set_languages(list(LANGUAGES))
    return identifier


def identify(text: str) -> Language | None:
    """The language of ``text``, or None when it holds too few letters to tell."""
    if sum(c.isalpha() for c in text) < MIN_LETTERS:
        return None
    code, probability = _identifier().classify(text)
    return Language(str(code), float(probability))


def other_language(text: str, expected: str) -> Language | None:
    """The language of ``text`` when it is surely not ``expected``, else None."""
    found = identify(text)
    if found is None or found.code == expected or found.probability < MIN_PROBABILITY:
        return None
    return found
