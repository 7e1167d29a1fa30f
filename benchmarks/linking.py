"""Concept linking on gold mentions (issue 21, first part): NCBI-disease as issue 21 names it
(GitHub spyysalo/ncbi-disease at 5a266c6…, original-data/, fetched pinned by
``python benchmarks/bench.py fetch NCBI-disease-original``). The vocabulary is the mention →
MeSH/OMIM id pairs of the train and devel files; every test mention with an id is linked
from its text (abbreviations the abstract defines expanded). Reported: accuracy@1 and @5 of
the TF-IDF linker, and of an exact-string dictionary baseline (normalised text looked up in
the same names), beside the published anchors. A composite mention (``D1|D2``, ``D1+D2``)
counts as right when the prediction is one of its ids.

    python benchmarks/linking.py [--cache DIR] [--threshold 0.5]

Writes benchmarks/results/linking/summary.json.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, emit

from harness.clinical import DEFAULT_CACHE, fetch_corpus
from mslm_core.corpus import read_corpus
from mslm_core.linking import Linker, from_corpora, normalise

FILES = {
    "train": "original-data/train/NCBItrainset_corpus.txt",
    "devel": "original-data/devel/NCBIdevelopset_corpus.txt",
    "test": "original-data/test/NCBItestset_corpus.txt",
}
ANCHORS = {
    "DNorm (normalised F1, end to end, NCBI-disease test)": 0.78,
    "TaggerOne (normalised F1, end to end, NCBI-disease test)": 0.81,
    "BioSyn / SapBERT (accuracy@1 on gold mentions)": "0.92-0.93",
}


def _documents(corpus) -> list[tuple[str, list[tuple[int, int, str]]]]:
    """(title + abstract, mentions with ids as offsets into it) per document: abbreviations
    are defined anywhere in the abstract."""
    out = []
    sentences = corpus.sentences
    for title, abstract in zip(sentences[0::2], sentences[1::2], strict=True):
        text = f"{title.text} {abstract.text}"
        shift = len(title.text) + 1
        mentions = [(a, b, c) for a, b, _, c in title.linked_char_mentions() if c]
        mentions += [
            (a + shift, b + shift, c) for a, b, _, c in abstract.linked_char_mentions() if c
        ]
        out.append((text, mentions))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default=str(DEFAULT_CACHE))
    ap.add_argument("--git", help="a clone or mirror of spyysalo/ncbi-disease (no GitHub here)")
    ap.add_argument("--threshold", type=float, default=0.5)
    args = ap.parse_args()
    root = fetch_corpus("NCBI-disease-original", args.cache, args.git)
    corpora = {s: read_corpus(root / f, "pubtator", trust_offsets=True) for s, f in FILES.items()}
    vocabulary = from_corpora(
        [corpora["train"], corpora["devel"]], "NCBI-disease train+devel", str(root)
    )
    started = time.perf_counter()
    linker = Linker(vocabulary, threshold=args.threshold, k=5)
    build_s = time.perf_counter() - started
    exact: dict[str, str] = {}
    for cid, name in vocabulary.names():
        exact.setdefault(normalise(name), cid)

    n = at1 = at5 = exact_hits = linked = linked_right = 0
    seconds = []
    for text, mentions in _documents(corpora["test"]):
        if not mentions:
            continue
        t0 = time.perf_counter()
        found = linker.candidates_in_text(text, [(a, b) for a, b, _ in mentions])
        seconds.append((time.perf_counter() - t0) / len(mentions))
        for (a, b, gold), candidates in zip(mentions, found, strict=True):
            golds = set(re.split(r"[|+]", gold))
            ids = [c.id for c in candidates]
            n += 1
            at1 += bool(ids[:1]) and ids[0] in golds
            at5 += bool(golds & set(ids[:5]))
            exact_hits += exact.get(normalise(text[a:b])) in golds
            if candidates and candidates[0].score >= args.threshold:
                linked += 1
                linked_right += candidates[0].id in golds
    figures = {
        "corpus": "NCBI-disease test (gold mentions with ids)",
        "mentions": n,
        "vocabulary": {"concepts": len(vocabulary), "names": len(vocabulary.names())},
        "tfidf_accuracy_at_1": round(at1 / n, 4),
        "tfidf_accuracy_at_5": round(at5 / n, 4),
        "exact_string_accuracy": round(exact_hits / n, 4),
        "threshold": args.threshold,
        "linked_share": round(linked / n, 4),
        "precision_when_linked": round(linked_right / max(linked, 1), 4),
        "ms_per_mention_median": round(1000 * statistics.median(seconds), 3),
        "index_build_s": round(build_s, 2),
        "anchors": ANCHORS,
    }
    (RESULTS / "linking").mkdir(parents=True, exist_ok=True)
    emit("linking/summary", figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
