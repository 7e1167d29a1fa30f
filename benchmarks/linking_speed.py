"""What concept linking adds to annotate time, with synthetic vocabularies of 10k and 100k
concepts (issue 21: at most 15 % at 10k concepts, and sub-linear in vocabulary size).

The same sentences are annotated by one engine without and with the linker, interleaved,
median of ``--rounds``; the linker's own time per mention is measured on the entities found,
and its time on the sentences' gold mentions gives the share at a real mention density (a
briefly trained model finds many more entities than there are).
Synthetic names are drawn from consonant-vowel syllables, three names per concept.

    python benchmarks/linking_speed.py --model BUNDLE [--sentences 300] [--rounds 3]

Writes benchmarks/results/linking/speed.json.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA, emit

from mslm_core.corpus import read_conll
from mslm_core.linking import Concept, Linker, Vocabulary
from mslm_core.pipeline import AnnotationPipeline
from mslm_core.types import Entity

# consonant-vowel(-consonant) syllables: about 2,300, so that n-grams are shared the way a
# real vocabulary's are, not by every name
_C, _V = "bcdfghklmnprstvxyz", "aeiou"
SYLLABLES = [c + v + e for c in _C for v in _V for e in ("", *_C)]


def synthetic(n: int, seed: int = 0) -> Vocabulary:
    rng = random.Random(seed)

    def word() -> str:
        return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))

    concepts = {}
    for i in range(n):
        names = [" ".join(word() for _ in range(rng.randint(1, 3))) for _ in range(3)]
        concepts[f"S{i:06d}"] = Concept(f"S{i:06d}", names[0], names[1:])
    return Vocabulary(f"synthetic-{n}", concepts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", default=str(DATA / "NCBI-disease-IOB" / "test.tsv"))
    ap.add_argument("--sentences", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sizes", default="10000,100000")
    args = ap.parse_args()
    sentences = read_conll(args.data).sentences[: args.sentences]
    texts = [s.text for s in sentences]
    # the gold mentions as entities: linking time at a real mention density, whatever the
    # model (a briefly trained one finds far more mentions than there are)
    gold = [
        [Entity(a, b, s.text[a:b], label, 1.0, 1.0, 1.0) for a, b, label in s.char_mentions()]
        for s in sentences
    ]
    n_gold = sum(map(len, gold))
    engine = AnnotationPipeline.from_bundle(args.model)
    engine(texts[:8])  # warm up
    entities = engine(texts)
    n_mentions = sum(map(len, entities))
    figures: dict = {
        "sentences": len(texts),
        "mentions_found": n_mentions,
        "gold_mentions": n_gold,
        "sizes": {},
    }
    for size in (int(s) for s in args.sizes.split(",")):
        started = time.perf_counter()
        linker = Linker(synthetic(size), threshold=0.5, k=5)
        build = time.perf_counter() - started
        plain, linked, link_only, link_gold = [], [], [], []
        for _ in range(args.rounds):
            engine.linker = None
            t0 = time.perf_counter()
            engine(texts)
            plain.append(time.perf_counter() - t0)
            engine.linker = linker
            t0 = time.perf_counter()
            engine(texts)
            linked.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            linker.apply_all(texts, entities)
            link_only.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            linker.apply_all(texts, gold)
            link_gold.append(time.perf_counter() - t0)
        engine.linker = None
        figures["sizes"][str(size)] = {
            "annotate_s": round(statistics.median(plain), 3),
            "annotate_with_linking_s": round(statistics.median(linked), 3),
            "added_share": round(statistics.median(linked) / statistics.median(plain) - 1, 4),
            "added_share_at_gold_density": round(
                statistics.median(link_gold) / statistics.median(plain), 4
            ),
            "linking_ms_per_mention": round(1000 * statistics.median(link_only) / n_mentions, 4),
            "index_build_s": round(build, 2),
        }
    sizes = sorted(figures["sizes"], key=int)
    if len(sizes) >= 2:
        lo, hi = figures["sizes"][sizes[0]], figures["sizes"][sizes[-1]]
        figures["per_mention_growth"] = round(
            hi["linking_ms_per_mention"] / lo["linking_ms_per_mention"], 2
        )
        figures["vocabulary_growth"] = round(int(sizes[-1]) / int(sizes[0]), 2)
    emit("linking/speed", figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
