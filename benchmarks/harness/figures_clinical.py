"""The measured figures of docs/clinical-schema.md, each read from the committed result file it
comes from (see :mod:`harness.figures`).

The files: ``clinical/summary.json`` (the table: the recipe, each corpus alone and the textbook,
three seeds), ``clinical/runs/`` (each seed's run: the recipe's seeds 1 and 2 are the "same
seeds" the ablations are set against), ``clinical/ablations/`` (one file a seed of each
ablation), ``clinical/misses-*.json`` (where the strict points go), ``clinical/first-start.json``
(the first start of commit 5f15b3c and its early model), ``clinical/first-start-epyc.json`` and
``clinical/assertion-first-start-epyc.json`` (the first start on the second machine and its model
end to end), ``assertion-test/summary.json`` (the BC5CDR-only model end to end),
``note-style/test.json`` and ``relations/summary.json``.

A difference between figures is worked out in one of two ways, the one the page used: from the
figures as the page writes them (rounded to one decimal first: "78.7 → 79.4: +0.7") or from the
stored values (where one of the two is not written beside it). Signed differences in points are
written through ``"+%1"`` of a hundredth.

Read from a file as an earlier commit's tree held it, since overwritten (``history/<commit>/``
under benchmarks/results/): the one model's CHIA Procedure row as scored apart until 28 November
(12.1 points below the corpus alone, −12.13 in ``clinical/summary.json`` of 95fd98a, before
48408f7 regrouped it); the first start of commit 7f18b9a (29.5 and 1.8 minutes:
``first-start.json`` of b11f70b), the earlier one of commit 0b04c4c on a slower machine (39.4 and
2.2: of b78bd4b) and the full model alone in an earlier run (32.3: of b29edda).

Not registered, their figures being in no file of the tree (:data:`UNMEASURED` says why, line
by line): how long a whole seed of the table takes (between 2 and 3½ hours); 0.34 s a step
against 0.26 (the runs of 0b04c4c and 7f18b9a: no file holds their steps); the early model's 71
and 85 s of steps (``first-start.json`` holds the full model's training time only), so the table
row "what it trains" stays unregistered; one merged seed with ``--strategy auto`` (about 40
minutes: an estimate, not run). The first-start model's misses
"within" so many points of the 5-epoch bundle's are the largest difference over the rows that
line and the next quote (found exactly, other boundaries, spurious): 1.7, other boundaries on
BC5CDR (found exactly alone differs by up to 1.3, spurious by 1.4). Not registered as unsure:
the retyping that "costs under 2 points" (NCBI-disease's share of mentions typed
as a type it does not annotate is 2.1 %, BC5CDR's 1.7 %). Left out as no measurements: the
old Procedure|Test row's precision "always 1" (so it was scored); the corpora's own counts
(MACCROBAT's modifier mentions 175, 76, 283, 376; the overlaps dropped, 62 of 17,620 and 1,417
of 23,126, and the entities across sentences, 2 and 6), counted from the corpora, in no result
file; the corpora table's sizes and splits.

The page's 0.780 (the note-style recipe's strict F1 on the test notes) is 0.7795 in its file,
2,752 of 3,565 gold and 3,496 predicted (0.77949), which Python and docs/notes.md write 0.779;
its 0.291 (the styles-and-weight-1 model's negated F1 on CHIA end to end) is 27 of 63 and 29 of
132 (0.29049), stored 0.2905, written 0.290.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from functools import partial
from typing import Any

from harness.figures import Fig, Line, Unmeasured, _row, history, load

PAGE = "docs/clinical-schema.md"
SUMMARY = "clinical/summary.json"
RUNS = "clinical/runs/"
AB = "clinical/ablations/"
FIRST = "clinical/first-start.json"
#: first-start.json as earlier commits held it: the run of commit 7f18b9a (b11f70b), the one of
#: 0b04c4c on a slower machine (b78bd4b), the full model alone in an earlier run (b29edda).
FIRST_7F18B9A = history("b11f70b", FIRST)
FIRST_0B04C4C = history("b78bd4b", FIRST)
FIRST_FULL_ONLY = history("b29edda", FIRST)
#: clinical/summary.json before 48408f7 grouped CHIA's procedures apart (95fd98a).
SUMMARY_APART = history("95fd98a", "clinical/summary.json")
EPYC = "clinical/first-start-epyc.json"
EPYC_CONTEXT = "clinical/assertion-first-start-epyc.json"
MISSES_E5 = "clinical/misses-epochs5-s1.json"
MISSES_EPYC = "clinical/misses-first-start-epyc.json"
MISSES_EARLY = "clinical/misses-early.json"
MISSES_FULL = "clinical/misses-first-start.json"
DECISIONS = "clinical/decisions.json"

MAC, CHIA, BC5, NCBI = "MACCROBAT2020", "CHIA", "BC5CDR-IOB", "NCBI-disease-IOB"
CORPORA = (MAC, CHIA, BC5, NCBI)

#: A figure worked out from one or several files, in points (F1 × 100) unless said otherwise.
Value = Callable[[], float]

# The runs the ablations are set against and the ablations, by file.
RECIPE_1 = f"{RUNS}merged-all-s1.json"
RECIPE_2 = f"{RUNS}merged-all-s2.json"
PUBMED_1 = f"{AB}merged-pubmed-weight1-s1.json"
PUBMED_2 = f"{AB}merged-pubmed-weight1-s2.json"
STYLES_1 = f"{AB}merged-styles-s1.json"
STYLES_2 = f"{AB}merged-styles-s2.json"
STYLES_W1 = f"{AB}merged-styles-weight1-s1.json"
BLANK = f"{AB}merged-styles-weight1-blank-s1.json"
E5_1 = f"{AB}merged-styles-weight1-epochs5-s1.json"
E5_2 = f"{AB}merged-styles-weight1-epochs5-s2.json"
EPOCHS5 = f"{AB}merged-epochs5-s1.json"
BC5_E5_1 = f"{AB}single-BC5CDR-epochs5-s1.json"
BC5_E5_2 = f"{AB}single-BC5CDR-epochs5-s2.json"
CHIA_E5 = f"{AB}single-CHIA-epochs5-s1.json"
BC5_ALONE_1 = f"{RUNS}single-BC5CDR-IOB-s1.json"


# -- values ------------------------------------------------------------------------------------
def _score(source: str, corpus: str, type_: str = "all", part: str = "test") -> float:
    """A run's strict F1 on a corpus's test documents (or on one type of it), in points;
    ``part="test_served"``: read as the bundle serves text."""
    row = load(source)[part][corpus]
    f1 = row["strict"]["f1"] if type_ == "all" else row["per_type"][type_]["f1"]
    return 100 * float(f1)


def _table(corpus: str, system: str, type_: str = "all") -> float:
    """The table's strict F1 (mean of three seeds, points) of a system: ``merged`` (the recipe),
    ``single`` (that corpus alone), ``textbook``."""
    return float(load(SUMMARY)["table"][corpus][system][type_]["strict_f1"]["mean"])


def _mean(values: tuple[Value, ...]) -> float:
    return statistics.mean(v() for v in values)


def _stdev(values: tuple[Value, ...]) -> float:
    """The seeds' sample standard deviation, as the table's."""
    return statistics.stdev(v() for v in values)


def _diff(a: Value, b: Value, written: bool = False) -> float:
    """``a`` − ``b``; ``written``: of the two as the page writes them (one decimal)."""
    x, y = a(), b()
    if written:
        x, y = round(x, 1), round(y, 1)
    return x - y


def _spread(values: tuple[Value, ...]) -> float:
    got = [v() for v in values]
    return max(got) - min(got)


def _pick(values: tuple[Value, ...], pick: Callable[[list[float]], float]) -> float:
    return pick([v() for v in values])


def _key(source: str, *keys: str | int) -> float:
    data = load(source)
    for k in keys:
        data = data[k]
    return float(data)


def _ratio(a: Value, b: Value) -> float:
    return a() / b()


def _call(data: Any, value: Value) -> float:
    return value()


def _hundredth(data: Any, value: Value) -> float:
    return value() / 100


def _fig(source: str, value: Value, fmt: str = "1") -> Fig:
    """A figure worked out by ``value`` (``source``: the file it reads first); ``fmt="+1"``: a
    signed difference in points (written by ``"+%1"`` of a hundredth)."""
    if fmt == "+1":
        return Fig(source, partial(_hundredth, value=value), "+%1")
    return Fig(source, partial(_call, value=value), fmt)


def _s(source: str, corpus: str, type_: str = "all", part: str = "test") -> Value:
    return partial(_score, source, corpus, type_, part)


def _t(corpus: str, system: str = "single", type_: str = "all") -> Value:
    return partial(_table, corpus, system, type_)


def _m(*values: Value) -> Value:
    return partial(_mean, values)


def _d(a: Value, b: Value, written: bool = False) -> Value:
    return partial(_diff, a, b, written)


def _k(source: str, *keys: str | int) -> Value:
    return partial(_key, source, *keys)


def _run(source: str, corpus: str, type_: str = "all", part: str = "test") -> Fig:
    """A run's strict F1 on a corpus (or type), in points."""
    return _fig(source, _s(source, corpus, type_, part))


def _two(first: str, second: str, corpus: str, type_: str = "all") -> Value:
    """The mean of two seeds' strict F1."""
    return _m(_s(first, corpus, type_), _s(second, corpus, type_))


def _cpu(source: str) -> Value:
    return _k(source, "train_cpu_seconds")


# -- the table ---------------------------------------------------------------------------------
SYSTEMS = ("merged", "single", "textbook", "textbook-tuned")


def _cell(corpus: str, system: str, type_: str = "all", key: str = "strict_f1") -> Fig:
    return Fig(SUMMARY, ("table", corpus, system, type_, key, "mean"), "1")


def _std(corpus: str, system: str) -> Fig:
    return Fig(SUMMARY, ("table", corpus, system, "all", "strict_f1", "std"), "1")


def _pair(corpus: str, pair: str, end: int | None = None) -> Fig:
    """A paired comparison of the summary (``a − b`` on the seeds both ran), in points: the
    mean difference, or an end of its 95 % interval (``end`` 0 or 1)."""
    at: tuple[str | int, ...] = ("table", corpus, "paired", pair)
    return Fig(SUMMARY, (*at, "diff_mean") if end is None else (*at, "ci95", end), "+1")


def _table_row(anchor: str, corpus: str, *lead: Fig | None) -> Line:
    return _row(
        PAGE, anchor, *lead, *[f for s in SYSTEMS for f in (_cell(corpus, s), _std(corpus, s))]
    )


# -- where the strict points go ----------------------------------------------------------------
def _miss(source: str, corpus: str, what: str, fmt: str = "1") -> Fig:
    return Fig(source, (corpus, what), fmt)


def _merged_minutes(_: Any, pick: Callable[[list[float]], float]) -> float:
    """The fastest or slowest of the merged recipe's seeds, in wall minutes."""
    return pick(
        [float(load(f"{RUNS}merged-all-s{k}.json")["wall_seconds"]) / 60 for k in (1, 2, 3)]
    )


def _spurious(data: Any, pick: Callable[[list[float]], float]) -> float:
    return pick([float(data[c]["spurious"]) for c in CORPORA])


def _misses_apart(data: Any, rows: tuple[str, ...]) -> float:
    """The largest difference, in points, between the second machine's first-start bundle's misses
    (``data``) and the 5-epoch bundle's, over the four corpora and the rows the page quotes."""
    e5 = load(MISSES_E5)
    return max(abs(float(data[c][w]) - float(e5[c][w])) for c in CORPORA for w in rows)


def _early_and_full(anchor: str, what: str) -> Line:
    return _row(
        PAGE,
        anchor,
        *[_miss(source, c, what) for source in (MISSES_EARLY, MISSES_FULL) for c in CORPORA],
    )


# -- end to end (the context step on the model's own spans) ------------------------------------
def _end_to_end(data: Any, corpus: str, key: str) -> float:
    """A share end to end, from its counts (the file stores shares rounded to four decimals:
    CHIA's 2,026 of 2,382 findings, 0.850546, is stored 0.8505, which Python writes 85.0 %):
    ``findings_recall``, or the negated findings' ``precision``, ``recall`` or ``f1``."""
    spans = data["corpora"][corpus]["predicted_spans"]["clinical"]
    if key == "findings_recall":
        gold = spans["gold_findings"]
        return float(round(spans[key] * gold) / gold)
    row = spans["negated_end_to_end"]
    p = round(row["precision"] * row["predicted_negated"]) / row["predicted_negated"]
    r = round(row["recall"] * row["gold_negated"]) / row["gold_negated"]
    f1 = 2 * p * r / (p + r) if p + r else 0.0
    return float({"precision": p, "recall": r, "f1": f1}[key])


def _found(source: str, corpus: str) -> Fig:
    """The share of a corpus's gold findings the model finds, end to end."""
    return Fig(source, partial(_end_to_end, corpus=corpus, key="findings_recall"), "%1")


def _negated(source: str, corpus: str, key: str = "f1") -> Fig:
    """Negated findings' F1 (or precision, recall) end to end."""
    return Fig(source, partial(_end_to_end, corpus=corpus, key=key), "3")


# -- precision and recall over the table's seeds -----------------------------------------------
def _seeds_mean(data: Any, name: str, corpus: str, key: str) -> float:
    """A strict precision or recall, the mean of the table's three seeds (``runs/``; ``data`` is
    seed 1's file)."""
    runs = [data] + [load(f"{RUNS}{name}-s{s}.json") for s in (2, 3)]
    return statistics.mean(float(r["test"][corpus]["strict"][key]) for r in runs)


def _prec_recall(name: str, key: str) -> Fig:
    return Fig(f"{RUNS}{name}-s1.json", partial(_seeds_mean, name=name, corpus=BC5, key=key), "2")


def _problem_recall(data: Any, overlap: bool) -> float:
    """MACCROBAT's Problems found (strict or by overlap), the mean of the recipe's three seeds
    from their runs (the summary stores it rounded: 70.35 of 70.354)."""
    runs = [data] + [load(f"{RUNS}merged-all-s{s}.json") for s in (2, 3)]
    rows = [r["test"][MAC]["per_type"]["Problem"] for r in runs]
    return statistics.mean(float((r["overlap"] if overlap else r)["recall"]) for r in rows)


def _dev_epoch(data: Any, back: int) -> float:
    """The dev F1 of an epoch counted from the last (``back=1``: the last)."""
    return float(data["history"][-back]["dev_f1"])


#: The shares of gold mentions, in the page's order: found exactly, with other boundaries, not
#: found, typed as a type the corpus does not annotate, the other type.
_MISSES = (
    "found",
    "overlapping span",
    "nothing",
    "a type this corpus does not annotate",
    "the other annotated type",
)

_E5_MEAN_BC5_DRUG = _two(E5_1, E5_2, BC5, "Drug")
#: BC5CDR's Drug alone, each of the table's three seeds.
_BC5_ALONE_DRUG = tuple(_s(f"{RUNS}single-BC5CDR-IOB-s{k}.json", BC5, "Drug") for k in (1, 2, 3))


def _decision(variant: str) -> list[Fig]:
    """A row of the decisions table: the dev macro F1, the recipe's, the difference in points,
    the work and the projected first start."""
    at = ("variants", variant)
    return [
        Fig(DECISIONS, (*at, "dev_macro_f1"), "3"),
        Fig(DECISIONS, (*at, "recipe_dev_macro_f1"), "3"),
        Fig(DECISIONS, (*at, "dev_macro_f1_diff"), "+%1"),
        Fig(DECISIONS, (*at, "work_ratio"), "2"),
        Fig(DECISIONS, (*at, "projected_first_start_minutes"), "1"),
    ]


LINES: tuple[Line, ...] = (
    # -- How well, partly measured: the table
    _row(
        PAGE,
        "| MACCROBAT2020 (overlap F1) |",
        *[
            f
            for s in SYSTEMS
            for f in (_cell(MAC, s), _std(MAC, s), _cell(MAC, s, key="overlap_f1"))
        ],
    ),
    _row(
        PAGE,
        "| … Problem / Test / Drug / Anatomy / Procedure |",
        *[
            _cell(MAC, s, t)
            for s in SYSTEMS
            for t in ("Problem", "Test", "Drug", "Anatomy", "Procedure")
        ],
    ),
    _table_row("| CHIA |", CHIA),
    _row(
        PAGE,
        "| … Drug / Problem / Procedure\\|Test (",
        Fig(SUMMARY, ("table", CHIA, "merged", "Procedure|Test", "support"), ","),
        *[_cell(CHIA, s, t) for s in SYSTEMS for t in ("Drug", "Problem", "Procedure|Test")],
    ),
    _row(
        PAGE,
        "| BC5CDR (Drug / Problem) |",
        *[
            f
            for s in SYSTEMS
            for f in (_cell(BC5, s), _std(BC5, s), _cell(BC5, s, "Drug"), _cell(BC5, s, "Problem"))
        ],
    ),
    _table_row("| NCBI-disease |", NCBI),
    # -- the one model against each corpus alone
    _row(
        PAGE,
        "devices) showed the one model 12.1 points",
        Fig(SUMMARY_APART, lambda d: -d["table"]["CHIA"]["merged_minus_single"]["Procedure"], "1"),
    ),
    _row(
        PAGE,
        "on MACCROBAT (+",
        _pair(MAC, "merged − single"),
        None,  # a 95 % interval
        _pair(MAC, "merged − single", 0),
        _pair(MAC, "merged − single", 1),
        _pair(MAC, "merged − textbook-tuned"),
    ),
    _row(
        PAGE,
        "textbook, 0.0 to +",
        _pair(MAC, "merged − textbook-tuned", 0),
        _pair(MAC, "merged − textbook-tuned", 1),
        Fig(SUMMARY, lambda d: d["table"][MAC]["merged_minus_single"]["Drug"] / 100, "+%1"),
        Fig(SUMMARY, lambda d: -d["table"][CHIA]["paired"]["merged − single"]["diff_mean"], "1"),
    ),
    _row(
        PAGE,
        "recipe alone on CHIA (",
        _pair(CHIA, "merged − single", 0),
        _pair(CHIA, "merged − single", 1),
        Fig(
            SUMMARY,
            lambda d: d["table"][CHIA]["merged_minus_single"]["Procedure|Test"] / 100,
            "+%1",
        ),
    ),
    _row(
        PAGE,
        "textbook there (+",
        _pair(CHIA, "merged − textbook-tuned"),
        _pair(CHIA, "merged − textbook-tuned", 0),
        _pair(CHIA, "merged − textbook-tuned", 1),
        Fig(RECIPE_1, partial(_problem_recall, overlap=True), "%1"),
    ),
    _row(
        PAGE,
        "% exactly). **It pays for that on the PubMed corpora:",
        Fig(RECIPE_1, partial(_problem_recall, overlap=False), "%1"),
        Fig(SUMMARY, lambda d: -d["table"][BC5]["merged_minus_single"]["all"], "1"),
    ),
    _row(
        PAGE,
        "below the same recipe alone on BC5CDR and",
        Fig(SUMMARY, lambda d: -d["table"][NCBI]["merged_minus_single"]["all"], "1"),
    ),
    _row(
        PAGE,
        "this (our recipe alone is level with the tuned textbook on BC5CDR, ",
        _pair(BC5, "single − textbook-tuned"),
    ),
    _row(PAGE, "NCBI-disease, +", _pair(NCBI, "single − textbook-tuned")),
    _row(
        PAGE,
        "(BC5CDR: ",
        _prec_recall("merged-all", "precision"),
        _prec_recall("single-BC5CDR-IOB", "precision"),
        _prec_recall("merged-all", "recall"),
        _prec_recall("single-BC5CDR-IOB", "recall"),
    ),
    _row(
        PAGE,
        "below (two seeds, [below]",
        _fig(E5_1, _d(_t(BC5, "single", "Drug"), _E5_MEAN_BC5_DRUG)),
    ),
    _row(
        PAGE,
        "Scored apart, as this table was until",
        None,  # 28 November
        Fig(RECIPE_1, ("test", CHIA, "per_type", "Procedure", "support"), ","),
    ),
    # -- where the strict points go
    _row(
        PAGE,
        "annotate / the other type — MACCROBAT",
        *[_miss(MISSES_E5, MAC, w) for w in _MISSES],
        *[_miss(MISSES_E5, CHIA, w) for w in ("found", "overlapping span", "nothing")],
    ),
    _row(
        PAGE,
        "NCBI-disease",
        _miss(MISSES_E5, CHIA, "a type this corpus does not annotate"),
        _miss(MISSES_E5, CHIA, "the other annotated type"),
        *[_miss(MISSES_E5, BC5, w) for w in _MISSES],
        *[_miss(MISSES_E5, NCBI, w) for w in _MISSES[:-1]],
        _miss(MISSES_E5, NCBI, "the other annotated type", "0"),
        after="annotate / the other type — MACCROBAT",
    ),
    _row(
        PAGE,
        "(one merged seed took",
        *(
            Fig(
                RUNS + "merged-all-s1.json",
                partial(_merged_minutes, pick=pick),
                "0",
            )
            for pick in (min, max)
        ),
        None,  # 2 CPU cores
    ),
    _row(
        PAGE,
        "are Tests in a case report) costs at most",
        Fig(
            MISSES_E5,
            lambda d: max(float(d[c]["a type this corpus does not annotate"]) for c in CORPORA),
            "1",
        ),
    ),
    _row(
        PAGE,
        "of the predictions of a corpus's own types touch none",
        Fig(MISSES_E5, partial(_spurious, pick=min), "0"),
        Fig(MISSES_E5, partial(_spurious, pick=max), "0"),
    ),
    _row(
        PAGE,
        ", not found ",
        *[
            _miss(f"{AB}misses-single-BC5CDR-s2.json", BC5, w)
            for w in ("found", "overlapping span", "nothing", "spurious")
        ],
    ),
    _row(
        PAGE,
        "**Merging makes the model mark more",
        *[_miss(MISSES_EPYC, BC5, w) for w in ("found", "overlapping span", "nothing", "spurious")],
    ),
    # -- five epochs (seed 1) against the recipe's seed 1
    _row(
        PAGE,
        "the training time. The",
        *[
            _fig(EPOCHS5, _d(_s(EPOCHS5, c), _s(RECIPE_1, c), written=True), "+1")
            for c in (BC5, NCBI, MAC, CHIA)
        ],
        _fig(
            EPOCHS5,
            partial(_ratio, _k(EPOCHS5, "train_seconds"), _k(RECIPE_1, "train_seconds")),
            "2",
        ),
    ),
    # -- the PubMed corpora at weight 1 (seeds 1 and 2) against the recipe's same seeds
    _row(
        PAGE,
        "NCBI-disease-IOB=1 --out DIR`), against the recipe's same seeds",
        None,  # NCBI-disease-IOB=1
        _fig(RECIPE_1, _two(RECIPE_1, RECIPE_2, BC5)),
        _fig(PUBMED_1, _two(PUBMED_1, PUBMED_2, BC5)),
        _fig(PUBMED_1, partial(_stdev, (_s(PUBMED_1, BC5), _s(PUBMED_2, BC5)))),
    ),
    _row(
        PAGE,
        "NCBI-disease",
        *[
            f
            for c in (NCBI, CHIA, MAC)
            for f in (
                _fig(RECIPE_1, _two(RECIPE_1, RECIPE_2, c)),
                _fig(PUBMED_1, _two(PUBMED_1, PUBMED_2, c)),
                _fig(PUBMED_1, partial(_stdev, (_s(PUBMED_1, c), _s(PUBMED_2, c)))),
            )
        ],
        after="NCBI-disease-IOB=1 --out DIR`), against the recipe's same seeds",
    ),
    _row(
        PAGE,
        "F1 (both seeds lower there",
        _fig(PUBMED_1, _d(_s(PUBMED_1, MAC), _s(RECIPE_1, MAC)), "+1"),
        _fig(PUBMED_2, _d(_s(PUBMED_2, MAC), _s(RECIPE_2, MAC)), "+1"),
        _fig(RECIPE_1, _m(_k(RECIPE_1, "dev_macro_f1"), _k(RECIPE_2, "dev_macro_f1")), "3"),
        _fig(PUBMED_1, _m(_k(PUBMED_1, "dev_macro_f1"), _k(PUBMED_2, "dev_macro_f1")), "3"),
        None,  # 31 % more words per epoch: the words weight 1 adds, a size of the corpora
    ),
    _row(
        PAGE,
        "mean of two). Half of the PubMed gap",
        _fig(
            PUBMED_1,
            partial(_ratio, _m(_cpu(PUBMED_1), _cpu(PUBMED_2)), _m(_cpu(RECIPE_1), _cpu(RECIPE_2))),
            "2",
        ),
        _fig(PUBMED_1, _m(_cpu(PUBMED_1), _cpu(PUBMED_2)), ","),
        _fig(RECIPE_1, _m(_cpu(RECIPE_1), _cpu(RECIPE_2)), ","),
    ),
    _row(
        PAGE,
        "exposure — BC5CDR is still",
        _fig(PUBMED_1, _d(_t(BC5), _two(PUBMED_1, PUBMED_2, BC5))),
        _fig(PUBMED_1, _d(_t(NCBI), _two(PUBMED_1, PUBMED_2, NCBI))),
    ),
    _row(
        PAGE,
        "of MACCROBAT's gold findings (negated F1",
        _found(f"{AB}assertion-pubmed-weight1-s1.json", MAC),
        _found(f"{AB}assertion-pubmed-weight1-s2.json", MAC),
        _negated(f"{AB}assertion-pubmed-weight1-s1.json", MAC),
        _negated(f"{AB}assertion-pubmed-weight1-s2.json", MAC),
    ),
    _row(
        PAGE,
        "first-start model finds",
        _found(EPYC_CONTEXT, MAC),
        _negated(EPYC_CONTEXT, MAC),
        _found(f"{AB}assertion-pubmed-weight1-s1.json", CHIA),
        _found(f"{AB}assertion-pubmed-weight1-s2.json", CHIA),
        _negated(f"{AB}assertion-pubmed-weight1-s1.json", CHIA),
        _negated(f"{AB}assertion-pubmed-weight1-s2.json", CHIA),
        _found(EPYC_CONTEXT, CHIA),
        after="of MACCROBAT's gold findings (negated F1",
    ),
    _row(
        PAGE,
        "(0.358). A site that serves abstracts as",
        _negated(EPYC_CONTEXT, CHIA),
    ),
    # -- source styles (seeds 1 and 2) against the recipe's same seeds
    _row(
        PAGE,
        "recipe's same seeds",
        *[
            f
            for c in (BC5, NCBI)
            for f in (
                _fig(RECIPE_1, _two(RECIPE_1, RECIPE_2, c)),
                _fig(STYLES_1, _two(STYLES_1, STYLES_2, c)),
                _fig(STYLES_1, partial(_stdev, (_s(STYLES_1, c), _s(STYLES_2, c)))),
            )
        ],
        after="--seeds 1 2 --variants merged --source-styles`), against the",
    ),
    _row(
        PAGE,
        "for about the same work",
        *[
            f
            for c in (CHIA, MAC)
            for f in (
                _fig(RECIPE_1, _two(RECIPE_1, RECIPE_2, c)),
                _fig(STYLES_1, _two(STYLES_1, STYLES_2, c)),
                _fig(STYLES_1, partial(_stdev, (_s(STYLES_1, c), _s(STYLES_2, c)))),
            )
        ],
        Fig(STYLES_1, ("train_cpu_seconds",), ","),
    ),
    _row(
        PAGE,
        "for the recipe; these runs shared",
        Fig(STYLES_2, ("train_cpu_seconds",), ","),
        Fig(RECIPE_1, ("train_cpu_seconds",), ","),
        Fig(RECIPE_2, ("train_cpu_seconds",), ","),
    ),
    _row(
        PAGE,
        "BC5CDR's mentions found with other boundaries",
        _miss(f"{AB}misses-styles-s1.json", BC5, "overlapping span"),
    ),
    _row(
        PAGE,
        "[`ablations/misses-styles-s1.json`]",
        _miss(MISSES_EPYC, BC5, "overlapping span"),
    ),
    _row(
        PAGE,
        "— but not all of it: BC5CDR is still",
        _fig(STYLES_1, _d(_t(BC5), _two(STYLES_1, STYLES_2, BC5))),
        _fig(STYLES_1, _d(_t(NCBI), _two(STYLES_1, STYLES_2, NCBI))),
    ),
    # -- styles and weight 1 (seed 1) against the recipe's seed 1
    _row(
        PAGE,
        "(Drug",
        _run(RECIPE_1, BC5),
        _run(STYLES_W1, BC5),
        _run(STYLES_W1, BC5, "Drug"),
        _run(STYLES_W1, BC5, "Problem"),
        _fig(SUMMARY, _t(BC5)),
        _fig(STYLES_W1, _d(_s(STYLES_W1, BC5), _t(BC5), written=True), "+1"),
        _run(RECIPE_1, NCBI),
        _run(STYLES_W1, NCBI),
        after="against the recipe's seed 1: BC5CDR",
    ),
    _row(
        PAGE,
        "strict F1; dev macro F1",
        _fig(SUMMARY, _t(NCBI)),
        _fig(STYLES_W1, _d(_s(STYLES_W1, NCBI), _t(NCBI), written=True), "+1"),
        _run(RECIPE_1, MAC),
        _run(STYLES_W1, MAC),
        _run(RECIPE_1, CHIA),
        _run(STYLES_W1, CHIA),
        Fig(RECIPE_1, ("dev_macro_f1",), "3"),
    ),
    _row(
        PAGE,
        "The worst types left are",
        Fig(STYLES_W1, ("dev_macro_f1",), "3"),
        _fig(STYLES_W1, partial(_ratio, _cpu(STYLES_W1), _cpu(RECIPE_1)), "2"),
        Fig(STYLES_W1, ("train_cpu_seconds",), ","),
        Fig(RECIPE_1, ("train_cpu_seconds",), ","),
    ),
    _row(
        PAGE,
        "against its corpus alone) and CHIA's Procedure|Test",
        _fig(STYLES_W1, _d(_s(STYLES_W1, BC5, "Drug"), _t(BC5, type_="Drug"), written=True), "+1"),
        _fig(
            STYLES_W1,
            _d(
                _s(STYLES_W1, CHIA, "Procedure|Test"),
                _t(CHIA, type_="Procedure|Test"),
                written=True,
            ),
            "+1",
        ),
    ),
    _row(
        PAGE,
        ") but ",
        _found(f"{AB}assertion-styles-weight1-s1.json", MAC),
        _negated(f"{AB}assertion-styles-weight1-s1.json", MAC),
        _found(f"{AB}assertion-styles-weight1-s1.json", CHIA),
        _negated(f"{AB}assertion-styles-weight1-s1.json", CHIA),
    ),
    # -- one style (seed 1), read as MACCROBAT
    _row(
        PAGE,
        "gold findings (the recipe's first-start model",
        _found(f"{AB}assertion-styles-s1.json", MAC),
        _found(EPYC_CONTEXT, MAC),
    ),
    _row(
        PAGE,
        "on negated ones (",
        _negated(f"{AB}assertion-styles-s1.json", MAC),
        _negated(EPYC_CONTEXT, MAC),
        _found(f"{AB}assertion-styles-s1.json", CHIA),
    ),
    _row(PAGE, "A hospital's notes are neither case reports", _found(EPYC_CONTEXT, CHIA)),
    # -- the blank style (seed 1): read as each corpus's own / as served
    _row(
        PAGE,
        "CHIA",
        _run(BLANK, MAC),
        _run(BLANK, MAC, part="test_served"),
        _run(RECIPE_1, MAC),
        _run(BLANK, CHIA),
        _run(BLANK, CHIA, part="test_served"),
        _run(RECIPE_1, CHIA),
        _fig(SUMMARY, _t(CHIA)),
        _run(BLANK, BC5),
        _run(BLANK, BC5, part="test_served"),
        after="read as each corpus's own / read as served",
    ),
    _row(
        PAGE,
        "As served it is the",
        _run(RECIPE_1, BC5),
        _fig(SUMMARY, _t(BC5)),
        _run(BLANK, NCBI),
        _run(BLANK, NCBI, part="test_served"),
        _run(RECIPE_1, NCBI),
        _fig(SUMMARY, _t(NCBI)),
    ),
    _row(
        PAGE,
        "its Drug row is",
        _fig(BLANK, _d(_s(BLANK, MAC, part="test_served"), _s(RECIPE_1, MAC), written=True), "+1"),
        _fig(BLANK, _d(_s(RECIPE_1, MAC, "Drug"), _s(BLANK, MAC, "Drug", "test_served"))),
    ),
    _row(
        PAGE,
        "with the blank costs (",
        _fig(BLANK, _d(_s(BLANK, BC5), _s(STYLES_W1, BC5)), "+1"),
        _fig(BLANK, _d(_s(BLANK, NCBI), _s(STYLES_W1, NCBI)), "+1"),
    ),
    _row(
        PAGE,
        "of MACCROBAT's findings",
        _found(f"{AB}assertion-styles-weight1-blank-s1.json", MAC),
        _negated(f"{AB}assertion-styles-weight1-blank-s1.json", MAC),
        _found(f"{AB}assertion-styles-weight1-blank-s1.json", CHIA),
        _negated(f"{AB}assertion-styles-weight1-blank-s1.json", CHIA),
        after="assertion-styles-weight1-blank-s1.json`]",
    ),
    _row(
        PAGE,
        "styles read as MACCROBAT found",
        _found(f"{AB}assertion-styles-weight1-s1.json", CHIA),
        _found(EPYC_CONTEXT, MAC),
        _negated(EPYC_CONTEXT, MAC),
    ),
    _row(
        PAGE,
        "So the blank style undoes",
        _found(EPYC_CONTEXT, CHIA),
        _negated(EPYC_CONTEXT, CHIA),
        None,  # weight 1
    ),
    _row(
        PAGE,
        "its first start would take as long as",
        None,  # weight 1
        _fig(STYLES_W1, partial(_ratio, _cpu(STYLES_W1), _cpu(RECIPE_1)), "2"),
    ),
    # -- styles, weight 1 and 5 epochs: seed 1
    _row(
        PAGE,
        "seeds of 3 epochs): MACCROBAT",
        None,  # 3 epochs
        _run(STYLES_W1, MAC),
        _run(E5_1, MAC),
        _fig(SUMMARY, _t(MAC)),
        _run(STYLES_W1, CHIA),
        _run(E5_1, CHIA),
        _fig(SUMMARY, _t(CHIA)),
        after="against 3 epochs of the same (seed 1)",
    ),
    _row(
        PAGE,
        "Procedure\\|Test",
        _run(STYLES_W1, CHIA, "Procedure|Test"),
        _run(E5_1, CHIA, "Procedure|Test"),
        _fig(SUMMARY, _t(CHIA, type_="Procedure|Test")),
        _run(STYLES_W1, BC5),
        _run(E5_1, BC5),
        _fig(SUMMARY, _t(BC5)),
        _run(STYLES_W1, NCBI),
        after="against 3 epochs of the same (seed 1)",
    ),
    _row(
        PAGE,
        "Every type of every corpus is then within",
        _run(E5_1, NCBI),
        _fig(SUMMARY, _t(NCBI)),
        None,  # the 1-point bound
    ),
    _row(
        PAGE,
        "MACCROBAT's Procedure",
        *[
            _fig(E5_1, _d(_s(E5_1, MAC, t), _t(MAC, type_=t)), "+1")
            for t in ("Procedure", "Test", "Problem", "Result")
        ],
        _fig(E5_1, _d(_s(E5_1, CHIA, "Problem"), _t(CHIA, type_="Problem")), "+1"),
    ),
    _row(
        PAGE,
        "except **BC5CDR's Drug:",
        _run(E5_1, BC5, "Drug"),
        _fig(E5_1, _d(_t(BC5, type_="Drug"), _s(E5_1, BC5, "Drug"))),
        _run(E5_1, BC5, "Problem"),
        _fig(E5_1, _d(_s(E5_1, BC5, "Problem"), _t(BC5, type_="Problem")), "+1"),
    ),
    _row(
        PAGE,
        "): against it, the",
        _run(BC5_E5_1, BC5),
        _run(BC5_E5_1, BC5, "Drug"),
        _run(BC5_E5_1, BC5, "Problem"),
        None,  # 3 epochs
        None,  # seed 1
        _run(BC5_ALONE_1, BC5),
        _run(BC5_ALONE_1, BC5, "Drug"),
    ),
    _row(
        PAGE,
        "same epochs and seed, the merged model is",
        _fig(E5_1, _d(_s(BC5_E5_1, BC5), _s(E5_1, BC5))),
        _fig(E5_1, _d(_s(E5_1, BC5, "Drug"), _s(BC5_E5_1, BC5, "Drug"), written=True), "+1"),
        _fig(E5_1, _d(_s(E5_1, BC5, "Problem"), _s(BC5_E5_1, BC5, "Problem"), written=True), "+1"),
    ),
    _row(
        PAGE,
        "CHIA alone does not gain from them",
        _run(CHIA_E5, CHIA),
        None,  # 5 epochs
        None,  # seed 1
        _run(CHIA_E5, CHIA, "Procedure|Test"),
    ),
    _row(
        PAGE,
        "its dev F1 peaks at the fourth epoch",
        _run(f"{RUNS}single-CHIA-s1.json", CHIA),
        None,  # 3 epochs
        None,
    ),
    _row(
        PAGE,
        "against the three-seed mean of",
        # how far BC5CDR's Drug misses the 1-point bound
        _fig(E5_1, lambda: _diff(_t(BC5, type_="Drug"), _s(E5_1, BC5, "Drug")) - 1),
        None,  # 3 epochs
    ),
    _row(
        PAGE,
        "so one seed does not settle it",
        _fig(BC5_ALONE_1, partial(_spread, _BC5_ALONE_DRUG)),
        _fig(BC5_ALONE_1, partial(_pick, _BC5_ALONE_DRUG, min)),
        _fig(BC5_ALONE_1, partial(_pick, _BC5_ALONE_DRUG, max)),
        Fig(E5_1, ("train_cpu_seconds",), ","),
    ),
    _row(
        PAGE,
        "the recipe, and its dev F1 still rose",
        _fig(E5_1, partial(_ratio, _cpu(E5_1), _cpu(STYLES_W1)), "2"),
        None,  # weight 1
        None,  # 3 epochs
        _fig(E5_1, partial(_ratio, _cpu(E5_1), _cpu(RECIPE_1)), "1"),
    ),
    _row(
        PAGE,
        "epoch",
        Fig(E5_1, partial(_dev_epoch, back=2), "3"),
        Fig(E5_1, partial(_dev_epoch, back=1), "3"),
        after="the recipe, and its dev F1 still rose",
    ),
    # -- seed 2
    _row(
        PAGE,
        "again best at the last epoch",
        None,  # --seeds 2
        Fig(E5_2, ("dev_macro_f1",), "3"),
    ),
    _row(
        PAGE,
        "**NCBI-disease ",
        _run(E5_2, MAC),
        _run(E5_2, CHIA),
        _run(E5_2, BC5),
        _run(E5_2, BC5, "Drug"),
        _run(E5_2, BC5, "Problem"),
        _run(E5_2, NCBI),
    ),
    _row(
        "README.md",
        "A job of yours can buy back most of the PubMed gap",
        None,  # weight 1
        None,  # 5 epochs
        *(_fig(E5_1, _two(E5_1, E5_2, c)) for c in (MAC, CHIA, BC5, NCBI)),
    ),
    _row(
        PAGE,
        "two seeds' means against each corpus alone",
        None,  # three seeds of 3 epochs
        _fig(E5_1, _two(E5_1, E5_2, MAC)),
        _fig(E5_1, _d(_two(E5_1, E5_2, MAC), _t(MAC), written=True), "+1"),
    ),
    _row(
        PAGE,
        "every other type above), CHIA",
        _fig(E5_1, _d(_two(E5_1, E5_2, MAC, "Result"), _t(MAC, type_="Result")), "+1"),
        _fig(E5_1, _d(_two(E5_1, E5_2, MAC, "Drug"), _t(MAC, type_="Drug")), "+1"),
        _fig(E5_1, _two(E5_1, E5_2, CHIA)),
        _fig(E5_1, _d(_two(E5_1, E5_2, CHIA), _t(CHIA)), "+1"),
        _fig(E5_1, _d(_two(E5_1, E5_2, CHIA, "Problem"), _t(CHIA, type_="Problem")), "+1"),
    ),
    _row(
        PAGE,
        "Procedure\\|Test level), NCBI-disease",
        _fig(E5_1, _two(E5_1, E5_2, NCBI)),
        _fig(E5_1, _d(_two(E5_1, E5_2, NCBI), _t(NCBI)), "+1"),
        _fig(E5_1, _two(E5_1, E5_2, BC5)),
        _fig(E5_1, _d(_two(E5_1, E5_2, BC5), _t(BC5)), "+1"),
        _fig(E5_1, _E5_MEAN_BC5_DRUG),
        _fig(E5_1, _d(_E5_MEAN_BC5_DRUG, _t(BC5, type_="Drug")), "+1"),
    ),
    _row(
        PAGE,
        "Against BC5CDR alone with the same",
        _fig(E5_1, _two(E5_1, E5_2, BC5, "Problem")),
        _fig(E5_1, _d(_two(E5_1, E5_2, BC5, "Problem"), _t(BC5, type_="Problem")), "+1"),
        None,  # 5 epochs
        None,  # seed 2
    ),
    _row(
        PAGE,
        "The bound is met on",
        _run(BC5_E5_2, BC5),
        _run(BC5_E5_2, BC5, "Drug"),
        _run(BC5_E5_2, BC5, "Problem"),
        _fig(E5_1, _d(_two(BC5_E5_1, BC5_E5_2, BC5), _two(E5_1, E5_2, BC5))),
        _fig(E5_1, _d(_E5_MEAN_BC5_DRUG, _two(BC5_E5_1, BC5_E5_2, BC5, "Drug")), "+1"),
        _fig(
            E5_1,
            _d(_two(E5_1, E5_2, BC5, "Problem"), _two(BC5_E5_1, BC5_E5_2, BC5, "Problem")),
            "+1",
        ),
    ),
    # -- end to end with styles, weight 1 and 5 epochs
    _row(
        PAGE,
        "of MACCROBAT's findings",
        _found(f"{AB}assertion-styles-weight1-epochs5-s1.json", MAC),
        _negated(f"{AB}assertion-styles-weight1-epochs5-s1.json", MAC),
        _found(f"{AB}assertion-styles-weight1-epochs5-s1.json", CHIA),
        _negated(f"{AB}assertion-styles-weight1-epochs5-s1.json", CHIA),
        after="assertion-styles-weight1-epochs5-s1.json`]",
    ),
    _row(
        PAGE,
        "MACCROBAT the same, **CHIA",
        _found(f"{AB}assertion-styles-weight1-epochs5-own-styles-s1.json", CHIA),
        _negated(f"{AB}assertion-styles-weight1-epochs5-own-styles-s1.json", CHIA),
        _found(EPYC_CONTEXT, MAC),
    ),
    _row(
        PAGE,
        ". Seed ",
        _negated(EPYC_CONTEXT, MAC),
        _found(EPYC_CONTEXT, CHIA),
        _negated(EPYC_CONTEXT, CHIA),
        None,  # seed 2
    ),
    _row(
        PAGE,
        "CHIA read as MACCROBAT",
        _found(f"{AB}assertion-styles-weight1-epochs5-s2.json", MAC),
        _negated(f"{AB}assertion-styles-weight1-epochs5-s2.json", MAC),
        _found(f"{AB}assertion-styles-weight1-epochs5-s2.json", CHIA),
        _negated(f"{AB}assertion-styles-weight1-epochs5-s2.json", CHIA),
        _found(f"{AB}assertion-styles-weight1-epochs5-own-styles-s2.json", CHIA),
    ),
    _row(
        PAGE,
        "The recipe stays: a first start would train",
        _negated(f"{AB}assertion-styles-weight1-epochs5-own-styles-s2.json", CHIA),
        _fig(E5_1, partial(_ratio, _cpu(E5_1), _cpu(RECIPE_1)), "1"),
    ),
    _row(
        PAGE,
        "(BC5CDR's ",
        _fig(E5_1, _d(_t(BC5), _two(E5_1, E5_2, BC5))),
        _fig(E5_1, _d(_t(BC5, type_="Drug"), _E5_MEAN_BC5_DRUG)),
        None,  # 5 epochs
        None,  # weight 1
        after="gets each corpus's model within about a point",
    ),
    # -- note style
    _row(
        PAGE,
        "test notes it lifts strict F1 from",
        Fig("note-style/test.json", ("reading", "strict_f1"), "3"),
    ),
    _row(
        PAGE,
        "with everything else the same; on the source corpora",
        Fig("note-style/test.json", ("notestyle", "strict_f1"), "3"),
        _run(f"{AB}merged-note-style-0.3-s1.json", MAC),
    ),
    _row(
        PAGE,
        "(one seed) against the table's",
        *[_run(f"{AB}merged-note-style-0.3-s1.json", c) for c in (CHIA, BC5, NCBI)],
        *[_cell(c, "merged") for c in CORPORA],
    ),
    # -- the recipe's decisions, from dev figures (benchmarks/recipe_decisions.py)
    *[
        _row(
            PAGE,
            f"| {label} |",
            *([None] * named),  # the variant's weight, epochs or share: its name
            *([None] * seeds),  # the seeds
            *_decision(key),
        )
        for label, key, named, seeds in (
            ("PubMed corpora at weight 1", "pubmed-weight1", 1, 2),
            ("5 fine-tuning epochs", "epochs5", 1, 1),
            ("note style 0.3", "note-style-0.3", 1, 1),
            ("source styles", "styles", 0, 2),
            ("styles, weight 1", "styles-weight1", 1, 1),
            ("styles, weight 1, blank style 0.5", "styles-weight1-blank", 2, 1),
            ("styles, weight 1, 5 epochs", "styles-weight1-epochs5", 2, 2),
        )
    ],
    # -- the first start
    _row(
        PAGE,
        "The recipe trains in",
        Fig(FIRST, lambda d: d["train_seconds"] / 60, "0"),
        None,  # 2 CPU cores
        Fig(FIRST, ("train_seconds",), ","),
    ),
    _row(
        PAGE,
        "after `mslm up`, its early model **",
        Fig(FIRST, ("minutes_to_served",), "1"),
        Fig(FIRST, ("minutes_to_early",), "1"),
    ),
    _row(
        PAGE,
        "7f18b9a the day before took",
        Fig(FIRST_7F18B9A, ("minutes_to_served",), "1"),
        Fig(FIRST_7F18B9A, ("minutes_to_early",), "1"),
    ),
    _row(
        PAGE,
        "with the same loss and dev F1 at every epoch, took",
        Fig(FIRST_0B04C4C, ("minutes_to_served",), "1"),
        Fig(FIRST_0B04C4C, ("minutes_to_early",), "1"),
    ),
    _row(PAGE, "and the full model alone", Fig(FIRST_FULL_ONLY, ("minutes_to_served",), "1")),
    _row(
        PAGE,
        "Two later first starts, each on a fresh",
        None,  # 2-core
        Fig("clinical/first-start-xeon-400fa66.json", ("minutes_to_served",), "1"),
    ),
    _row(
        PAGE,
        "and on an AMD EPYC with AVX2 only at",
        Fig("clinical/first-start-epyc-011df0a.json", ("minutes_to_served",), "1"),
    ),
    _row(
        PAGE,
        "On a second machine (AMD EPYC",
        None,  # 2 cores
        Fig(EPYC, ("minutes_to_served",), "1"),
    ),
    _row(
        PAGE,
        "gold findings (the goal:",
        _found(EPYC_CONTEXT, MAC),
        Fig(EPYC_CONTEXT, ("corpora", MAC, "predicted_spans", "clinical", "gold_findings"), ","),
        None,  # the goal: 80 %
    ),
    _row(
        PAGE,
        "F1 end to end (P",
        _negated(EPYC_CONTEXT, MAC),
        _negated(EPYC_CONTEXT, MAC, "precision"),
        _negated(EPYC_CONTEXT, MAC, "recall"),
        None,  # the goal: 0.60
        Fig(
            "assertion-test/summary.json",
            ("headline", MAC, "bc5cdr_negated_f1_end_to_end"),
            "3",
        ),
    ),
    _row(
        PAGE,
        "held-out trials",
        None,  # 200 trials: the split
        _found(EPYC_CONTEXT, CHIA),
        _negated(EPYC_CONTEXT, CHIA),
    ),
    _row(
        PAGE,
        "are the 5-epoch bundle's within",
        None,  # 5 epochs
        Fig(
            MISSES_EPYC,
            partial(_misses_apart, rows=("found", "overlapping span", "spurious")),
            "1",
        ),
        _miss(MISSES_EPYC, MAC, "found"),
        _miss(MISSES_EPYC, CHIA, "found"),
    ),
    _row(
        PAGE,
        "%; other boundaries",
        _miss(MISSES_EPYC, BC5, "found"),
        _miss(MISSES_EPYC, NCBI, "found"),
        *[_miss(MISSES_EPYC, c, "overlapping span") for c in CORPORA],
        _miss(MISSES_EPYC, MAC, "spurious"),
        _miss(MISSES_EPYC, CHIA, "spurious"),
    ),
    _row(
        PAGE,
        " %.",
        _miss(MISSES_EPYC, BC5, "spurious"),
        _miss(MISSES_EPYC, NCBI, "spurious"),
        after="%; other boundaries",
    ),
    # -- the first start's early model
    _row(
        PAGE,
        "| served after `mslm up` (",
        Fig(FIRST_7F18B9A, ("minutes_to_early",), "1"),
        Fig(FIRST_0B04C4C, ("minutes_to_early",), "1"),
        Fig(FIRST_7F18B9A, ("minutes_to_served",), "1"),
        Fig(FIRST_0B04C4C, ("minutes_to_served",), "1"),
    ),
    _row(
        PAGE,
        "| what it trains | 1 epoch, plain fine-tuning,",
        Fig(FIRST_7F18B9A, ("early_model", "params", "epochs"), "0"),
        Fig(
            FIRST_7F18B9A,
            lambda d: (
                d["early_model"]["params"]["max_train_sentences"]
                * len(d["early_model"]["test"]["strict_f1"])
            ),
            ",",
        ),
        Fig(FIRST_7F18B9A, ("estimates", "early", "run_s"), "0"),
        Fig(FIRST_0B04C4C, ("estimates", "early", "run_s"), "0"),
        Fig(FIRST_7F18B9A, lambda d: len(d["epochs"]), "0"),
        None,  # 22,400 sentences: a count of the recipe's training data
        Fig(FIRST_7F18B9A, ("train_seconds",), ","),
        Fig(FIRST_0B04C4C, ("train_seconds",), ","),
    ),
    _early_and_full("| found exactly, MACCROBAT / CHIA / BC5CDR / NCBI-disease |", "found"),
    _early_and_full("| found with other boundaries |", "overlapping span"),
    _early_and_full("| missed (no predicted span touches it) |", "nothing"),
    _early_and_full("| spurious (of its predictions) |", "spurious"),
    _row(
        PAGE,
        "| strict F1, the first",
        None,  # the first 200 test sentences
        *[Fig(FIRST, ("early_model", "test", "strict_f1", c), "3") for c in CORPORA],
    ),
    _row(PAGE, "its dev F1 (", Fig(FIRST, ("early_model", "dev", "macro_f1"), "3")),
    # -- the type maps
    _row(
        PAGE,
        "relations between the kept types (",
        Fig("relations/summary.json", ("relations_in_corpus", "relations"), ","),
        Fig("relations/summary.json", ("relations_in_corpus", "relation_crosses_sentence"), ","),
    ),
)

#: The page's lines whose decimals are no figure of a committed result file, and why.
UNMEASURED: tuple[Unmeasured, ...] = (
    Unmeasured(PAGE, "| **Dosage** | doses and strengths", "examples of mentions (0.5 μg/kg)"),
    Unmeasured(PAGE, "| **Result** | lab values", "examples of mentions (12.4 g/dL)"),
    Unmeasured(PAGE, "| `Dosage` | Dosage |", "examples of mentions (0.5 μg/kg)"),
    Unmeasured(PAGE, "`weight` 0.5: half its sentences", "a setting (a dataset's weight 0.5)"),
    Unmeasured(
        PAGE, "weight 0.5, so each of their sentences", "a setting (the recipe's weight 0.5)"
    ),
    Unmeasured(PAGE, "keeps 0.5**", "a setting (the recipe's weight 0.5)"),
    Unmeasured(PAGE, "`--blank-style 0.5`", "a setting (blank_style 0.5)"),
    Unmeasured(
        PAGE, "0.5 --weight BC5CDR-IOB=1 --weight", "a setting (the command's --blank-style 0.5)"
    ),
    Unmeasured(PAGE, '"blank_style": 0.5}', "a setting (blank_style 0.5)"),
    Unmeasured(PAGE, "(`note_style` 0.3", "a setting (note_style 0.3)"),
    Unmeasured(PAGE, "| MACCROBAT2020 (Caufield", "a licence's version (CC BY 4.0)"),
    Unmeasured(PAGE, "| CHIA (Kury", "a licence's version (CC BY 4.0)"),
    Unmeasured(PAGE, "**BC5CDR** (weight 0.5", "a setting (the recipe's weight 0.5)"),
    Unmeasured(PAGE, "**NCBI-disease** (weight 0.5)", "a setting (the recipe's weight 0.5)"),
)
