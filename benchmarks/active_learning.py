"""What active learning saves: a pool-based simulation (issue 33).

The pool is a corpus's train split, its gold labels hidden until a sentence is "labelled".
Each curve (corpus × strategy × seed) starts from the same ``--start`` sentences drawn at
random (by the seed), then round after round: train the product's recipe from scratch on the
labelled sentences (``TrainConfig``'s defaults, what a job got when the committed rounds ran,
with ``--train-strategy``, ``mslm_tapt`` then: MiniLM, 3 epochs, best dev epoch, calibrated
temperatures), score strict entity F1 on the test split
(the product's scorer, ``mslm evaluate``'s), then pick the next ``--step`` sentences of the
rest of the pool — at random (the baseline, in the seed's order), or by the trained model's
uncertainty (``mslm_core.active``: ``least_confidence``, ``margin``, ``entropy``) with the
product's default diversity (``active.rank``'s MMR over TF-IDF).

Each curve's rounds are kept in ``rounds/<corpus>-<strategy>-seed<k>.json`` (the sentences
each round added, so a run resumes where it stopped and a curve can be extended with a larger
``--stop``); ``--full-pool`` trains once on the whole pool (the 95 % target). Every run ends
by summarising whatever rounds the results folder holds: ``curves.json`` (every round),
``summary.json`` / ``summary.md`` (mean ± std test F1 per size; labels needed to reach
random's F1 at its largest size, and 95 % of the full-pool F1) and ``curves.png``.

    python benchmarks/active_learning.py            # the issue's protocol: hours on a GPU
    python benchmarks/active_learning.py --corpora NCBI-disease --seeds 1 --stop 600 \\
        --strategies random,least_confidence --no-full-pool --threads 1   # sized for a CPU
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import DATA, RESULTS, machine

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from harness.runner import write_json
from mslm_core.active import BASELINE, STRATEGIES, random_order, rank, sentence_uncertainties
from mslm_core.corpus import Corpus, read_corpus, split_paths, write_corpus

# the corpora by their short names, as the issue names them
CORPORA = {"NCBI-disease": "NCBI-disease-IOB", "BC5CDR": "BC5CDR-IOB"}
FULL = "full-pool"  # the curve of one round on the whole pool
# what the committed rounds trained: the default strategy when they ran
COMMITTED_STRATEGY = "mslm_tapt"
TARGET_SHARE = 0.95  # of the full-pool F1
GOAL_FRACTION = 0.60  # the goal: random's largest-size F1 with ≤ 60 % of its labels
NOTES_LINK = "; how the rounds were run and what is not measured: [notes.md](notes.md)."


# -- one curve --------------------------------------------------------------------------------
def curve_path(results: Path, corpus: str, strategy: str, seed: int) -> Path:
    return results / "rounds" / f"{corpus}-{strategy}-seed{seed}.json"


def train_and_score(
    train: Corpus, paths: dict[str, Path], test: Corpus, seed: int, args: argparse.Namespace
) -> tuple[dict[str, Any], Any, float, float]:
    """Train the product's recipe on ``train`` (dev: the corpus's dev split), score test
    strict F1. Returns (scores, the trained model's predictor, train s, test s); the bundle
    lives in a temporary folder only as long as this call."""
    from mslm_core.config import TrainConfig
    from mslm_core.evaluate import evaluate_corpus
    from mslm_core.inference import EntityExtractor
    from mslm_core.train import Trainer

    with tempfile.TemporaryDirectory(prefix="mslm-al-") as tmp:
        train_file = Path(tmp) / "train.tsv"
        write_corpus(train, train_file)
        settings: dict[str, Any] = {
            "train": str(train_file),
            "dev": str(paths["dev"]),
            "seed": seed,
            "strategy": args.train_strategy,
            "device": args.device,
            "base_model": args.base_model,
        }
        if args.smoke:
            settings["epochs"] = 1
        started = time.perf_counter()
        Trainer(TrainConfig.from_dict(settings), Path(tmp) / "bundle").fit()
        trained = time.perf_counter()
        predictor = EntityExtractor.from_bundle(Path(tmp) / "bundle", device=args.device).predictor
        metrics = evaluate_corpus(predictor, test)
        strict = metrics["strict"]
        scores = {k: round(float(strict[k]), 4) for k in ("precision", "recall", "f1")}
        return scores, predictor, trained - started, time.perf_counter() - trained


def next_batch(
    predictor: Any, pool: Corpus, labelled: list[int], strategy: str, order: list[int], step: int
) -> list[int]:
    """The next ``step`` pool indices to label: the seed's random order, or the rest of the
    pool ranked by the model's uncertainty with the product's default diversity."""
    chosen = set(labelled)
    if strategy == BASELINE:
        return [i for i in order if i not in chosen][:step]
    rest = [i for i in range(len(pool)) if i not in chosen]
    sentences = [pool.sentences[i] for i in rest]
    scores = sentence_uncertainties(predictor, [s.words for s in sentences], strategy)
    picks = rank([s.text for s in sentences], scores, limit=step)
    return [rest[p.index] for p in picks]


def run_curve(
    corpus: str,
    strategy: str,
    seed: int,
    sizes: list[int],
    data: dict[str, Any],
    args: argparse.Namespace,
) -> None:
    """Every round of one curve not yet in its file, each written as soon as it is done."""
    pool: Corpus = data["pool"]
    path = curve_path(args.results, corpus, strategy, seed)
    settings = {
        "corpus": corpus,
        "strategy": strategy,
        "seed": seed,
        "pool": len(pool),
        "start": args.start,
        "step": args.step,
        "base_model": args.base_model,
        "smoke": args.smoke,
    }
    if args.train_strategy != COMMITTED_STRATEGY:  # the committed rounds do not name it
        settings["train_strategy"] = args.train_strategy
    state: dict[str, Any] = {"settings": settings, "rounds": []}
    if path.exists():
        state = json.loads(path.read_text(encoding="utf-8"))
        if state["settings"] != settings:
            raise SystemExit(
                f"{path} was made with other settings ({state['settings']}); "
                "use another --results folder or delete it"
            )
    order = random_order(len(pool), seed)
    labelled = [i for r in state["rounds"] for i in r["added"]]
    first = order if strategy == FULL else order[: args.start]
    added = state["rounds"][-1]["next"] if state["rounds"] else first
    for size in sizes:
        if size <= len(labelled):
            continue
        if len(labelled) + len(added) != size:
            break  # the pool ran out before this size
        labelled += added
        train = Corpus([pool.sentences[i] for i in sorted(labelled)])
        started = time.perf_counter()
        scores, predictor, train_s, test_s = train_and_score(
            train, data["paths"], data["test"], seed, args
        )
        if strategy == FULL:
            after: list[int] = []
        else:
            after = next_batch(predictor, pool, labelled, strategy, order, args.step)
        record = {
            "labelled": len(labelled),
            **scores,
            "seconds": {
                "train": round(train_s, 1),
                "test": round(test_s, 1),
                "select": round(time.perf_counter() - started - train_s - test_s, 1),
            },
            "finished_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "added": added,
            "next": after,
        }
        state["rounds"].append(record)
        state["machine"] = machine()
        write_json(path, state)
        print(
            f"{corpus} {strategy} seed {seed}: {len(labelled)} labelled, test F1 "
            f"{scores['f1']:.4f} ({train_s:.0f} s train, {test_s:.0f} s test)",
            file=sys.stderr,
            flush=True,
        )
        added = after


# -- the summary ------------------------------------------------------------------------------
def load_rounds(results: Path) -> list[dict[str, Any]]:
    """Every round of every curve file in ``results/rounds`` (without the indices)."""
    rows: list[dict[str, Any]] = []
    for path in sorted((results / "rounds").glob("*.json")):
        state = json.loads(path.read_text(encoding="utf-8"))
        s = state["settings"]
        for r in state["rounds"]:
            rows.append(
                {
                    "corpus": s["corpus"],
                    "strategy": s["strategy"],
                    "seed": s["seed"],
                    "pool": s["pool"],
                    **{k: v for k, v in r.items() if k not in ("added", "next")},
                }
            )
    return rows


def _mean_std(values: list[float]) -> dict[str, Any]:
    return {
        "mean": round(statistics.fmean(values), 4),
        "std": round(statistics.stdev(values), 4) if len(values) > 1 else 0.0,
        "n": len(values),
    }


def labels_to_reach(curve: dict[int, dict[str, Any]], target: float) -> int | None:
    """The smallest labelled count whose mean F1 reaches ``target`` (None: none does)."""
    return next((n for n in sorted(curve) if curve[n]["mean"] >= target), None)


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per corpus and strategy, mean ± std test F1 at each size (over the seeds that reached
    it), and the labels each strategy needs to reach (a) random's F1 at random's largest size
    measured on every seed and (b) 95 % of the full-pool F1; sizes are compared only up to the
    largest that random and the strategy share."""
    out: dict[str, Any] = {}
    for corpus in sorted({r["corpus"] for r in rows}):
        mine = [r for r in rows if r["corpus"] == corpus]
        curves: dict[str, dict[int, dict[str, Any]]] = {}
        for strategy in sorted({r["strategy"] for r in mine}):
            by_size: dict[int, list[float]] = {}
            for r in mine:
                if r["strategy"] == strategy:
                    by_size.setdefault(r["labelled"], []).append(r["f1"])
            curves[strategy] = {n: _mean_std(v) for n, v in sorted(by_size.items())}
        full = curves.pop(FULL, {})
        full_f1 = next(iter(full.values()))["mean"] if full else None
        random_curve = curves.get(BASELINE, {})
        seeds = len({r["seed"] for r in mine if r["strategy"] == BASELINE})
        complete = [n for n, c in random_curve.items() if c["n"] == seeds]
        largest = max(complete) if complete else None
        target = random_curve[largest]["mean"] if largest is not None else None
        table: dict[str, Any] = {}
        for strategy, curve in curves.items():
            shared = {n: c for n, c in curve.items() if largest is None or n <= largest}
            reach = labels_to_reach(shared, target) if target is not None else None
            reach95 = (
                labels_to_reach(curve, TARGET_SHARE * full_f1) if full_f1 is not None else None
            )
            table[strategy] = {
                "labels_to_random_largest": reach,
                "fraction_of_random_labels": round(reach / largest, 3)
                if reach is not None and largest
                else None,
                "labels_to_95pct_full": reach95,
                "curve": {str(n): c for n, c in curve.items()},
            }
        out[corpus] = {
            "pool": mine[0]["pool"],
            "seeds": sorted({r["seed"] for r in mine}),
            "random_largest": largest,
            "random_f1_at_largest": target,
            "full_pool_f1": full_f1,
            "target_95pct": round(TARGET_SHARE * full_f1, 4) if full_f1 is not None else None,
            "strategies": table,
        }
    return out


def headline(summary: dict[str, Any]) -> dict[str, Any]:
    """The figures of the last line: per corpus, random's largest size and F1, and per
    strategy the fraction of those labels it needed; ``goal_met``: some strategy needed
    ≤ 60 % of them on every corpus measured."""
    figures: dict[str, Any] = {}
    met_somewhere: dict[str, list[bool]] = {}
    for corpus, s in summary.items():
        fractions = {
            name: t["fraction_of_random_labels"]
            for name, t in s["strategies"].items()
            if name != BASELINE
        }
        figures[corpus] = {
            "random_largest": s["random_largest"],
            "random_f1": s["random_f1_at_largest"],
            "full_pool_f1": s["full_pool_f1"],
            "fraction_of_random_labels": fractions,
            "labels_to_95pct_full": {
                n: t["labels_to_95pct_full"] for n, t in s["strategies"].items()
            },
        }
        for name, f in fractions.items():
            met_somewhere.setdefault(name, []).append(f is not None and f <= GOAL_FRACTION)
    figures["goal_met"] = any(all(v) for v in met_somewhere.values())
    return figures


def plot(summary: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(summary), figsize=(6.5 * len(summary), 4.4), squeeze=False)
    for ax, (corpus, s) in zip(axes[0], summary.items(), strict=True):
        for name, t in s["strategies"].items():
            xs = [int(n) for n in t["curve"]]
            ys = [c["mean"] for c in t["curve"].values()]
            sd = [c["std"] for c in t["curve"].values()]
            style = "--" if name == BASELINE else "-"
            (line,) = ax.plot(xs, ys, style, marker="o", markersize=3, label=name)
            if any(sd):
                lo = [y - d for y, d in zip(ys, sd, strict=True)]
                hi = [y + d for y, d in zip(ys, sd, strict=True)]
                ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.15)
        if s["random_f1_at_largest"] is not None:
            ax.axhline(
                s["random_f1_at_largest"],
                color="grey",
                lw=0.8,
                ls=":",
                label=f"random at {s['random_largest']}: {s['random_f1_at_largest']:.3f}",
            )
        if s["target_95pct"] is not None:
            ax.axhline(
                s["target_95pct"],
                color="black",
                lw=0.8,
                ls="-.",
                label=f"95 % of the full pool's {s['full_pool_f1']:.3f}",
            )
        seeds = len(s["seeds"])
        ax.set_title(f"{corpus} (pool {s['pool']}, {seeds} seed{'s' * (seeds > 1)})")
        ax.set_xlabel("labelled sentences")
        ax.set_ylabel("test strict F1" + (" (mean ± std)" if seeds > 1 else ""))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    fig.suptitle("Active learning vs random: the product's recipe retrained each round")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _pct(x: float | None) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}"


def _labels(n: int | None, target: float | None) -> str:
    return "—" if target is None else "not reached" if n is None else str(n)


def markdown(summary: dict[str, Any], figures: dict[str, Any], command: str, notes: bool) -> str:
    lines = [
        "# Active learning: what it saves (issue 33)",
        "",
        "Pool-based simulation: the product's recipe (`TrainConfig` defaults) retrained from "
        "scratch each round on the labelled sentences; strict test F1 %; the next sentences "
        "picked at random or by the model's uncertainty (`mslm_core.active`, default "
        "diversity). Made by `benchmarks/active_learning.py`; every round in `curves.json`, "
        "the sentences each round added in `rounds/`.",
        "",
        f"Summarised by `{command}`" + (NOTES_LINK if notes else "."),
        "",
    ]
    for corpus, s in summary.items():
        names = list(s["strategies"])
        sizes = sorted({int(n) for t in s["strategies"].values() for n in t["curve"]})
        lines += [
            f"## {corpus}",
            "",
            f"Pool {s['pool']} sentences, seeds {', '.join(map(str, s['seeds']))}; full-pool "
            f"F1 {_pct(s['full_pool_f1'])} (95 %: {_pct(s['target_95pct'])}); random at "
            f"{s['random_largest']} labels: {_pct(s['random_f1_at_largest'])}.",
            "",
            "| labelled | " + " | ".join(names) + " |",
            "|---|" + "---|" * len(names),
        ]
        for n in sizes:
            cells = []
            for name in names:
                c = s["strategies"][name]["curve"].get(str(n))
                if c is None:
                    cells.append("")
                elif c["n"] > 1:
                    cells.append(f"{_pct(c['mean'])} ± {_pct(c['std'])}")
                else:
                    cells.append(_pct(c["mean"]))
            lines.append(f"| {n} | " + " | ".join(cells) + " |")
        lines += [
            "",
            "| strategy | labels to reach random's F1 at its largest size | fraction | "
            "labels to reach 95 % of full-pool F1 |",
            "|---|---|---|---|",
        ]
        for name, t in s["strategies"].items():
            frac = t["fraction_of_random_labels"]
            lines.append(
                f"| {name} | {_labels(t['labels_to_random_largest'], s['random_f1_at_largest'])} | "
                f"{'—' if frac is None else f'{frac:.2f}'} | "
                f"{_labels(t['labels_to_95pct_full'], s['target_95pct'])} |"
            )
        lines.append("")
    lines += [
        f"**Goal (random's largest-size F1 with ≤ {GOAL_FRACTION:.0%} of its labels on every "
        f"corpus measured): {'met' if figures['goal_met'] else 'not met'}.**",
        "",
    ]
    return "\n".join(lines)


def write_summary(args: argparse.Namespace) -> dict[str, Any]:
    rows = load_rounds(args.results)
    summary = summarise(rows)
    figures = headline(summary)
    command = " ".join(["python", *sys.argv])
    write_json(args.results / "curves.json", rows)
    record = {
        **figures,
        "details": {"summary": summary, "machine": machine()},
        "command": command,
    }
    write_json(args.results / "summary.json", record)
    notes = (args.results / "notes.md").exists()  # written by hand: how the rounds were run
    (args.results / "summary.md").write_text(
        markdown(summary, figures, command, notes), encoding="utf-8"
    )
    if summary:
        plot(summary, args.results / "curves.png")
    return figures


# -- the command ------------------------------------------------------------------------------
def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpora", default=",".join(CORPORA), help="of: " + ", ".join(CORPORA))
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--start", type=int, default=100, help="sentences labelled at first")
    ap.add_argument("--step", type=int, default=100, help="sentences added per round")
    ap.add_argument("--stop", type=int, default=2000, help="the largest labelled count")
    ap.add_argument("--strategies", default=",".join((BASELINE, *STRATEGIES)))
    ap.add_argument(
        "--full-pool",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also train once on the whole pool (the 95 %% target)",
    )
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--max-pool", type=int, default=None, help="only the first N train sentences")
    ap.add_argument("--smoke", action="store_true", help="tiny: 1 epoch, sizes 2 and 3 (CI)")
    ap.add_argument("--results", type=Path, default=RESULTS / "active_learning")
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--base-model", default="minilm")
    ap.add_argument(
        "--train-strategy",
        default=COMMITTED_STRATEGY,
        help="the training strategy of every round (default: the committed rounds', "
        "mslm_tapt; another one belongs in another --results folder)",
    )
    ap.add_argument("--device", default="auto", help="auto, cpu or cuda")
    ap.add_argument("--summary-only", action="store_true", help="train nothing; summarise")
    ap.add_argument(
        "--no-summary",
        action="store_true",
        help="train only (runs side by side on one results folder; then --summary-only)",
    )
    args = ap.parse_args(argv)
    if args.smoke:
        args.start, args.step, args.stop = 2, 1, 3
        args.seeds = args.seeds.split(",")[0]
    args.corpora = [c for c in args.corpora.split(",") if c]
    unknown = [c for c in args.corpora if c not in CORPORA]
    args.strategies = [s for s in args.strategies.split(",") if s]
    bad = [s for s in args.strategies if s not in (BASELINE, *STRATEGIES)]
    if unknown or bad:
        ap.error(f"unknown corpus or strategy: {', '.join(unknown + bad)}")
    args.seeds = [int(s) for s in args.seeds.split(",") if s]
    if min(args.start, args.step) < 1 or args.stop < args.start:
        ap.error("--start and --step must be ≥ 1 and --stop ≥ --start")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if not args.summary_only:
        sizes = list(range(args.start, args.stop + 1, args.step))
        for corpus in args.corpora:
            paths = split_paths(args.data / CORPORA[corpus])
            pool = read_corpus(paths["train"])
            if args.max_pool:
                pool = Corpus(pool.sentences[: args.max_pool])
            data = {"pool": pool, "paths": paths, "test": read_corpus(paths["test"])}
            for seed in args.seeds:
                if args.full_pool:
                    run_curve(corpus, FULL, seed, [len(pool)], data, args)
                for strategy in args.strategies:
                    run_curve(corpus, strategy, seed, sizes, data, args)
    if args.no_summary:
        return
    figures = write_summary(args)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
