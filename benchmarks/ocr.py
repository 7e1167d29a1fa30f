"""What the OCR mending (mslm_core.ocr) changes in what the model reads: the words of the
note-style check set's scanned notes it mends, and the words of clean text it should not touch
(the source corpora and the check set's other notes), with its cost per word.

    python benchmarks/ocr.py [--cache DIR] [--data DIR]

``--cache``: the corpus cache holding MACCROBAT2020 and CHIA (``mslm corpora fetch clinical``;
their brat ``.txt`` files are read); ``--data``: the folder of the BLURB corpora in IOB
(BC5CDR-IOB, NCBI-disease-IOB: every split's words). A corpus not there is left out and said so.

Writes benchmarks/results/ocr.json: per source, the words read, those changed and the changes
most often made.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

from common import DATA, emit
from note_style import notes

from mslm_core.corpora.pinned import default_cache
from mslm_core.corpus import read_corpus
from mslm_core.ocr import lexicon, mended
from mslm_core.text import words_of


def sources(cache: Path, data: Path) -> tuple[dict[str, list[str]], list[str]]:
    """Each source's words (in order), and the sources not found."""
    found: dict[str, list[str]] = {}
    missing: list[str] = []
    for name in ("MACCROBAT2020", "CHIA"):
        files = sorted((cache / name).rglob("*.txt"))
        if files:
            found[name] = [w for f in files for w in words_of(f.read_text(errors="replace"))]
        else:
            missing.append(name)
    for name in ("BC5CDR-IOB", "NCBI-disease-IOB"):
        files = sorted((data / name).glob("*.tsv"))
        if files:
            found[name] = [w for f in files for s in read_corpus(f) for w in s.words]
        else:
            missing.append(name)
    for scanned, name in ((True, "note-style, scanned notes"), (False, "note-style, other notes")):
        found[name] = [
            w for n in notes("all") if (n.style == "ocr") == scanned for w in words_of(n.text)
        ]
    return found, missing


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=None, help="the corpus cache")
    parser.add_argument("--data", type=Path, default=DATA, help="the BLURB corpora in IOB")
    parser.add_argument("--rounds", type=int, default=3, help="timing rounds (median)")
    args = parser.parse_args()
    started = time.perf_counter()
    lexicon()
    load_s = time.perf_counter() - started
    found, missing = sources(args.cache or default_cache(), args.data)
    per_source: dict[str, dict] = {}
    for name, words in found.items():
        pairs = ((w, mended(w)) for w in words)
        changes = Counter(pair for pair in pairs if pair[0] != pair[1])
        per_source[name] = {
            "words": len(words),
            "changed": sum(changes.values()),
            "share_changed": round(sum(changes.values()) / max(len(words), 1), 6),
            "changes": [f"{a} → {b}: {n}" for (a, b), n in changes.most_common(40)],
        }
    every = [w for words in found.values() for w in words]
    timings = []
    for _ in range(args.rounds):
        t = time.perf_counter()
        for w in every:
            mended(w)
        timings.append((time.perf_counter() - t) / len(every) * 1e6)
    clean = [k for k in per_source if k != "note-style, scanned notes"]
    figures = {
        "scanned_notes_words_changed": per_source["note-style, scanned notes"]["changed"],
        "clean_words": sum(per_source[k]["words"] for k in clean),
        "clean_words_changed": sum(per_source[k]["changed"] for k in clean),
        "microseconds_per_word": round(statistics.median(timings), 3),
        "lexicon_words": len(lexicon()),
        "lexicon_load_seconds": round(load_s, 2),
        "sources_missing": missing,
    }
    emit("ocr", figures, {"sources": per_source})
    return 0


if __name__ == "__main__":
    sys.exit(main())
