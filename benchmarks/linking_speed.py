"""What concept linking adds to annotate time on a served model (issue 54: at most 15 %, with
the packaged vocabulary and with a full Athena vocabulary).

The same sentences are annotated as the service annotates them (the clinical context on), once
without linking and once with each vocabulary, interleaved, median of ``--rounds``. With
linking, the first pass is *cold* (a fresh linker: every distinct mention looked up) and the
next ones *warm* (the linker keeps the candidates of the texts it has seen, as a serving
replica does): both are reported. The linking step is also timed inside each run: its share
of the annotate time, cold, is the one held against the target (the difference of two whole
runs carries the forward pass's noise too).

    python benchmarks/linking_speed.py --model BUNDLE [--data FILE ...] [--sentences 2000]
        [--rounds 3] [--vocabulary NAME=FILE ...] [--sizes 10000,100000]

``--data``: annotated corpora whose sentences are annotated (default: the clinical recipe's
prepared MACCROBAT2020 and CHIA test files when the corpus cache has them, else NCBI-disease's
test file); ``--vocabulary``: more vocabularies than the packaged MeSH (an Athena import's TSV:
``benchmarks/athena_scale.py --keep`` leaves a full-size one); ``--sizes``: also synthetic
vocabularies of these sizes (three names per concept).

Writes benchmarks/results/linking/speed.json.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

from common import DATA, emit

from mslm_core.context import ContextEngine
from mslm_core.corpora.pinned import default_cache
from mslm_core.corpus import read_corpus
from mslm_core.linking import Concept, Linker, Vocabulary
from mslm_core.linking.builtin import DEFAULT_VOCABULARY, load_linker, user_cache
from mslm_core.pipeline import AnnotationPipeline

# consonant-vowel(-consonant) syllables: about 2,300, so that n-grams are shared the way a
# real vocabulary's are, not by every name
_C, _V = "bcdfghklmnprstvxyz", "aeiou"
SYLLABLES = [c + v + e for c in _C for v in _V for e in ("", *_C)]
CLINICAL_TEST = ("MACCROBAT2020", "CHIA")


def synthetic(n: int, seed: int = 0) -> Vocabulary:
    rng = random.Random(seed)

    def word() -> str:
        return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))

    concepts = {}
    for i in range(n):
        names = [" ".join(word() for _ in range(rng.randint(1, 3))) for _ in range(3)]
        concepts[f"S{i:06d}"] = Concept(f"S{i:06d}", names[0], names[1:])
    return Vocabulary(f"synthetic-{n}", concepts)


def default_data() -> list[Path]:
    prepared = default_cache() / "prepared" / "clinical-v1"
    found = [prepared / name / "test.jsonl" for name in CLINICAL_TEST]
    if all(p.is_file() for p in found):
        return found
    return [DATA / "NCBI-disease-IOB" / "test.tsv"]


class Timed:
    """A linker whose ``apply_all`` (the pipeline's linking step) is timed."""

    def __init__(self, linker: Linker):
        self.linker, self.seconds = linker, 0.0

    def apply_all(self, texts, entities):
        started = time.perf_counter()
        try:
            return self.linker.apply_all(texts, entities)
        finally:
            self.seconds += time.perf_counter() - started


def measure(engine: AnnotationPipeline, linker: Linker, texts: list[str], rounds: int) -> dict:
    """Annotate time without linking and with ``linker``, cold and warm, interleaved; and the
    linking step's own time inside each (the share held against the target: the difference
    of two whole runs carries the forward pass's noise, a few % of it)."""
    plain_options = engine.options(linking=False)
    plain: list[float] = []
    cold: list[float] = []
    warm: list[float] = []
    step_cold: list[float] = []
    step_warm: list[float] = []
    found = 0
    for _ in range(rounds):
        engine.linker = None
        t0 = time.perf_counter()
        engine(texts, plain_options)
        plain.append(time.perf_counter() - t0)
        linker.clear_cache()
        for runs, steps in ((cold, step_cold), (warm, step_warm)):
            timed = Timed(linker)
            engine.linker = timed  # type: ignore[assignment]
            t0 = time.perf_counter()
            entities = engine(texts)
            runs.append(time.perf_counter() - t0)
            steps.append(timed.seconds)
        found = sum(e.candidates is not None for ents in entities for e in ents)
    engine.linker = None
    base = statistics.median(plain)
    median = statistics.median
    distinct = {e.text.lower() for ents in entities for e in ents if e.candidates is not None}
    return {
        "annotate_s": round(base, 3),
        "annotate_with_linking_cold_s": round(median(cold), 3),
        "annotate_with_linking_warm_s": round(median(warm), 3),
        "linking_step_cold_s": round(median(step_cold), 3),
        "linking_step_warm_s": round(median(step_warm), 3),
        "linking_share_cold": round(median(step_cold) / median(cold), 4),
        "linking_share_warm": round(median(step_warm) / median(warm), 4),
        "added_share_cold": round(median(cold) / base - 1, 4),
        "added_share_warm": round(median(warm) / base - 1, 4),
        "mentions_linked": found,
        "distinct_mentions": len(distinct),
        "ms_per_distinct_mention_cold": round(1000 * median(step_cold) / max(len(distinct), 1), 4),
        "concepts_given": sum(e.concept is not None for ents in entities for e in ents),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", action="append", default=[])
    ap.add_argument("--sentences", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--vocabulary", action="append", default=[], metavar="NAME=FILE")
    ap.add_argument("--sizes", default="", help="synthetic vocabularies of these sizes too")
    args = ap.parse_args()
    files = [Path(p) for p in args.data] or default_data()
    texts = [s.text for f in files for s in read_corpus(f).sentences][: args.sentences]
    engine = AnnotationPipeline.from_bundle(args.model, context=ContextEngine.default())
    engine(texts[:8])  # warm up
    figures: dict = {
        "model": engine.id,
        "engine": {"backend": engine.info.backend, "precision": engine.info.precision},
        "data": [f"{f.parent.name}/{f.name}" for f in files],
        "sentences": len(texts),
        "vocabularies": {},
    }
    vocabularies = {"packaged MeSH": str(DEFAULT_VOCABULARY)}
    vocabularies.update(item.split("=", 1) for item in args.vocabulary)
    for name, path in vocabularies.items():
        started = time.perf_counter()
        linker = load_linker(path, cache=user_cache())
        load_s = time.perf_counter() - started
        figures["vocabularies"][name] = {
            "concepts": len(linker.vocabulary),
            "names": len(linker.index.name_concept),
            "load_s": round(load_s, 1),
            **measure(engine, linker, texts, args.rounds),
        }
        print(name, figures["vocabularies"][name], file=sys.stderr)
    for size in (int(s) for s in args.sizes.split(",") if s.strip()):
        linker = Linker(synthetic(size), k=5)
        figures["vocabularies"][f"synthetic {size}"] = {
            "concepts": size,
            **measure(engine, linker, texts, args.rounds),
        }
    emit("linking/speed", figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
