"""Concept linking on open gold (issues 21 and 54), per corpus and entity type: accuracy, the
precision of the concepts given against how many are given (abstention), and links of another
kind than their entity.

    python benchmarks/linking.py [--cache DIR] [--git NAME=DIR ...]
        [--model NAME=BUNDLE ...]   (end to end: the model's mentions, then their concepts)
    python benchmarks/linking.py --rerank-grid 1,2,4,8,16,32 [--encoder minilm] [--cache DIR]
                                    (the optional re-rank's weight, chosen on dev)

Gold: the test files of NCBI-disease (spyysalo/ncbi-disease at 5a266c6…, original-data/) and
BC5CDR (cryptoradon/biomedRelExt at e42e945…, CDR_Data/CDR.Corpus.v010516/), fetched pinned
(``python benchmarks/bench.py fetch NCBI-disease-original BC5CDR-original``): every test
mention with a MeSH id, linked from its text as its type (Disease, Chemical; abbreviations
the abstract defines expanded). A composite mention (``D1|D2``) counts as right when the
concept is one of its ids; BC5CDR's ``-1`` (no id) mentions are left out. The vocabulary is
the packaged one (MeSH descriptors with their entry terms and tree numbers, and the corpora's
*training* mentions) with its calibration (fitted on their *development* files): what the
service links with. Beside it, the same vocabulary type-blind without abstention (how the
linker worked before issue 54), and ``benchmarks/data/linking-clinical-check.tsv``: clinical
mentions of every type as notes write them, with the MeSH id each denotes (``-`` where MeSH
has none of that kind and giving none is right).

Reported per corpus and type: accuracy@1 and @5, the coverage (share of mentions given a
concept) and the precision of the concepts given at the calibrated thresholds, the precision
at each tenth of coverage (the most confident first), and how many concepts given are of
another kind than their entity (a concept outside the parts its type maps to).

Writes benchmarks/results/linking/summary.json.

``--rerank-grid``: the optional re-rank (``mslm vocab import … --rerank``) prepared once for
the packaged vocabulary, then every gold mention of the two corpora's *development* files
linked at each weight, and without the re-rank: accuracy@1 and @5 per weight. The weight
with the best accuracy@1 over both corpora together is the one chosen (the smaller of a tie),
and the test files are then linked once at it and without the re-rank, to report what it
buys. Writes benchmarks/results/linking/rerank-dev.json (``default_weight``: the default when
the grid ran); ``mslm_core.linking.rerank``'s default weight is held to its choice by
tests/test_docs.py.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from common import emit

from harness.clinical import DEFAULT_CACHE, fetch_corpus
from mslm_core.corpus import read_corpus
from mslm_core.linking import Linker
from mslm_core.linking.builtin import DEFAULT_VOCABULARY, load_linker
from mslm_core.linking.calibration import Example, gold_examples, precision_coverage
from mslm_core.linking.vocabulary import COMPOSITE, NO_ID

CHECK_SET = Path(__file__).resolve().parent / "data" / "linking-clinical-check.tsv"
COUNTS = ("mentions", "given", "given_right", "wrong_kind", "none_given", "none_given_rightly")
_CDR = "CDR_Data/CDR.Corpus.v010516/CDR_{}Set.PubTator.txt"
TEST_FILES = {
    "NCBI-disease-original": "original-data/test/NCBItestset_corpus.txt",
    "BC5CDR-original": _CDR.format("Test"),
}
DEV_FILES = {
    "NCBI-disease-original": "original-data/devel/NCBIdevelopset_corpus.txt",
    "BC5CDR-original": _CDR.format("Development"),
}
# NCBI-disease's four classes are one type, Disease, as models learn it
TYPE_MAP = {
    k: "Disease" for k in ("SpecificDisease", "DiseaseClass", "Modifier", "CompositeMention")
}
BEFORE = {  # the committed figures before issue 54 (summary.json at 5e2c6ef): acc@1, all linked
    "NCBI-disease-original": {"accuracy_at_1": 0.777, "re-ranked": 0.805},
    "BC5CDR-original": {"accuracy_at_1": 0.839, "re-ranked": 0.850},
}
ANCHORS = {
    "DNorm (normalised F1, end to end, NCBI-disease test)": 0.78,
    "TaggerOne (normalised F1, end to end, NCBI-disease test)": 0.81,
    "BioSyn / SapBERT (accuracy@1 on gold mentions)": "0.92-0.93",
}


class TypeBlind:
    """The linker as it was before issue 54: every concept a candidate whatever the entity's
    type, a concept given whenever its score reaches the threshold."""

    def __init__(self, linker: Linker):
        self.linker = linker

    def _lookups(self, text, spans):
        return self.linker._lookups(text, spans)

    def candidates(self, queries, types=None):
        return self.linker.candidates(queries, None)


def _wrong_kind(linker: Linker, examples: list[Example], chosen: list) -> int:
    """Concepts given that lie outside the parts their entity's type maps to."""
    vocabulary = linker.vocabulary
    return sum(
        c is not None and not vocabulary.allows(e.type, vocabulary.concepts[c.id])
        for e, c in zip(examples, chosen, strict=True)
    )


def _figures(linker: Linker, examples: list[Example], calibrated: bool) -> dict:
    if calibrated:
        chosen = [linker.chosen(e.found, e.type) for e in examples]
    else:  # the score threshold, as before
        chosen = [e.found[0] if e.found and e.found[0].score >= 0.5 else None for e in examples]
    given = [(e, c) for e, c in zip(examples, chosen, strict=True) if c is not None]
    n = max(len(examples), 1)
    out = {
        "mentions": len(examples),
        "accuracy_at_1": round(sum(e.right for e in examples) / n, 4),
        "accuracy_at_5": round(
            sum(bool(e.gold & {c.id for c in e.found[:5]}) for e in examples) / n, 4
        ),
        "coverage": round(len(given) / n, 4),
        "precision": round(sum(c.id in e.gold for e, c in given) / max(len(given), 1), 4),
        "wrong_kind": _wrong_kind(linker, examples, chosen),
    }
    if calibrated:
        pairs = [(e.found[0].confidence or 0.0 if e.found else 0.0, e.right) for e in examples]
        out["precision_at_coverage"] = precision_coverage(pairs)
    return out


def corpus_figures(linker: Linker, root: Path, name: str) -> dict:
    test = read_corpus(root / TEST_FILES[name], "pubtator", trust_offsets=True, type_map=TYPE_MAP)
    started = time.perf_counter()
    typed = gold_examples(linker, [test])
    seconds = time.perf_counter() - started
    blind = gold_examples(TypeBlind(linker), [test])
    out: dict = {"mentions": len(typed), "ms_per_mention": round(1000 * seconds / len(typed), 3)}
    for kind in sorted({e.type for e in typed}):
        mine = [e for e in typed if e.type == kind]
        theirs = [e for e in blind if e.type == kind]
        out[kind] = {
            "typed, abstaining": _figures(linker, mine, calibrated=True),
            "type-blind, score 0.5 (before)": _figures(linker, theirs, calibrated=False),
        }
    out["all"] = {
        "typed, abstaining": _figures(linker, typed, calibrated=True),
        "type-blind, score 0.5 (before)": _figures(linker, blind, calibrated=False),
        "before, committed": BEFORE[name],
    }
    return out


def check_set(linker: Linker) -> dict:
    """The clinical mentions: per type, the concepts given and how many are right or of
    another kind; the mentions given none, and how many of those MeSH has no concept for."""
    rows = [
        line.split("\t")
        for line in CHECK_SET.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    texts, kinds, golds = zip(*((t, k, g.strip()) for t, k, g in rows), strict=True)
    out: dict = {"mentions": len(rows), "source": CHECK_SET.name, "per_type": {}}
    for label, types in (("typed, abstaining", list(kinds)), ("type-blind, score 0.5", None)):
        # each mention looked up as the service looks it up (shorthand of a clinical type by
        # its long form); type-blind, as before, by its text
        queries = [
            linker._lookups(t, [(0, len(t))], [k])[0] if types else t
            for t, k in zip(texts, kinds, strict=True)
        ]
        found = linker.candidates(queries, types)
        tally: dict = {}
        for text, kind, gold, candidates in zip(texts, kinds, golds, found, strict=True):
            if types is None:
                top = candidates[0] if candidates and candidates[0].score >= 0.5 else None
            else:
                top = linker.chosen(candidates, kind)
            t = tally.setdefault(kind, dict.fromkeys(COUNTS, 0))
            t["mentions"] += 1
            if top is None:  # where MeSH has nothing of that kind, giving none is right
                t["none_given"] += 1
                t["none_given_rightly"] += gold == "-"
                continue
            t["given"] += 1
            t["given_right"] += top.id == gold
            concept = linker.vocabulary.concepts[top.id]
            t["wrong_kind"] += not linker.vocabulary.allows(kind, concept)
            if top.id != gold:
                t.setdefault("wrong", []).append(f"{text} → {top.name}")
        out["per_type"][label] = tally
        out[label] = {key: sum(t[key] for t in tally.values()) for key in COUNTS}
    return out


def end_to_end(name: str, root: Path, bundle: str, linker: Linker) -> dict:
    """The model finds the mentions of each test abstract (title and abstract as one text,
    unmasked) and the linker names them, as the service does: normalised F1 by mention (exact
    span, type and one of the gold ids; gold mentions without an id count neither way) and by
    document (the set of ids an abstract is given against its gold set, micro-averaged:
    DNorm's and TaggerOne's measure on NCBI-disease)."""
    from mslm_core.metrics import prf
    from mslm_core.pipeline import AnnotationPipeline

    pipeline = AnnotationPipeline.from_bundle(bundle, linker=linker)
    types = set(pipeline.info.types)
    test = read_corpus(root / TEST_FILES[name], "pubtator", trust_offsets=True)
    texts, golds = [], []
    sentences = test.sentences
    for title, abstract in zip(sentences[0::2], sentences[1::2], strict=True):
        shift = len(title.text) + 1
        mentions = list(title.linked_char_mentions())
        mentions += [(a + shift, b + shift, t, c) for a, b, t, c in abstract.linked_char_mentions()]
        texts.append(f"{title.text} {abstract.text}")
        golds.append([(a, b, t if t in types else "Disease", c) for a, b, t, c in mentions])
    started = time.perf_counter()
    found = pipeline(texts, pipeline.options(context=False))
    seconds = time.perf_counter() - started
    m = [0, 0, 0]
    d = [0, 0, 0]
    for gold, entities in zip(golds, found, strict=True):
        by_span = {(a, b, t): set(COMPOSITE.split(c or NO_ID)) for a, b, t, c in gold}
        no_id = {key for key, ids in by_span.items() if ids <= {NO_ID, ""}}
        m[2] += len(by_span) - len(no_id)
        ids: set[str] = set()
        for e in entities:
            key = (e.start, e.end, e.type)
            if e.concept is None or key in no_id:
                continue
            m[1] += 1
            m[0] += e.concept.id in by_span.get(key, set())
            ids.add(e.concept.id)
        gold_ids = {i for s in by_span.values() for i in s} - {NO_ID, ""}
        d[0] += len(ids & gold_ids)
        d[1] += len(ids)
        d[2] += len(gold_ids)
    return {
        "model": bundle,
        "documents": len(texts),
        "normalised_mentions": prf(*m),
        "normalised_documents": prf(*d),
        "annotate_and_link_s": round(seconds, 1),
    }


def _accuracies(linker: Linker, corpus) -> dict:
    examples = gold_examples(linker, [corpus])
    n = max(len(examples), 1)
    return {
        "mentions": len(examples),
        "right_at_1": sum(e.right for e in examples),
        "accuracy_at_1": round(sum(e.right for e in examples) / n, 4),
        "accuracy_at_5": round(
            sum(bool(e.gold & {c.id for c in e.found[:5]}) for e in examples) / n, 4
        ),
    }


def rerank_grid(linker: Linker, roots: dict[str, Path], weights: list[float], encoder: str):
    """The re-rank's weight chosen on the development files (see the module's docstring)."""
    import tempfile

    from mslm_core.linking.rerank import DEFAULT_WEIGHT, Reranker, prepare

    def read(name: str, files: dict[str, str]):
        return read_corpus(
            roots[name] / files[name], "pubtator", trust_offsets=True, type_map=TYPE_MAP
        )

    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        prepare(linker.vocabulary, linker.index, folder, encoder=encoder)
        prepared = time.perf_counter() - started
        reranker = Reranker(folder, linker.index)
        dev: dict = {name: {} for name in roots}
        for name in roots:
            corpus = read(name, DEV_FILES)
            linker.reranker = None
            dev[name]["TF-IDF alone"] = _accuracies(linker, corpus)
            for weight in weights:
                reranker.weight = weight
                linker.reranker = reranker  # a fresh cache: every mention re-ranked again
                dev[name][f"weight {weight:g}"] = _accuracies(linker, corpus)
        pooled = {
            weight: sum(dev[name][f"weight {weight:g}"]["right_at_1"] for name in roots)
            / sum(dev[name][f"weight {weight:g}"]["mentions"] for name in roots)
            for weight in weights
        }
        chosen = min(weights, key=lambda w: (-round(pooled[w], 6), w))
        test: dict = {name: {} for name in roots}
        for name in roots:
            corpus = read(name, TEST_FILES)
            linker.reranker = None
            test[name]["TF-IDF alone"] = _accuracies(linker, corpus)
            reranker.weight = chosen
            linker.reranker = reranker
            test[name][f"weight {chosen:g}"] = _accuracies(linker, corpus)
        linker.reranker = None
    return {
        "encoder": encoder,
        "weights": weights,
        "dev_accuracy_at_1_pooled": {f"{w:g}": round(a, 4) for w, a in pooled.items()},
        "chosen_weight": chosen,
        "default_weight": DEFAULT_WEIGHT,
        "dev": dev,
        "test": test,
        "prepare_s": round(prepared, 1),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default=str(DEFAULT_CACHE))
    ap.add_argument("--git", action="append", default=[], metavar="NAME=DIR")
    ap.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="NAME=BUNDLE",
        help="end to end: this model finds the mentions of NAME's test abstracts "
        "(NCBI-disease-original, BC5CDR-original)",
    )
    ap.add_argument(
        "--rerank-grid",
        metavar="W,W,…",
        help="instead: choose the re-rank's weight among these on the development files",
    )
    ap.add_argument("--encoder", default="minilm", help="the re-rank's encoder (--rerank-grid)")
    args = ap.parse_args()
    clones = dict(item.split("=", 1) for item in args.git)
    models = dict(item.split("=", 1) for item in args.model)
    linker = load_linker(DEFAULT_VOCABULARY)
    if args.rerank_grid:
        weights = [float(w) for w in args.rerank_grid.split(",")]
        roots = {name: fetch_corpus(name, args.cache, clones.get(name)) for name in TEST_FILES}
        emit("linking/rerank-dev", rerank_grid(linker, roots, weights, args.encoder))
        return 0
    calibration = linker.calibration
    figures: dict = {
        "vocabulary": {
            "name": linker.vocabulary.name,
            "concepts": len(linker.vocabulary),
            "names": len(linker.index.name_concept),
            "types": {k: list(v) for k, v in linker.vocabulary.types.items()},
        },
        "thresholds": dict(calibration.thresholds) if calibration else None,
        "calibrated_on": calibration.source if calibration else None,
        "anchors": ANCHORS,
        "clinical_check_set": check_set(linker),
    }
    for name in TEST_FILES:
        root = fetch_corpus(name, args.cache, clones.get(name))
        figures[name] = corpus_figures(linker, root, name)
        if name in models:
            figures[name]["end to end"] = end_to_end(name, root, models[name], linker)
    emit("linking/summary", figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
