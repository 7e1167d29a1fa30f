"""The clinical model (issue 28): one model trained on four corpora mapped onto the clinical
schema, against a model of the same recipe trained on each corpus alone, and against the
textbook ``transformers`` fine-tune on each corpus alone.

    python benchmarks/clinical_model.py [--seeds 1 2 3] [--cache DIR] [--work DIR]
        [--variants merged single textbook] [--corpora …] [--keep-bundles]
        [--epochs N --max-train-sentences K --base-model M]   # tiny settings (CI)

Corpora (``mslm corpora fetch clinical``; pinned commits and sha256, never committed):
MACCROBAT2020 and CHIA at the fixed document-level splits of
``mslm_core/corpora/data/splits.json``, BC5CDR and NCBI-disease at BLURB's splits; each mapped
by the recipe's type map (``mslm_core/corpora/clinical.py``, docs/clinical-schema.md).

- **merged**: the product's recipe (``mslm train --recipe clinical``: every default of
  ``mslm train`` but the recipe's own settings, ``clinical.SETTINGS``; the four corpora with
  their weights, partial labels). ``--strategy`` trains another strategy, ``--source-styles``
  opens each corpus's windows with its name (``--blank-style SHARE``: that share of them with
  none, as the bundle then reads text, its runs scoring test read so too), ``--weight
  CORPUS=W`` samples a corpus at another weight than the recipe's, ``--note-style SHARE``
  rewrites that share of the training sentences as notes are written (ablations).
- **single**: the same recipe on one corpus (its type map, weight 1).
- **textbook**: ``AutoModelForTokenClassification`` with the ``Trainer`` on one corpus
  (``harness/textbook.py``: learning rate 1e-4, 3 epochs, batch 16, the last epoch), its
  labels the mapped ones (a label listing types, CHIA's ``Procedure|Test``, is one class).
- **textbook-tuned**: the same, tuned as our recipe was: the learning rate its own search on
  dev chose (the ``textbook-lr`` protocol's default, read from its committed summary, as our
  recipe's 2e-4 came from the quality ablation's dev rows) and the epoch with the best dev F1.

Every model is scored on each corpus's held-out test documents, on the types that corpus
annotates (``metrics.judge``), strict and overlap, per target type (the types that a label
listing several links, CHIA's Procedure|Test, as one row: ``metrics.type_rows``). Runs are
saved one file each under ``--out``/runs (a rerun skips what is there); the summary is written to
``--out``/summary.json and summary.md, and its headline is the last line printed.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from common import RESULTS, machine

from harness.aggregate import ci95, paired_t_p
from mslm_core.config import TrainConfig
from mslm_core.corpora import clinical
from mslm_core.corpus import Corpus, write_corpus
from mslm_core.metrics import prf, type_rows
from mslm_core.sources import load_training_data

log = logging.getLogger("clinical_model")
VARIANTS = ("merged", "single", "textbook", "textbook-tuned")
#: The comparisons the docs state, ``a − b`` on the seeds both ran: a claim that ``a`` is ahead
#: or behind stands only where the paired 95 % interval excludes 0; otherwise the two are level.
COMPARE = (
    ("merged", "single"),
    ("merged", "textbook-tuned"),
    ("single", "textbook-tuned"),
    ("single", "textbook"),
    ("textbook-tuned", "textbook"),
)
TEXTBOOK = {
    "learning_rate": 1e-4,
    "epochs": 3,
    "batch_size": 16,
    "weight_decay": 0.01,
    "warmup_ratio": 0.1,
}
# the committed decision, wherever this run writes (MSLM_BENCH_RESULTS moves RESULTS)
TEXTBOOK_SEARCH = Path(__file__).resolve().parent / "results" / "textbook-lr"


def textbook_tuned() -> dict[str, Any]:
    """The textbook's settings as its own learning-rate search on dev left them: the
    ``textbook-lr`` protocol's chosen variant (its committed summary's decision) over its
    shared settings (the best-dev epoch among them)."""
    decision = json.loads((TEXTBOOK_SEARCH / "summary.json").read_text())["decision"]
    protocol = json.loads((TEXTBOOK_SEARCH / "protocol.json").read_text())
    chosen = protocol["variants"][decision["default"]]
    shared = {k: protocol["train"][k] for k in ("select", "epochs", "batch_size")}
    return {**TEXTBOOK, **shared, **chosen}


def cut(source: dict, k: int, folder: Path) -> dict:
    """The source with each split cut to its first ``k`` sentences (tiny settings)."""
    from mslm_core.corpus import read_corpus

    out = dict(source)
    for split in ("train", "dev", "test"):
        if source.get(split):
            corpus = read_corpus(source[split])
            corpus.sentences = corpus.sentences[:k]
            target = folder / source["name"] / f"{split}.jsonl"
            target.parent.mkdir(parents=True, exist_ok=True)
            write_corpus(corpus, target, "jsonl")
            out[split] = str(target)
    return out


def weights(pairs: list[str]) -> dict[str, float]:
    """``--weight CORPUS=W`` pairs as {corpus: weight}; a corpus outside the recipe or a weight
    that is not a positive number is refused, naming it."""
    out: dict[str, float] = {}
    for pair in pairs:
        corpus, sep, value = pair.partition("=")
        try:
            weight = float(value) if sep else -1.0
        except ValueError:
            weight = -1.0
        if corpus not in clinical.CORPORA or not weight > 0:
            raise SystemExit(
                f"--weight {pair!r}: expected CORPUS=W, W > 0, CORPUS one of "
                + ", ".join(clinical.CORPORA)
            )
        out[corpus] = weight
    return out


def run_name(variant: str, corpus: str | None, seed: int) -> str:
    return f"{variant}-{corpus or 'all'}-s{seed}"


def train_ours(
    sources: list[dict], seed: int, work: Path, tiny: dict[str, Any], keep: bool
) -> dict[str, Any]:
    from mslm_core.train import Trainer

    settings = {**clinical.SETTINGS, **{k: v for k, v in tiny.items() if k != "max_sentences"}}
    config = TrainConfig(sources=sources, seed=seed, **settings)
    started = time.perf_counter()
    trainer = Trainer(config, work / "bundle", work_dir=work / "checkpoint", overwrite=True)
    result = trainer.fit()
    manifest = json.loads((work / "bundle" / "manifest.json").read_text())
    test = result["metrics"].get("test", {})
    by_corpus = test.get("sources") or {sources[0]["name"]: test}
    served = {}
    if config.blank_style:  # the table reads each corpus as its own; the bundle reads none
        served = {"test_served": blank_reading(trainer)}
    if not keep:
        import shutil

        shutil.rmtree(work / "bundle", ignore_errors=True)
    return {
        "test": by_corpus,
        "dev_macro_f1": result["metrics"]["dev"].get("macro_f1"),
        "history": result["history"],
        "best_epoch": manifest.get("best_epoch"),
        "train_seconds": manifest.get("train_seconds"),
        "train_cpu_seconds": manifest.get("train_cpu_seconds"),
        "wall_seconds": round(time.perf_counter() - started, 1),
        "config": {k: v for k, v in config.to_dict().items() if k != "sources"},
        "weights": {s["name"]: s["weight"] for s in sources},
        "bundle": str(work / "bundle") if keep else None,
        **served,
    }


def blank_reading(trainer: Any) -> dict[str, Any]:
    """Each corpus's test scores with every sentence read as the bundle reads text by default
    (no style: a run with a ``blank_style``), by the kept weights the trainer ends with."""
    from mslm_core.evaluate import predict_mentions

    corpus = trainer.corpora["test"]
    predicted = predict_mentions(trainer.predictor, corpus, [""] * len(corpus.sentences))
    return trainer.score("test", predicted)["sources"]


def mapped_files(source: dict, work: Path) -> dict[str, Path]:
    """The corpus's splits with the type map applied, as JSONL (for the textbook)."""
    cfg = TrainConfig(sources=[source])
    data = load_training_data(cfg)
    out = {}
    work.mkdir(parents=True, exist_ok=True)
    for split, corpus in data.sources[0].splits.items():
        plain = Corpus([s for s in corpus.sentences], path=corpus.path)
        out[split] = work / f"{split}.jsonl"
        write_corpus(plain, out[split], "jsonl")
    return out


def train_textbook(
    source: dict, seed: int, work: Path, tiny: dict[str, Any], tuned: bool = False
) -> dict[str, Any]:
    from harness.textbook import score
    from harness.textbook import train_textbook as fit

    files = mapped_files(source, work / "data")
    data = load_training_data(TrainConfig(sources=[source]))  # test sentences know their types
    base = textbook_tuned() if tuned else TEXTBOOK
    settings = {**base, "base_model": tiny.get("base_model", "minilm")}
    for key in ("epochs",):
        if key in tiny:
            settings[key] = tiny[key]
    started = time.perf_counter()
    record = fit(settings, files, seed, "auto", work / "hf")
    test_corpus = data.sources[0].splits["test"]
    metrics, _ = score(record["tagger"], test_corpus)
    return {
        "test": {source["name"]: metrics},
        "history": record["history"],
        "train_seconds": record["train_seconds"],
        "train_cpu_seconds": record["train_cpu_seconds"],
        "wall_seconds": round(time.perf_counter() - started, 1),
        "settings": record["settings_used"],
    }


def _mean_std(values: list[float]) -> dict[str, float]:
    return {
        "mean": round(100 * statistics.fmean(values), 2),
        "std": round(100 * statistics.stdev(values), 2) if len(values) > 1 else 0.0,
        "n": len(values),
    }


def regroup(per_type: dict[str, dict], n_pred: int | None = None) -> dict[str, dict]:
    """A run's per-type rows in :func:`~mslm_core.metrics.type_rows`' rows. Runs recorded
    before those rows scored CHIA's Procedure, Test and Procedure|Test apart (Procedure|Test
    always at precision 1, its misses against the other two): their counts are backed out of
    each row's precision, recall and support, and summed. A row at precision 0 does not tell
    how many predictions it had: ``n_pred``, the run's total, does when it is the only one."""
    rows = type_rows(per_type)
    if all(rows[label] == label for label in per_type):
        return per_type
    predicted = {
        label: round(round(m["recall"] * m["support"]) / m["precision"])
        for label, m in per_type.items()
        if m["precision"]
    }
    unknown = [label for label in per_type if label not in predicted]
    if len(unknown) == 1 and n_pred is not None:
        predicted[unknown[0]] = n_pred - sum(predicted.values())
    elif unknown:
        raise ValueError(f"{', '.join(unknown)}: rows at precision 0 do not tell their predictions")
    out: dict[str, dict] = {}
    for row in sorted(set(rows.values())):
        members = [label for label in per_type if rows[label] == row]
        if members == [row]:
            out[row] = per_type[row]
            continue
        tp = hit_pred = hit_gold = 0.0
        for label in members:
            m = per_type[label]
            tp += round(m["recall"] * m["support"])
            hit_pred += m["overlap"]["precision"] * predicted[label]
            hit_gold += m["overlap"]["recall"] * m["support"]
        n = sum(predicted[label] for label in members)
        support = sum(per_type[label]["support"] for label in members)
        out[row] = {
            **_prf(tp, n, support),
            "support": support,
            "overlap": _prf(hit_pred, n, support, hit_gold),
        }
    return out


def _prf(hit_pred: float, n_pred: float, n_gold: float, hit_gold: float | None = None) -> dict:
    scores = prf(hit_pred, n_pred, n_gold, hit_gold)
    return dict(zip(("precision", "recall", "f1"), scores, strict=True))


def _test_f1(runs: dict[str, dict], variant: str, corpus: str) -> dict[int, float]:
    """{seed: strict test F1 (percent)} of a variant's runs on a corpus (a merged run scores
    every corpus)."""
    return {
        r["seed"]: 100 * r["test"][corpus]["strict"]["f1"]
        for r in runs.values()
        if r["variant"] == variant
        and (variant == "merged" or r["corpus"] == corpus)
        and corpus in r["test"]
    }


def paired(runs: dict[str, dict], corpus: str) -> dict[str, dict[str, Any]]:
    """Each :data:`COMPARE` pair on a corpus, run by run on the seeds both have: the mean
    difference of strict test F1 in points, its 95 % interval (Student's t), the paired
    t-test's p, and the verdict the docs may state: ``ahead``/``behind`` where the interval
    excludes 0, ``level`` where it does not, ``unknown`` with fewer than 2 pairs."""
    out: dict[str, dict[str, Any]] = {}
    for a, b in COMPARE:
        fa, fb = _test_f1(runs, a, corpus), _test_f1(runs, b, corpus)
        seeds = sorted(set(fa) & set(fb))
        if not seeds:
            continue
        diffs = [fa[s] - fb[s] for s in seeds]
        interval = ci95(diffs)
        verdict = (
            "unknown"
            if interval is None
            else "ahead"
            if interval[0] > 0
            else "behind"
            if interval[1] < 0
            else "level"
        )
        out[f"{a} − {b}"] = {
            "seeds": seeds,
            "diff_mean": round(statistics.fmean(diffs), 2),
            "ci95": None if interval is None else [round(x, 2) + 0.0 for x in interval],
            "p_value": paired_t_p([fa[s] for s in seeds], [fb[s] for s in seeds]),
            "verdict": verdict,
        }
    return out


def aggregate(runs: dict[str, dict], corpora: list[str]) -> dict[str, Any]:
    """Per corpus and target type: strict and overlap F1 (and recall) of each variant,
    mean ± std over seeds (percent), merged − single per type, and the :func:`paired`
    comparisons of the whole corpus."""
    table: dict[str, Any] = {}
    for corpus in corpora:
        rows: dict[str, dict[str, Any]] = {}
        for variant in VARIANTS:
            reports = [
                r["test"][corpus]
                for _, r in sorted(runs.items())
                if r["variant"] == variant
                and (variant == "merged" or r["corpus"] == corpus)
                and corpus in r["test"]
            ]
            if not reports:
                continue
            block: dict[str, Any] = {
                "all": {
                    "strict_f1": _mean_std([r["strict"]["f1"] for r in reports]),
                    "overlap_f1": _mean_std([r["overlap"]["f1"] for r in reports]),
                }
            }
            per_types = [regroup(r["per_type"], r.get("n_pred")) for r in reports]
            labels = sorted({t for p in per_types for t in p})
            for label in labels:
                per = [p.get(label) for p in per_types]
                if any(p is None or not p["support"] for p in per):
                    continue  # a type this corpus has no gold of (a false positive only)
                block[label] = {
                    "strict_f1": _mean_std([p["f1"] for p in per]),
                    "strict_recall": _mean_std([p["recall"] for p in per]),
                    "overlap_f1": _mean_std([p["overlap"]["f1"] for p in per]),
                    "overlap_recall": _mean_std([p["overlap"]["recall"] for p in per]),
                    "support": per[0]["support"],
                }
            rows[variant] = block
        if "merged" in rows and "single" in rows:
            rows["merged_minus_single"] = {
                label: round(
                    rows["merged"][label]["strict_f1"]["mean"]
                    - rows["single"][label]["strict_f1"]["mean"],
                    2,
                )
                for label in rows["merged"]
                if label in rows["single"]
            }
        if comparisons := paired(runs, corpus):
            rows["paired"] = comparisons
        table[corpus] = rows
    return table


def markdown(table: dict[str, Any], seeds: int) -> str:
    """The summary table (a cell averaged over fewer than ``seeds`` runs says how many) and
    the paired comparisons under it."""
    lines = [
        "| corpus | type (gold) | merged strict F1 | single strict F1 | textbook strict F1 | "
        "textbook tuned strict F1 | merged − single | merged overlap F1 | merged overlap recall |",
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def cell(block: dict | None, key: str) -> str:
        if not block:
            return "—"
        v = block[key]
        fewer = f" (n={v['n']})" if v["n"] < seeds else ""
        return f"{v['mean']:.1f} ± {v['std']:.1f}{fewer}"

    for corpus, rows in table.items():
        merged = rows.get("merged", {})
        for label in merged or rows.get("single", {}):
            single = rows.get("single", {}).get(label)
            text = rows.get("textbook", {}).get(label)
            tuned = rows.get("textbook-tuned", {}).get(label)
            m = merged.get(label)
            delta = rows.get("merged_minus_single", {}).get(label)
            support = "" if label == "all" else f" ({m['support'] if m else ''})"
            name = label.replace("|", "\\|")  # Procedure|Test: one cell
            lines.append(
                f"| {corpus} | {name}{support} | {cell(m, 'strict_f1')} | "
                f"{cell(single, 'strict_f1')} | {cell(text, 'strict_f1')} | "
                f"{cell(tuned, 'strict_f1')} | "
                f"{'' if delta is None else f'{delta:+.1f}'} | {cell(m, 'overlap_f1')} | "
                f"{cell(m, 'overlap_recall') if m and 'overlap_recall' in m else '—'} |"
            )
    lines += [
        "",
        "Paired on the seeds both ran (strict test F1, points; a claim stands only where the "
        "95 % interval excludes 0):",
        "",
        "| corpus | a − b | seeds | difference | 95 % interval | p | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for corpus, rows in table.items():
        for pair, c in rows.get("paired", {}).items():
            interval = "—" if c["ci95"] is None else f"{c['ci95'][0]:+.1f} to {c['ci95'][1]:+.1f}"
            p = (
                "—"
                if c["p_value"] is None
                else "< 0.001"
                if c["p_value"] < 0.001
                else f"{c['p_value']:.3f}"
            )
            lines.append(
                f"| {corpus} | {pair} | {', '.join(map(str, c['seeds']))} | "
                f"{c['diff_mean']:+.1f} | {interval} | {p} | {c['verdict']} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    ap.add_argument(
        "--corpora", nargs="+", choices=clinical.CORPORA, default=list(clinical.CORPORA)
    )
    ap.add_argument("--cache", help="corpus cache (default: MSLM_CORPUS_CACHE or ~/.cache/mslm)")
    ap.add_argument("--work", default=".mslm/bench/clinical", help="bundles and checkpoints")
    ap.add_argument("--out", default=str(RESULTS / "clinical"))
    ap.add_argument("--keep-bundles", action="store_true", help="keep the merged/single bundles")
    ap.add_argument("--epochs", type=int, help="tiny settings: fewer epochs")
    ap.add_argument(
        "--strategy", help="merged/single: this strategy, not the recipe's (an ablation)"
    )
    ap.add_argument(
        "--source-styles",
        action="store_true",
        help="merged: each corpus's windows open with its name (TrainConfig.source_styles)",
    )
    ap.add_argument(
        "--blank-style",
        type=float,
        help="merged, with --source-styles: this share of the windows has no style "
        "(TrainConfig.blank_style); the runs record test read with none as well",
    )
    ap.add_argument(
        "--weight",
        action="append",
        default=[],
        metavar="CORPUS=W",
        help="merged: sample CORPUS at weight W per epoch, not the recipe's (an ablation)",
    )
    ap.add_argument(
        "--note-style",
        type=float,
        help="merged: this share of the training sentences rewritten as notes are written "
        "(TrainConfig.note_style; an ablation, issue 59)",
    )
    ap.add_argument(
        "--max-sentences", type=int, help="tiny settings: the first K sentences of every split"
    )
    ap.add_argument("--base-model", help="tiny settings: another encoder")
    ap.add_argument("--aggregate-only", action="store_true")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")

    tiny = {
        k: v
        for k, v in {
            "epochs": args.epochs,
            "strategy": args.strategy,
            "base_model": args.base_model,
            "source_styles": args.source_styles or None,
            "blank_style": args.blank_style,
            "note_style": args.note_style,
        }.items()
        if v is not None
    }
    out, work = Path(args.out), Path(args.work)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    every = clinical.sources(args.cache, tuple(args.corpora), weights(args.weight))
    if args.max_sentences:
        every = [cut(s, args.max_sentences, work / "tiny-data") for s in every]
        tiny["max_sentences"] = args.max_sentences
    plan: list[tuple[str, str | None, int]] = []
    for seed in args.seeds:
        if "merged" in args.variants:
            plan.append(("merged", None, seed))
        for variant in VARIANTS[1:]:
            if variant in args.variants:
                plan.extend((variant, c, seed) for c in args.corpora)
    for variant, corpus, seed in [] if args.aggregate_only else plan:
        name = run_name(variant, corpus, seed)
        target = out / "runs" / f"{name}.json"
        if target.exists():
            continue
        log.info("run %s", name)
        if variant == "merged":
            record = train_ours(every, seed, work / name, tiny, args.keep_bundles)
        else:
            source = {**next(s for s in every if s["name"] == corpus), "weight": 1.0}
            if variant == "single":
                record = train_ours([source], seed, work / name, tiny, args.keep_bundles)
            else:
                tuned = variant == "textbook-tuned"
                record = train_textbook(source, seed, work / name, tiny, tuned)
        record |= {"variant": variant, "corpus": corpus, "seed": seed}
        target.write_text(json.dumps(record, indent=1, default=str) + "\n")
    runs = {p.stem: json.loads(p.read_text()) for p in sorted((out / "runs").glob("*.json"))}
    table = aggregate(runs, list(args.corpora))
    seeds = sorted({r["seed"] for r in runs.values()})  # what the table holds, not what ran
    mac = table.get("MACCROBAT2020", {}).get("merged", {}).get("Problem", {})
    worst = min(
        (
            (d, corpus, label)
            for corpus, rows in table.items()
            for label, d in rows.get("merged_minus_single", {}).items()
            if label != "all"
        ),
        default=None,
    )
    headline = {
        "maccrobat_problem_overlap_recall": mac.get("overlap_recall", {}).get("mean"),
        "maccrobat_problem_strict_recall": mac.get("strict_recall", {}).get("mean"),
        "worst_type_merged_minus_single": None
        if worst is None
        else {"delta": worst[0], "corpus": worst[1], "type": worst[2]},
        "runs": len(runs),
    }
    summary = {
        "headline": headline,
        "table": table,
        "recipe": [{k: s[k] for k in ("name", "type_map", "weight")} for s in every],
        "textbook": TEXTBOOK,
        "textbook_tuned": textbook_tuned(),
        "tiny": tiny,
        "seeds": seeds,
        "machine": machine(),
        "command": " ".join(["python", *sys.argv]),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "summary.md").write_text(
        "# The clinical model against single-corpus models\n\n"
        "Strict and overlap F1 (%) on each corpus's test documents, on the types it annotates; "
        f"mean ± std over seeds {seeds} (n=K: a cell with K runs only).\n\n"
        + markdown(table, len(seeds))
    )
    print(json.dumps(headline))


if __name__ == "__main__":
    main()
