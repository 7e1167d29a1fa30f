"""The measured figures of docs/benchmarks.md from its section "Active learning" to its end (the
table of the scripts and their latest results, the commands, why the inference targets are
missed), each read from the committed result file it comes from (see :mod:`harness.figures`);
the page's earlier lines are another module's.

The files: ``active_learning/summary.json`` (``details.summary``: per corpus and strategy, mean
± std test F1 per size over the seeds) and ``active_learning/curves.json`` (every round, every
seed: the full pool's spread over seeds, the first seed alone), ``train_step-cpu.json``,
``assertion/summary.json`` (the last run of the current rules: gold spans, the check sets,
sections) and ``assertion-test/summary.json`` (the run with the trained models, on their
held-out documents: BioScope's findings the clinical model finds, MACCROBAT end to end),
``baseline-cpu/summary.json``, ``cpu-small/summary.json`` and ``gpu/cpu-small/summary.json``,
``inference-cpu.json``, ``api_load-cpu.json`` (and ``api_load-cpu-aiohttp.json``),
``api_load-ab-cpu.json`` and ``clinical/first-start.json``.

Not registered, their figures being in no committed result file (or in none for sure), or
no figures at all:

- "BC5CDR's second seed moved them by 0.1": the first seed alone gives least confidence and
  entropy 80 %, margin 85 %; with both seeds 70 %, 75 %, 70 %: only the best fraction moved by
  0.1, which "them" means is not sure;
- the active-learning run's cost estimates ("about 12 minutes per corpus and seed on one H100 or
  H200", "about 100 hours for the whole protocol on one CPU core"): estimates in ``notes.md``;
- the rows of ``benchmarks/inference.py``, ``api_load.py``, ``first_start.py`` and
  ``api_load_ab.py`` give the latest run's figures only: the runs before are in the history of
  their files (the commits the rows name), and what each of issue 54's serving changes bought
  was measured with scripts kept out of the repository (commit a58d3d7's message);
- "Why the inference targets are missed" names no figure of its own: the runs before
  ``inference-cpu.json``'s (other machines, static int8) are in that file's history.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from functools import partial
from typing import Any

from harness.figures import Fig, Line, _labels_to_95, _row, _tapt_vs_extra_epoch, load


def _nth(data: Any, key: str, k: int) -> float:
    return float(data[key][k])


PAGE = "docs/benchmarks.md"

# -- Active learning ---------------------------------------------------------------------------
AL = "active_learning/summary.json"
CURVES = "active_learning/curves.json"
SUMMARY = ("details", "summary")
_STRATEGIES = ("least_confidence", "entropy", "margin")

#: random order's largest size measured on every seed (2,000 on both corpora)
LARGEST = Fig(AL, ("NCBI-disease", "random_largest"), ",")


def _curve_at_largest(data: Any, corpus: str, strategy: str, key: str) -> float:
    summary = data["details"]["summary"][corpus]
    return float(summary["strategies"][strategy]["curve"][str(summary["random_largest"])][key])


def _full_pool_std(data: Any, corpus: str) -> float:
    """The full pool's test F1, its std over the seeds (``summary.json`` keeps the mean)."""
    f1 = [r["f1"] for r in data if r["corpus"] == corpus and r["strategy"] == "full-pool"]
    return float(statistics.stdev(f1))


def _to_random(corpus: str, strategy: str) -> list[Fig]:
    """Labels a strategy needs to reach random's largest-size F1, and their share of random's."""
    at = (*SUMMARY, corpus, "strategies", strategy)
    return [
        Fig(AL, (*at, "labels_to_random_largest"), ","),
        Fig(AL, (*at, "fraction_of_random_labels"), "%0"),
    ]


def _best_fraction(data: Any, corpus: str) -> float:
    """The smallest share of random's labels any strategy needs on a corpus."""
    return float(min(data[corpus]["fraction_of_random_labels"].values()))


def _first_seed_best_fraction(data: Any, corpus: str) -> float:
    """The same from the first seed's curves alone (``active_learning.summarise``'s rule: the
    first size whose F1 reaches random's at its largest size)."""
    curves: dict[str, dict[int, float]] = {}
    for r in data:
        if r["corpus"] == corpus and r["seed"] == 1 and r["strategy"] != "full-pool":
            curves.setdefault(r["strategy"], {})[r["labelled"]] = r["f1"]
    random = curves.pop("random")
    largest = max(random)
    reached = [
        next(n for n in sorted(c) if n <= largest and c[n] >= random[largest])
        for c in curves.values()
    ]
    return min(reached) / largest


def _gains(data: Any) -> list[float]:
    """Each strategy's mean test F1 above random's at random's largest size, per corpus."""
    out = []
    for summary in data["details"]["summary"].values():
        size = str(summary["random_largest"])
        random = summary["strategies"]["random"]["curve"][size]["mean"]
        out += [summary["strategies"][s]["curve"][size]["mean"] - random for s in _STRATEGIES]
    return out


def _gain(data: Any, pick: Callable[[list[float]], float]) -> float:
    return float(pick(_gains(data)))


# -- train_step.py -----------------------------------------------------------------------------
STEP = "train_step-cpu.json"
VOCABULARY, HIDDEN = 30_522, 384  # MiniLM's; the page quotes both


def _projection_share(data: Any) -> float:
    """The full-vocabulary projection's share of MSLM's extra FLOPs per step: 2 FLOPs per
    multiply-add, three products (forward, input gradient, weight gradient) at the masked
    positions."""
    details = data["details"]
    projection = 6 * details["mean_masked_tokens_per_batch"] * VOCABULARY * HIDDEN / 1e9
    gflop = details["gflop_per_step"]
    return float(projection / (gflop["mslm"] - gflop["vanilla"]))


# -- assertion.py ------------------------------------------------------------------------------
ASSERTION = "assertion/summary.json"
ASSERTION_TEST = "assertion-test/summary.json"
BIOSCOPE_FOUND = ("corpora", "BioScope", "side_by_side_findings", "clinical", "negated")

# -- reproduce.py ------------------------------------------------------------------------------
BASELINE = "baseline-cpu/summary.json"
_BASELINE_SETS = ("NCBI-disease-IOB@2000", "BC5CDR-chem-IOB@2000", "BC5CDR-IOB@2000")
SMALL = "cpu-small/summary.json"
SMALL_GPU = "gpu/cpu-small/summary.json"
INFERENCE = "inference-cpu.json"
API = "api_load-cpu.json"
API2 = "api_load-cpu-2-processes.json"
API_AB = "api_load-ab-cpu.json"
FIRST_START = "clinical/first-start.json"
_SMALL_SETS = ("NCBI-disease-IOB", "BC5CDR-chem-IOB")


def _vs_textbook(variant: str, key: str, fmt: str) -> list[Fig]:
    """A variant against the textbook fine-tune, paired over seeds, on each corpus."""
    return [
        Fig(BASELINE, ("datasets", c, variant, "vs_baseline", key), fmt) for c in _BASELINE_SETS
    ]


def _best_f1(data: Any, variant: str, corpora: tuple[str, ...]) -> float:
    """A variant's highest mean test F1 over the corpora ("0.0 on all three")."""
    return float(max(data["datasets"][c][variant]["f1_mean"] for c in corpora))


def _small(corpus: str) -> list[Fig | None]:
    """cpu-small on a corpus: vanilla, MSLM honest, Δ, p, MSLM leaky."""
    at = ("datasets", corpus)
    return [
        Fig(SMALL, (*at, "vanilla", "f1_mean"), "%1"),
        Fig(SMALL, (*at, "vanilla", "f1_std"), "%1"),
        Fig(SMALL, (*at, "mslm", "f1_mean"), "%1"),
        Fig(SMALL, (*at, "mslm", "f1_std"), "%1"),
        Fig(SMALL, (*at, "mslm", "vs_baseline", "f1_diff_mean"), "+%1"),
        None,  # p < 0.001: a bound
        Fig(SMALL, (*at, "mslm", "leaky_f1_mean"), "%1"),
        Fig(SMALL, (*at, "mslm", "leaky_f1_std"), "%1"),
    ]


def _time_ratio(data: Any, pick: Callable[[list[float]], float]) -> float:
    """MSLM's training CPU time over vanilla's, the lower or higher of the two corpora."""
    return float(
        pick([data["datasets"][c]["mslm"]["vs_baseline"]["train_time_ratio"] for c in _SMALL_SETS])
    )


LINES: tuple[Line, ...] = (
    # -- Active learning
    _row(
        PAGE,
        "| random order,",
        LARGEST,
        *[
            Fig(AL, partial(_curve_at_largest, corpus=c, strategy="random", key=k), "%1")
            for c in ("NCBI-disease", "BC5CDR")
            for k in ("mean", "std")
        ],
    ),
    _row(
        PAGE,
        "| the whole pool (",
        Fig(AL, (*SUMMARY, "NCBI-disease", "pool"), ","),
        Fig(AL, (*SUMMARY, "BC5CDR", "pool"), ","),
        Fig(AL, ("NCBI-disease", "full_pool_f1"), "%1"),
        Fig(CURVES, partial(_full_pool_std, corpus="NCBI-disease"), "%1"),
        Fig(AL, ("BC5CDR", "full_pool_f1"), "%1"),
        Fig(CURVES, partial(_full_pool_std, corpus="BC5CDR"), "%1"),
    ),
    _row(
        PAGE,
        "F1: least confidence | **",
        LARGEST,
        *_to_random("NCBI-disease", "least_confidence"),
        *_to_random("BC5CDR", "least_confidence"),
    ),
    _row(
        PAGE,
        "| — entropy |",
        *_to_random("NCBI-disease", "entropy"),
        *_to_random("BC5CDR", "entropy"),
    ),
    _row(
        PAGE,
        "| — margin |",
        *_to_random("NCBI-disease", "margin"),
        *_to_random("BC5CDR", "margin"),
    ),
    _row(
        PAGE,
        "pool's F1: random / least confidence / entropy / margin |",
        None,  # 95 %: the target
        LARGEST,  # > 2,000: random does not reach it on NCBI-disease by its largest size
        *[
            Fig(AL, ("NCBI-disease", "labels_to_95pct_full", s), ",")
            for s in ("least_confidence", "entropy", "margin")
        ],
        *[
            Fig(AL, ("BC5CDR", "labels_to_95pct_full", s), ",")
            for s in ("random", "least_confidence", "entropy", "margin")
        ],
    ),
    _row(
        PAGE,
        "labels: least confidence / entropy / margin |",
        LARGEST,
        *[
            Fig(AL, partial(_curve_at_largest, corpus=c, strategy=s, key=k), "%1")
            for c in ("NCBI-disease", "BC5CDR")
            for s in _STRATEGIES
            for k in ("mean", "std")
        ],
    ),
    _row(PAGE, "The goal — random's", LARGEST, None),  # ≤ 60 %: the goal
    _row(
        PAGE,
        "NCBI-disease (least confidence) and **not on BC5CDR**",
        Fig(AL, partial(_best_fraction, corpus="BC5CDR"), "%0"),
    ),
    _row(
        PAGE,
        "seed alone said",
        Fig(CURVES, partial(_first_seed_best_fraction, corpus="BC5CDR"), "%0"),
        None,  # 95 %: the target
    ),
    _row(
        PAGE,
        "labels, where random order needs",
        Fig(AL, lambda d: _labels_to_95(d, min), ","),
        Fig(AL, lambda d: _labels_to_95(d, max), ","),
        Fig(AL, ("BC5CDR", "labels_to_95pct_full", "random"), ","),
        Fig(AL, partial(_gain, pick=min), "%0"),
        Fig(AL, partial(_gain, pick=max), "%0"),
    ),
    _row(PAGE, "The fractions are read off noisy curves", LARGEST),
    # -- The scripts
    _row(
        PAGE,
        "| `benchmarks/train_step.py` |",
        None,  # ELM 1.0, BLM 0.075: the rates
        None,
        None,  # batch 16
        Fig(STEP, ("vanilla_step_s",), "3"),
        Fig(STEP, ("mslm_step_s",), "3"),
        Fig(STEP, ("ratio",), "3"),
        Fig(STEP, ("details", "median_of_paired_ratios"), "3"),
        None,  # 150 steps
        None,  # ≤ 1.15: the target
        Fig(STEP, ("details", "flop_ratio"), "2"),
        Fig(STEP, ("details", "gflop_per_step", "vanilla"), "1"),
        Fig(STEP, ("details", "gflop_per_step", "mslm"), "1"),
        Fig(STEP, _projection_share, "%0"),
        Fig(STEP, ("details", "mean_masked_tokens_per_batch"), "0"),
        None,  # 30,522 × 384: MiniLM's vocabulary and hidden size
        None,
    ),
    _row(
        PAGE,
        "| `benchmarks/assertion.py` |",
        *[
            Fig(ASSERTION, ("headline", "MACCROBAT2020", "negated_f1", s), "3")
            for s in ("ours", "medspacy", "negspacy")
        ],
        *[
            Fig(ASSERTION, ("headline", "held_out_check_set", s, a), "3")
            for s in ("ours (context)", "medspacy")
            for a in ("hypothetical", "historical")
        ],
        *[
            Fig(ASSERTION_TEST, (*BIOSCOPE_FOUND, s, "f1"), "3")
            for s in ("ours", "medspacy", "negspacy")
        ],
        Fig(ASSERTION, ("headline", "sections", "ours", "coverage"), "2"),
        Fig(ASSERTION, ("headline", "sections", "medspacy", "coverage"), "2"),
        Fig(ASSERTION_TEST, ("headline", "MACCROBAT2020", "clinical_negated_f1_end_to_end"), "3"),
    ),
    _row(
        PAGE,
        "| `benchmarks/inference.py` |",
        None,  # the first 940 sentences
        None,  # 11 types
        None,  # batch 32
        None,  # 3 rounds
        Fig(INFERENCE, ("pipeline_sps",), "1"),
        Fig(INFERENCE, ("fp32_sps",), "1"),
        Fig(INFERENCE, ("fp32_speedup",), "2"),
        Fig(INFERENCE, ("int8_sps",), "1"),
        Fig(INFERENCE, ("int8_speedup",), "2"),
        Fig(INFERENCE, ("f1", "fp32"), "3"),
        Fig(INFERENCE, ("f1", "int8"), "3"),
        None,  # a 30-word sentence: the size run
        Fig(INFERENCE, ("p50_ms",), "1"),
        Fig(INFERENCE, ("p95_ms",), "1"),
        Fig(INFERENCE, ("peak_rss_mb",), "0"),
        Fig(INFERENCE, ("context_share",), "%1"),
        Fig(INFERENCE, ("context_p50_ms",), "2"),
        None,  # the 30-word sentence
        None,  # ≤ 10 %: the target
        None,  # 16 windows: the setting
        Fig(INFERENCE, ("details", "per_engine", "int8-batched", "sps"), "1"),
        Fig(INFERENCE, ("details", "int8_batched_speedup"), "2"),
        None,  # 4.5×: the target
        None,  # 3×: the target
    ),
    _row(
        PAGE,
        "| `benchmarks/api_load.py` |",
        None,  # 1, 8, 32 clients: the levels run
        None,
        None,
        None,  # 11 types
        Fig(API, ("offline_sps",), "1"),
        Fig(API, ("offline_model_only_sps",), "1"),
        Fig(API, ("api_sps", "1"), "1"),
        Fig(API, ("api_sps", "8"), "1"),
        Fig(API, ("api_sps", "32"), "1"),
        Fig(API, ("ratio_32",), "2"),
        None,  # 32 clients
        *[Fig(API, partial(_nth, key="ratio_32_runs", k=k), "3") for k in range(3)],
        Fig(API, ("errors",), "0"),
        Fig(API, ("p50_ms",), "0"),
        Fig(API, ("p95_ms",), "0"),
        Fig(API, ("p99_ms",), "0"),
        Fig(API, ("client_cpu_share_32",), "%1"),
        # the run before batches of one step, and what they bought: py-spy and A/B runs kept
        # out of the repository (their figures: the commit's message)
        *[None] * 22,
        None,  # --processes 2
        None,  # MSLM_API_PROCESSES=2
        Fig(API2, ("offline_sps",), "1"),
        Fig(API2, ("api_sps", "1"), "1"),
        Fig(API2, ("api_sps", "8"), "1"),
        Fig(API2, ("api_sps", "32"), "1"),
        Fig(API2, ("ratio_32",), "2"),
        *[Fig(API2, partial(_nth, key="ratio_32_runs", k=k), "3") for k in range(3)],
        Fig(API2, lambda d: d["api_sps"]["32"] / load(API)["api_sps"]["32"], "2"),
        Fig(API2, lambda d: d["api_sps"]["32"] / load(API)["offline_sps"], "2"),
        Fig(API2, lambda d: d["offline_sps"] / load(API)["offline_sps"], "2"),
        Fig(API2, ("details", "api_rss_mb", "start"), ","),
        Fig(API, ("details", "api_rss_mb", "start"), "0"),
        None,  # issue 54
        Fig("api_load-cpu-aiohttp.json", ("ratio_32",), "2"),
        None,  # issue 54
        None,  # ≥ 0.80: the goal
    ),
    _row(
        PAGE,
        "| `benchmarks/first_start.py` |",
        None,  # /readyz 200: a status
        None,  # the first 10 %: when the estimates are judged
        None,  # 2026: the date
        None,  # 2 CPU cores
        Fig(FIRST_START, ("minutes_to_early",), "1"),
        Fig(FIRST_START, ("minutes_to_served",), "1"),
        Fig(FIRST_START, lambda d: d["train_seconds"] / 60, "0"),
        None,  # the first 10 %
        Fig(FIRST_START, ("estimates", "early", "median_error"), "3"),
        Fig(FIRST_START, ("estimates", "early", "worst_error"), "3"),
        Fig(FIRST_START, ("estimates", "full", "median_error"), "3"),
        Fig(FIRST_START, ("estimates", "full", "worst_error"), "3"),
        None,  # 0.25: the goal
        None,  # 10 s before the early job's end (its series)
        None,  # 3.3 s short (its series: 7.2 said, 10.5 true)
        None,  # the pace's constants (mslm_core.train.pace), settings
        None,
        None,
        None,
        None,
        None,
        None,
    ),
    _row(
        PAGE,
        "| `benchmarks/api_load_ab.py` |",
        None,  # 11 types
        None,  # 884 sentences
        None,  # 3 rounds × 15 s: the protocol
        None,
        *[Fig(API_AB, ("base_api_sps", c), "1") for c in ("1", "8", "32")],
        *[Fig(API_AB, ("head_api_sps", c), "1") for c in ("1", "8", "32")],
        None,  # 1 / 8 / 32 clients
        None,
        None,
        *[Fig(API_AB, ("head_over_base", c), "2") for c in ("1", "8", "32")],
        Fig(API_AB, ("errors",), "0"),
    ),
    _row(
        PAGE,
        "| `benchmarks/reproduce.py` |",
        None,  # 100–2,000 sentences, 3 seeds: the protocol
        None,
        None,
    ),
    _row(
        PAGE,
        "| `benchmarks/active_learning.py` |",
        None,  # 100 → 2,000 by 100: the sizes run
        None,
        None,
        None,  # 95 %: the target
        LARGEST,
        Fig(AL, ("NCBI-disease", "random_f1"), "%1"),
        Fig(AL, ("NCBI-disease", "fraction_of_random_labels", "least_confidence"), "%0"),
        Fig(AL, partial(_best_fraction, corpus="BC5CDR"), "%0"),
        None,  # ≤ 60 %: the goal
        None,  # 2 / 2 seeds of 3
        None,
        None,
    ),
    _row(
        PAGE,
        "| `benchmarks/reproduce.py baseline-cpu` |",
        None,  # 2,000 sentences, 3 epochs, 3 seeds: the protocol
        None,
        None,
        *_vs_textbook("default", "f1_diff_mean", "+%1"),
        *_vs_textbook("default", "p_value", "2"),
        *_vs_textbook("vanilla", "f1_diff_mean", "+%1"),
        None,  # 4-epoch vanilla
        *[Fig(BASELINE, partial(_tapt_vs_extra_epoch, corpus=c), "+%1") for c in _BASELINE_SETS],
        Fig(BASELINE, partial(_best_f1, variant="mslm", corpora=_BASELINE_SETS), "%1"),
    ),
    _row(
        PAGE,
        "| `benchmarks/reproduce.py cpu-small` |",
        None,  # 2 CPU cores
        None,  # ELM 1.0 / BLM 0.075
        None,
        None,  # 3,000 training sentences, 2 epochs, 3 seeds: the protocol
        None,
        None,
        *_small("NCBI-disease-IOB"),
        *_small("BC5CDR-chem-IOB"),
        Fig(SMALL, partial(_time_ratio, pick=min), "2"),
        Fig(SMALL, partial(_time_ratio, pick=max), "2"),
        Fig(SMALL, lambda d: d["run_time"]["wall_seconds"] / 60, "1"),
        None,  # 2 CPU cores
        Fig(SMALL, ("n_runs",), ","),
        *[Fig(SMALL_GPU, ("datasets", c, "vanilla", "f1_mean"), "%1") for c in _SMALL_SETS],
        Fig(SMALL_GPU, partial(_best_f1, variant="mslm", corpora=_SMALL_SETS), "%1"),
        *[Fig(SMALL_GPU, ("datasets", c, "mslm-clean", "f1_mean"), "%1") for c in _SMALL_SETS],
    ),
)
