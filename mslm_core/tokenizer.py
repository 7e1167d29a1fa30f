"""Words → subword ids, through one small interface with two implementations:

- :class:`HFWordTokenizer` wraps a ``transformers`` fast tokenizer (training, PyTorch);
- :class:`RustWordTokenizer` reads a bundle's ``tokenizer.json`` with the ``tokenizers``
  library alone, so the ONNX serving path imports neither ``transformers`` nor ``torch``.

A ``transformers`` fast tokenizer *is* the same Rust tokenizer, so both give identical ids
(tested on a real corpus).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

# (ids, word index of each id — None for special tokens) per sequence
Encoded = list[tuple[list[int], list[int | None]]]


class WordTokenizer(Protocol):
    pad_token_id: int

    def encode_words(self, batch: list[list[str]], add_special_tokens: bool) -> Encoded:
        """Subword ids of pre-split words, and the word each id belongs to."""
        ...


def tokenizable(word: str) -> str:
    """``word`` as the Rust tokenizer can take it: a lone surrogate (possible in a Python
    string, not in UTF-8) becomes U+FFFD. Offsets are unaffected — words are mapped back
    by index, never by their text."""
    if word.isascii():
        return word
    try:
        word.encode("utf-8")
    except UnicodeEncodeError:
        return word.encode("utf-8", "replace").decode("utf-8").replace("?", "\ufffd")
    return word


class HFWordTokenizer:
    """Over a ``transformers`` fast tokenizer."""

    def __init__(self, tokenizer: Any):
        if not getattr(tokenizer, "is_fast", False):
            raise ValueError("a fast (Rust) tokenizer is required for word alignment")
        self.tokenizer = tokenizer
        self.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    def encode_words(self, batch: list[list[str]], add_special_tokens: bool) -> Encoded:
        if not batch:
            return []
        enc = self.tokenizer(
            [[tokenizable(w) for w in words] for words in batch],
            is_split_into_words=True,
            add_special_tokens=add_special_tokens,
            return_attention_mask=False,
            return_token_type_ids=False,
        )
        return [(list(enc["input_ids"][k]), enc.word_ids(k)) for k in range(len(batch))]


class RustWordTokenizer:
    """Over ``tokenizers.Tokenizer`` loaded from a saved ``tokenizer.json``."""

    def __init__(self, tokenizer: Any, pad_token_id: int):
        self.tokenizer = tokenizer
        self.pad_token_id = pad_token_id

    @classmethod
    def from_directory(cls, directory: str | Path) -> RustWordTokenizer:
        from tokenizers import Tokenizer

        directory = Path(directory)
        tok = Tokenizer.from_file(str(directory / "tokenizer.json"))
        tok.no_truncation()
        tok.no_padding()
        pad = None
        config = directory / "tokenizer_config.json"
        if config.exists():
            token = json.loads(config.read_text(encoding="utf-8")).get("pad_token")
            if isinstance(token, dict):  # {"content": "[PAD]", ...} in some versions
                token = token.get("content")
            if isinstance(token, str):
                pad = tok.token_to_id(token)
        return cls(tok, pad if pad is not None else 0)

    def encode_words(self, batch: list[list[str]], add_special_tokens: bool) -> Encoded:
        if not batch:
            return []
        encodings = self.tokenizer.encode_batch(
            [[tokenizable(w) for w in words] for words in batch],
            is_pretokenized=True,
            add_special_tokens=add_special_tokens,
        )
        return [(e.ids, e.word_ids) for e in encodings]


def as_word_tokenizer(tokenizer: Any) -> WordTokenizer:
    """A :class:`WordTokenizer` as is, or a ``transformers`` fast tokenizer wrapped."""
    if hasattr(tokenizer, "encode_words"):
        as_is: WordTokenizer = tokenizer
        return as_is
    return HFWordTokenizer(tokenizer)
