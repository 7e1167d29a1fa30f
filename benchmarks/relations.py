"""Relations (issue 53): each modifier tied to its head, on MACCROBAT2020's MODIFY links.

    python benchmarks/relations.py [--cache DIR] [--maccrobat-git CLONE] [--seeds 1 2 3]
        [--folds 5]        # cross-validated over the training documents (0: none)
        [--model BUNDLE]   # end to end: the bundle's entities (and its relation scorer,
                           # else the one trained here with the first seed)
        [--check-set FILE] # with --model: also our own regimen and measurement sentences
                           # (default benchmarks/data/regimens-measurements.txt)
        [--out DIR]        # default benchmarks/results/relations

Writes ``summary.json`` under ``--out`` (and prints it on the last line):

- ``gold_entities``: on the test documents (the recipe's fixed split), for every pair type
  (modifier → head) — the scorer's attachment accuracy per seed and its mean, and two
  baselines: the nearest mention (in words, in the sentence) **of the gold head's type** (an
  oracle on the type: the issue's "nearest head of the right type") and the nearest of any
  type the modifier may modify (what a baseline without the answer can do);
- ``cross_validated`` (``--folds``, 5 by default): the same attachment figures over folds of
  the training documents, each modifier judged by a scorer trained without its document —
  about five times the test's instances, for the pair types the test holds few of;
- ``end_to_end`` (``--model``): the bundle's own entities, relation P/R/F1 per pair type
  against the gold (a relation is right when both its ends' spans and types are), for the
  scorer and the nearest-head baseline; and for the regimen's and findings' modifier types
  (Route, Frequency, Duration, Severity) entity P/R/F1 as the model finds them and after the
  pipeline's regimen patterns (``mslm_core.regimen``), to say whether the patterns help;
- ``check_set`` (``--model``): the same end to end on regimen and measurement sentences
  written for this check (clinicians' style: medication lists, lab lines), the open proxy of
  the held-out regimen sentences — pair P/R/F1 strict (both ends' spans and types exact) and
  lenient (the spans overlap), and attachment accuracy with the gold entities.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from common import RESULTS, machine

from mslm_core import relations as R
from mslm_core.corpora.brat import brat_documents, document_records
from mslm_core.corpora.clinical import recipe_source, splits
from mslm_core.corpora.pinned import default_cache, fetch_corpus

MODIFIER_TYPES = ("Route", "Frequency", "Duration", "Severity")


def corpus(cache: Path, clone: str | None) -> tuple[dict[str, list[R.Sentence]], Counter[str]]:
    """MACCROBAT2020's sentences per split, every sentence kept (the end-to-end run reads the
    ones without entities too), typed as the clinical recipe maps them."""
    type_map = recipe_source("MACCROBAT2020").type_map
    root = fetch_corpus("MACCROBAT2020", cache, git_dir=clone)
    where = {d: s for s in ("train", "dev", "test") for d in splits()["MACCROBAT2020"][s]}
    out: dict[str, list[R.Sentence]] = {"train": [], "dev": [], "test": []}
    counts: Counter[str] = Counter()
    for doc in brat_documents(root / "MACCROBAT2020"):
        records, counted = document_records(doc, type_map)
        counts.update({k: v for k, v in counted.items() if "relation" in k or k == "unkept_end"})
        for r in records:
            out[where[doc.name]].append(
                R.Sentence(
                    r["text"],
                    [(e["start"], e["end"], type_map[e["label"]]) for e in r["entities"]],
                    [(x["modifier"], x["head"]) for x in r.get("relations", ())],
                    doc.name,
                )
            )
    return out, counts


def any_type_baseline(sentences: list[R.Sentence]) -> dict[str, list[int]]:
    """Per pair type, [right, n] of the nearest mention of any type the modifier may
    modify."""
    from mslm_core.types import Entity

    out: dict[str, list[int]] = {}
    for s in sentences:
        ents = [Entity(a, b, s.text[a:b], t, 1.0, 1.0, 1.0) for a, b, t in s.entities]
        chosen = dict(R.nearest_head(s.text, ents))
        heads: dict[int, set[int]] = {}
        for m, h in s.relations:
            heads.setdefault(m, set()).add(h)
        for m, hs in heads.items():
            mt = s.entities[m][2]
            if mt not in R.ROLES:
                continue
            allowed = [h for h in hs if s.entities[h][2] in R.ROLES[mt][1]]
            if not allowed:
                continue
            first = min(allowed, key=lambda h: abs(h - m))
            key = f"{mt}→{s.entities[first][2]}"
            row = out.setdefault(key, [0, 0])
            row[0] += chosen.get(m) in hs
            row[1] += 1
    return out


def gold_entities(data: dict[str, list[R.Sentence]], seeds: list[int]) -> tuple[dict, Any]:
    train = R.corpus_examples(data["train"])
    test = R.corpus_examples(data["test"])
    dev = R.corpus_examples(data["dev"])
    per_seed, scorers, seconds = [], [], []
    for seed in seeds:
        started = time.process_time()
        scorer = R.train(train, seed=seed)
        seconds.append(round(time.process_time() - started, 1))
        scorers.append(scorer)
        per_seed.append((R.accuracy(scorer, test), R.accuracy(scorer, dev)))
    baseline_any = any_type_baseline(data["test"])
    out: dict[str, Any] = {}
    for key, first in per_seed[0][0].items():
        accs = [run[0][key]["accuracy"] for run in per_seed]
        any_right, any_n = baseline_any.get(key, [0, 0])
        out[key] = {
            "test_instances": first["n"],
            "accuracy": round(statistics.mean(accs), 4),
            "accuracy_per_seed": accs,
            "dev_accuracy": (
                round(statistics.mean(run[1][key]["accuracy"] for run in per_seed), 4)
                if key in per_seed[0][1]
                else None
            ),
            "abstained_per_seed": [run[0][key]["abstained"] for run in per_seed],
            "nearest_of_gold_type": first["baseline_accuracy"],
            "nearest_of_any_type": round(any_right / any_n, 4) if any_n else None,
        }
    meta = {
        "train_modifiers": len(train),
        "dev_modifiers": len(dev),
        "test_modifiers": len(test),
        "train_cpu_seconds_per_seed": seconds,
    }
    return {"pairs": out, **meta}, scorers[0]


def cross_validated(train: list[R.Sentence], folds: int, seed: int) -> dict[str, Any]:
    """The scorer's attachment per pair type over ``folds`` folds of the training documents
    (each document's sentences in one fold; the folds dealt from the documents in a fixed
    shuffled order), every modifier judged once, by a scorer that did not see its document:
    the same figure as the test's on about five times as many instances (the test's pairs of
    30 to 40 instances move 3 points for one modifier)."""
    import random

    documents = sorted({s.document for s in train})
    random.Random(0).shuffle(documents)
    tally: dict[str, list[int]] = {}
    for k in range(folds):
        held = set(documents[k::folds])
        rest = R.corpus_examples([s for s in train if s.document not in held])
        if not R.learnable(rest):  # a corpus of a few documents: nothing to learn without them
            continue
        scorer = R.train(rest, seed=seed)
        judged = R.corpus_examples([s for s in train if s.document in held])
        for key, row in R.accuracy(scorer, judged).items():
            t = tally.setdefault(key, [0, 0, 0])
            t[0] += row["right"]
            t[1] += row["n"]
            t[2] += row["baseline"]
    return {
        "folds": folds,
        "documents": len(documents),
        "seed": seed,
        "pairs": {
            key: {
                "instances": n,
                "accuracy": round(right / n, 4),
                "nearest_of_gold_type": round(baseline / n, 4),
            }
            for key, (right, n, baseline) in sorted(tally.items(), key=lambda kv: -kv[1][1])
        },
    }


def _prf(right: int, predicted: int, gold: int) -> dict[str, Any]:
    p = right / predicted if predicted else 0.0
    r = right / gold if gold else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return {"precision": round(p, 4), "recall": round(r, 4), "f1": round(f, 4), "gold": gold}


def end_to_end(model: str, sentences: list[R.Sentence], scorer: R.RelationScorer) -> dict:
    from mslm_core.pipeline import AnnotationPipeline

    pipe = AnnotationPipeline.from_bundle(model)  # served as the service serves it: int8 ONNX
    own = pipe.relations is not None
    if not own:
        pipe.relations = scorer
    texts = [s.text for s in sentences]
    found = pipe(texts)
    raw = pipe.extractor.annotate(texts)
    # what the step costs: the pipeline's time with and without it, paired, medians of 7
    timings: dict[str, list[float]] = {"with": [], "without": []}
    relations_step = pipe.relations
    for _ in range(7):
        for kind, step in (("without", None), ("with", relations_step)):
            pipe.relations = step
            started = time.perf_counter()
            pipe.render(texts, pipe(texts))  # the answer's relations and facts included
            timings[kind].append(time.perf_counter() - started)
    pipe.relations = relations_step
    seconds = statistics.median(timings["with"])
    without = statistics.median(timings["without"])

    def pairs_of(ents, links) -> set:
        return {
            (ents[m].start, ents[m].end, ents[m].type, ents[h].start, ents[h].end, ents[h].type)
            for m, h in links
        }

    gold: set = set()
    scored: set = set()
    nearest: set = set()
    for i, s in enumerate(sentences):
        e = s.entities
        gold |= {
            (i, *e[m], *e[h])
            for m, h in s.relations
            if e[m][2] in R.ROLES and e[h][2] in R.ROLES[e[m][2]][1]
        }
        ents = found[i]
        index = {(x.start, x.end): k for k, x in enumerate(ents)}
        links = [
            (k, index[(x.head.start, x.head.end)])
            for k, x in enumerate(ents)
            if x.head is not None and (x.head.start, x.head.end) in index
        ]
        scored |= {(i, *p) for p in pairs_of(ents, links)}
        nearest |= {(i, *p) for p in pairs_of(ents, R.nearest_head(s.text, ents))}

    def by_pair(predicted: set) -> dict[str, Any]:
        keys = sorted({f"{g[3]}→{g[6]}" for g in gold})
        out = {}
        for key in keys:
            g = {x for x in gold if f"{x[3]}→{x[6]}" == key}
            p = {x for x in predicted if f"{x[3]}→{x[6]}" == key}
            out[key] = _prf(len(g & p), len(p), len(g))
        out["all"] = _prf(len(gold & predicted), len(predicted), len(gold))
        return out

    def entity_prf(per_text, types=MODIFIER_TYPES) -> dict[str, Any]:
        out = {}
        for kind in types:
            g = {(i, a, b) for i, s in enumerate(sentences) for a, b, t in s.entities if t == kind}
            p = {(i, x.start, x.end) for i, es in enumerate(per_text) for x in es if x.type == kind}
            out[kind] = _prf(len(g & p), len(p), len(g))
        return out

    return {
        "model": model,
        "scorer": "the bundle's" if own else "trained here (first seed)",
        "sentences": len(sentences),
        "annotate_seconds": round(seconds, 2),
        "annotate_seconds_without_relations": round(without, 2),
        "throughput_ratio": round(without / seconds, 3),
        "relations": {"scorer": by_pair(scored), "nearest_head": by_pair(nearest)},
        "modifier_entities": {"model": entity_prf(raw), "with_patterns": entity_prf(found)},
        # every type a tie has at either end, as the model alone finds it: a tie needs both
        "entities": entity_prf(raw, sorted({t for s in sentences for _, _, t in s.entities})),
    }


CHECK_SET = Path(__file__).resolve().parent / "data" / "regimens-measurements.txt"
_MARKED = re.compile(r"\[([^\]|]+)\|(\w+)(?:>(\d+))?\]")


def read_check_set(path: Path) -> list[R.Sentence]:
    """Sentences in the check set's notation: ``[words|Type]``, ``[words|Type>k]`` (tied to
    the k-th entity of the line)."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        text, entities, relations, at = "", [], [], 0
        for m in _MARKED.finditer(line):
            text += line[at : m.start()]
            start = len(text)
            text += m[1]
            if m[3] is not None:
                relations.append((len(entities), int(m[3])))
            entities.append((start, len(text), m[2]))
            at = m.end()
        text += line[at:]
        out.append(R.Sentence(text, entities, relations, path.name))
    return out


def check_set(model: str, sentences: list[R.Sentence], scorer: R.RelationScorer) -> dict[str, Any]:
    """End to end on our own sentences (strict and lenient pairs), and with gold entities;
    the bundle's scorer, or the one trained here when the bundle has none."""
    from mslm_core.pipeline import AnnotationPipeline
    from mslm_core.types import Entity

    pipe = AnnotationPipeline.from_bundle(model)
    own = pipe.relations is not None
    if not own:
        pipe.relations = scorer
    found = pipe([s.text for s in sentences])
    gold, pred = [], []
    for i, s in enumerate(sentences):
        e = s.entities
        gold += [(i, e[m], e[h]) for m, h in s.relations]
        ents = found[i]
        index = {(x.start, x.end): x for x in ents}
        for x in ents:
            if x.head is not None and (x.head.start, x.head.end) in index:
                h = index[(x.head.start, x.head.end)]
                pred.append((i, (x.start, x.end, x.type), (h.start, h.end, h.type)))

    def overlaps(a: tuple, b: tuple) -> bool:
        return a[2] == b[2] and a[0] < b[1] and b[0] < a[1]

    def prf(match: Any) -> dict[str, Any]:
        keys = sorted({f"{g[1][2]}→{g[2][2]}" for g in gold})
        out = {}
        for key in [*keys, "all"]:
            g = [x for x in gold if key == "all" or f"{x[1][2]}→{x[2][2]}" == key]
            p = [x for x in pred if key == "all" or f"{x[1][2]}→{x[2][2]}" == key]
            right_p = sum(any(x[0] == y[0] and match(x, y) for y in g) for x in p)
            right_g = sum(any(x[0] == y[0] and match(y, x) for y in p) for x in g)
            precision = right_p / len(p) if p else 0.0
            recall = right_g / len(g) if g else 0.0
            f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
            out[key] = {
                "precision": round(precision, 4),
                "recall": round(recall, 4),
                "f1": round(f1, 4),
                "gold": len(g),
            }
        return out

    strict = prf(lambda x, y: x[1] == y[1] and x[2] == y[2])
    lenient = prf(lambda x, y: overlaps(x[1], y[1]) and overlaps(x[2], y[2]))
    # the scorer alone: the gold entities, each modifier's head chosen
    right = total = 0
    for s in sentences:
        ents = [Entity(a, b, s.text[a:b], t, 1.0, 1.0, 1.0) for a, b, t in s.entities]
        tied = pipe.relations.attach(s.text, ents)
        heads = dict(s.relations)
        for m, h in heads.items():
            total += 1
            got = tied[m].head
            right += got is not None and (got.start, got.end) == (ents[h].start, ents[h].end)
    return {
        "file": str(CHECK_SET.relative_to(CHECK_SET.parents[2])),
        "scorer": "the bundle's" if own else "trained here (first seed)",
        "sentences": len(sentences),
        "ties": len(gold),
        "strict": strict,
        "lenient": lenient,
        "gold_entities_attachment": round(right / total, 4) if total else None,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", help="the corpus cache (default: MSLM_CORPUS_CACHE)")
    ap.add_argument("--maccrobat-git", help="a clone of Saieiei/NLP (no GitHub access)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--model", help="a bundle: end-to-end figures with its entities")
    ap.add_argument("--check-set", default=str(CHECK_SET), help="our own sentences (--model)")
    ap.add_argument(
        "--folds",
        type=int,
        default=5,
        help="cross-validation over the training documents, the first seed (0: none)",
    )
    ap.add_argument("--out", default=str(RESULTS / "relations"))
    args = ap.parse_args()
    cache = Path(args.cache) if args.cache else default_cache()
    data, counts = corpus(cache, args.maccrobat_git)
    figures, scorer = gold_entities(data, args.seeds)
    summary: dict[str, Any] = {
        "corpus": "MACCROBAT2020 (the clinical recipe's split: documents, 40 test)",
        "relations_in_corpus": dict(counts),
        "seeds": args.seeds,
        "gold_entities": figures,
    }
    if args.folds:
        summary["cross_validated"] = cross_validated(data["train"], args.folds, args.seeds[0])
    if args.model:
        summary["end_to_end"] = end_to_end(args.model, data["test"], scorer)
        summary["check_set"] = check_set(args.model, read_check_set(Path(args.check_set)), scorer)
    summary["machine"] = machine()
    summary["command"] = " ".join(["python", *sys.argv])
    headline = {
        k: {
            "accuracy": v["accuracy"],
            "baseline": v["nearest_of_gold_type"],
            "n": v["test_instances"],
        }
        for k, v in figures["pairs"].items()
        if v["test_instances"] >= 30
    }
    if args.model:
        headline["end_to_end_f1"] = summary["end_to_end"]["relations"]["scorer"]["all"]["f1"]
        headline["check_set_f1"] = summary["check_set"]["strict"]["all"]["f1"]
    summary["headline"] = headline
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps(headline, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
