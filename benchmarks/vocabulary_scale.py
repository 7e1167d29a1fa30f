"""What a large vocabulary costs (issue 29 item 3): import, activation and a restart.

    python benchmarks/vocabulary_scale.py [--concepts 1000000] [--names 3]

A synthetic TSV of ``--concepts`` concepts, each with a name and ``--names - 1`` synonyms of
clinical-looking words, goes through what the service does with it, each phase in a process of
its own so that its peak memory is its own:

- **import**: read and checked (``read_vocabulary``), indexed (character n-gram TF-IDF) and the
  index saved — ``POST /v1/vocabularies`` / ``mslm vocab import``;
- **activate**: the linker built from the saved index — what a replica does when a
  vocabulary is activated, and at every start while it is the active one (a restart);
- **link**: 1,000 look-ups through it.

Writes ``results/vocabulary_scale.json``; the last line printed is its headline.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import emit

SYLLABLES = ("car di o my o path ic neu ro blast o ma he pa tic ren al ar thr itis").split()  # noqa: SIM905


def synthesize(path: Path, concepts: int, names: int, seed: int = 29) -> None:
    rng = random.Random(seed)

    def word() -> str:
        return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 5)))

    with open(path, "w", encoding="utf-8") as fh:
        fh.write("# Synthetic: benchmarks/vocabulary_scale.py\n")
        for i in range(concepts):
            label = " ".join(word() for _ in range(rng.randint(1, 3)))
            synonyms = "|".join(
                " ".join(word() for _ in range(rng.randint(1, 3))) for _ in range(names - 1)
            )
            fh.write(f"S{i:07d}\t{label}\t{synonyms}\n" if synonyms else f"S{i:07d}\t{label}\n")


def phase(name: str, vocabulary: Path, cache: Path) -> dict:
    """One phase, in this process (the parent runs each in a child)."""
    from mslm_core.linking.builtin import cached_index, load_linker
    from mslm_core.linking.vocabulary import read_vocabulary

    started = time.perf_counter()
    if name == "import":
        vocabulary_obj = read_vocabulary(vocabulary)
        cached_index(vocabulary, cache, vocabulary_obj)
        out = {"concepts": len(vocabulary_obj)}
    else:
        linker = load_linker(vocabulary, cache=cache)
        out = {"concepts": len(linker.vocabulary)}
        if name == "link":
            queries = [
                n for _, n in linker.vocabulary.names()[:: max(1, len(linker.vocabulary) // 1000)]
            ]
            started = time.perf_counter()
            linker.candidates(queries[:1000])
            out["ms_per_lookup"] = round(1000 * (time.perf_counter() - started) / 1000, 3)
    out["seconds"] = round(time.perf_counter() - started, 2)
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concepts", type=int, default=1_000_000)
    ap.add_argument("--names", type=int, default=3, help="names per concept")
    ap.add_argument("--phase", help=argparse.SUPPRESS)
    ap.add_argument("--vocabulary", help=argparse.SUPPRESS)
    ap.add_argument("--cache", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.phase:
        print(json.dumps(phase(args.phase, Path(args.vocabulary), Path(args.cache))))
        return
    with tempfile.TemporaryDirectory(prefix="mslm-vocab-scale-") as tmp:
        vocabulary, cache = Path(tmp) / "vocabulary.tsv", Path(tmp) / "index"
        started = time.perf_counter()
        synthesize(vocabulary, args.concepts, args.names)
        made = round(time.perf_counter() - started, 1)
        results = {}
        for name in ("import", "activate", "link"):
            done = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--phase",
                    name,
                    "--vocabulary",
                    str(vocabulary),
                    "--cache",
                    str(cache),
                ],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, "TOKENIZERS_PARALLELISM": "false"},
            )
            results[name] = json.loads(done.stdout.strip().splitlines()[-1])
            print(name, results[name], file=sys.stderr)
        size_mb = round(vocabulary.stat().st_size / 1e6, 1)
    figures = {
        "concepts": args.concepts,
        "import_s": results["import"]["seconds"],
        "activate_s": results["activate"]["seconds"],  # also what a restart adds
        "import_peak_rss_mb": results["import"]["peak_rss_mb"],
        "activate_peak_rss_mb": results["activate"]["peak_rss_mb"],
        "ms_per_lookup": results["link"]["ms_per_lookup"],
    }
    emit(
        "vocabulary_scale",
        figures,
        {
            "names_per_concept": args.names,
            "file_mb": size_mb,
            "synthesized_s": made,
            "phases": results,
        },
    )


if __name__ == "__main__":
    main()
