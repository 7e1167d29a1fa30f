"""The measured figures of docs/linking.md, each read from the committed result file it comes
from (see :mod:`harness.figures`).

The files: ``linking/summary.json`` (``benchmarks/linking.py``: gold test mentions of
NCBI-disease and BC5CDR, per corpus and type, typed and abstaining against the type-blind linker
of before; the clinical check set; the calibration's thresholds), ``linking/speed.json``
(``benchmarks/linking_speed.py``: the linking step on the clinical model's answers, the packaged
MeSH and a full-size Athena import), ``linking/athena_scale.json`` (that import's phases:
loading the saved index is its ``activate``), ``vocabulary_scale.json`` (a site vocabulary of
a million concepts imported, activated and looked up) and ``linking/rerank-dev.json``
(``benchmarks/linking.py --rerank-grid``: the optional re-rank's weight, chosen on dev); the
figures before clinical shorthand became synonyms are ``linking/summary.json`` as commit 9ac9838
held it (``history/9ac9838/``). The lines with no committed file are :data:`UNMEASURED`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from harness.figures import Fig, Line, Unmeasured, _row, history

PAGE = "docs/linking.md"
SUMMARY = "linking/summary.json"
SPEED = "linking/speed.json"
SCALE = "vocabulary_scale.json"
ATHENA = "linking/athena_scale.json"
RERANK = "linking/rerank-dev.json"
#: summary.json as commit 9ac9838 held it: before clinical shorthand was taken as synonyms.
BEFORE_SHORTHAND = history("9ac9838", SUMMARY)

TYPED = "typed, abstaining"
BEFORE = "type-blind, score 0.5 (before)"
COMMITTED = "before, committed"  # the linker before the type map and the entry terms
CHECK = "clinical_check_set"
BLIND = "type-blind, score 0.5"  # the check set's type-blind linker


def _best_weight(d: dict[str, Any], corpus: str) -> float:
    """The grid's best weight on one corpus's development mentions (the smaller of a tie)."""
    weights: list[float] = d["weights"]
    return min(weights, key=lambda w: (-d["dev"][corpus][f"weight {w:g}"]["accuracy_at_1"], w))


def _best_at(d: dict[str, Any], corpus: str) -> float:
    return float(d["dev"][corpus][f"weight {_best_weight(d, corpus):g}"]["accuracy_at_1"])


def _dev(corpus: str, key: str) -> Callable[[dict[str, Any]], float]:
    """A figure of one corpus's development mentions at the chosen weight."""
    return lambda d: d["dev"][corpus][f"weight {d['chosen_weight']:g}"][key]


def _test_pair(corpus: str, key: str) -> tuple[Fig, Fig]:
    """A test figure without the re-rank and with it at the chosen weight."""
    return (
        Fig(RERANK, ("test", corpus, "TF-IDF alone", key), "3"),
        Fig(RERANK, lambda d: d["test"][corpus][f"weight {d['chosen_weight']:g}"][key], "3"),
    )


#: The accuracy table's columns: a corpus and the type of its mentions.
COLUMNS = (
    ("NCBI-disease-original", "Disease"),
    ("BC5CDR-original", "Chemical"),
    ("BC5CDR-original", "Disease"),
)
CORPORA = ("NCBI-disease-original", "BC5CDR-original")


def _columns(system: str, key: str, fmt: str) -> list[Fig]:
    """A figure of each column of the accuracy table."""
    return [Fig(SUMMARY, (corpus, kind, system, key), fmt) for corpus, kind in COLUMNS]


def _pairs(keys: tuple[tuple[str, str], ...], system: str) -> list[Fig]:
    """Two figures (``a / b``) of each column of the accuracy table."""
    return [
        Fig(SUMMARY, (corpus, kind, system, key), fmt)
        for corpus, kind in COLUMNS
        for key, fmt in keys
    ]


def _at_coverage(data: Any, corpus: str, kind: str, share: float) -> float:
    """The precision of the most confident links that make up ``share`` of the mentions."""
    points = data[corpus][kind][TYPED]["precision_at_coverage"]
    point = min(points, key=lambda p: abs(p["coverage"] - share))
    return float(point["precision"])


def _spread(data: Any, key: str, pick: Callable[[list[float]], float]) -> float:
    """The least or most of the typed linker's ``key`` over the accuracy table's columns."""
    return float(pick([data[corpus][kind][TYPED][key] for corpus, kind in COLUMNS]))


def _ms_per_mention(data: Any, pick: Callable[[list[float]], float]) -> float:
    """The least or most time per look-up over the two corpora."""
    return float(pick([data[corpus]["ms_per_mention"] for corpus in CORPORA]))


def _right_share(data: Any, system: str) -> float:
    """The share of the check set's concepts given that are right."""
    row = data[CHECK][system]
    return float(row["given_right"] / row["given"])


def _before_wrong(data: Any, pick: Callable[[list[float]], float]) -> float:
    """The least or most share of the type-blind linker's concepts that are wrong, over the two
    corpora (all their mentions)."""
    return float(pick([1 - data[corpus]["all"][BEFORE]["precision"] for corpus in CORPORA]))


def _before_wrong_kind(data: Any) -> float:
    """The most share of the type-blind linker's concepts that are of another kind than their
    entity, over the two corpora."""
    shares = []
    for corpus in CORPORA:
        row = data[corpus]["all"][BEFORE]
        shares.append(row["wrong_kind"] / (row["mentions"] * row["coverage"]))
    return float(max(shares))


def _gb(data: Any, key: str) -> float:
    """A peak resident size (MB) in GB."""
    return float(data[key]) / 1000


LINES: tuple[Line, ...] = (
    # -- abstention: the thresholds of the packaged vocabulary's calibration ---------------------
    _row(
        PAGE,
        "development files of NCBI-disease and BC5CDR (Disease",
        Fig(SUMMARY, ("thresholds", "Disease"), "2"),
        Fig(SUMMARY, ("thresholds", "Chemical"), "2"),
    ),
    _row(PAGE, "the other types the pooled", Fig(SUMMARY, ("thresholds", "*"), "2")),
    # -- a site's own vocabulary: a million concepts -------------------------------------------
    _row(
        PAGE,
        "(`benchmarks/vocabulary_scale.py`,",
        Fig(SCALE, ("concepts",), ","),
        Fig(SCALE, ("details", "names_per_concept"), "0"),
        Fig(SCALE, ("details", "file_mb"), "0"),
        None,  # 2 cores: the machine
    ),
    _row(
        PAGE,
        "peak to import,",
        Fig(SCALE, ("import_s",), "0"),
        Fig(SCALE, partial(_gb, key="import_peak_rss_mb"), "1"),
        Fig(SCALE, ("activate_s",), "0"),
        Fig(SCALE, partial(_gb, key="activate_peak_rss_mb"), "1"),
    ),
    _row(PAGE, "ms per look-up.", Fig(SCALE, ("ms_per_lookup",), "0")),
    # -- what it costs: the full-size index loaded (athena_scale.py's activate phase)
    _row(
        PAGE,
        "index takes 16 s and",
        Fig(ATHENA, ("activate_seconds",), "0"),
        Fig(ATHENA, partial(_gb, key="activate_peak_rss_mb"), "1"),
    ),
    # -- the re-rank's weight, chosen on dev (linking.py --rerank-grid) ------------------------
    _row(
        PAGE,
        "over both corpora between",
        Fig(RERANK, lambda d: min(d["dev_accuracy_at_1_pooled"].values()), "3"),
        Fig(RERANK, lambda d: max(d["dev_accuracy_at_1_pooled"].values()), "3"),
        Fig(RERANK, ("chosen_weight",), "0"),
    ),
    _row(
        PAGE,
        "alone would take 16:",
        Fig(RERANK, partial(_best_weight, corpus="NCBI-disease-original"), "0"),
        Fig(RERANK, partial(_best_at, corpus="NCBI-disease-original"), "3"),
        Fig(RERANK, _dev("NCBI-disease-original", "accuracy_at_1"), "3"),
        Fig(RERANK, ("chosen_weight",), "0"),
        Fig(RERANK, _dev("NCBI-disease-original", "mentions"), "0"),
        Fig(RERANK, partial(_best_weight, corpus="BC5CDR-original"), "0"),
    ),
    _row(
        PAGE,
        "acc@1 goes from",
        Fig(RERANK, ("chosen_weight",), "0"),
        None,  # acc@1
        *_test_pair("NCBI-disease-original", "accuracy_at_1"),
        None,  # acc@5
        *_test_pair("NCBI-disease-original", "accuracy_at_5"),
    ),
    _row(
        PAGE,
        "on BC5CDR (acc@5",
        *_test_pair("BC5CDR-original", "accuracy_at_1"),
        None,  # acc@5
        *_test_pair("BC5CDR-original", "accuracy_at_5"),
    ),
    # -- what it costs ---------------------------------------------------------------------------
    _row(
        PAGE,
        "MACCROBAT2020 and CHIA test sentences as the service does",
        Fig(SPEED, ("sentences",), ","),
    ),
    *[
        _row(
            PAGE,
            anchor,
            Fig(SPEED, ("vocabularies", name, "concepts"), ","),
            Fig(SPEED, ("vocabularies", name, "linking_step_cold_s"), "2"),
            Fig(SPEED, ("vocabularies", name, "linking_share_cold"), "%1"),
            Fig(SPEED, ("vocabularies", name, "linking_share_warm"), "%1"),
            Fig(SPEED, ("vocabularies", name, "ms_per_distinct_mention_cold"), "2"),
        )
        for anchor, name in (
            ("| packaged MeSH |", "packaged MeSH"),
            ("| a full-size Athena import", "omop-full"),
        )
    ],
    # -- accuracy ----------------------------------------------------------------------------------
    _row(PAGE, "| | NCBI-disease (", *_columns(TYPED, "mentions", ",")),
    _row(
        PAGE,
        "| accuracy@1 / @5, typed |",
        None,  # accuracy@1
        None,  # @5
        *_pairs((("accuracy_at_1", "3"), ("accuracy_at_5", "3")), TYPED),
    ),
    _row(
        PAGE,
        "| concepts given: coverage / precision, typed and abstaining |",
        *_pairs((("coverage", "%1"), ("precision", "3")), TYPED),
    ),
    _row(
        PAGE,
        "| precision at ",
        None,  # 70 % coverage: the point read
        *[
            Fig(SUMMARY, partial(_at_coverage, corpus=corpus, kind=kind, share=0.7), "3")
            for corpus, kind in COLUMNS
        ],
    ),
    _row(
        PAGE,
        "| before: coverage / precision |",
        *_pairs((("coverage", "%1"), ("precision", "3")), BEFORE),
    ),
    _row(
        PAGE,
        "| concepts of another kind than their entity, typed / before |",
        *[
            Fig(SUMMARY, (corpus, kind, system, "wrong_kind"), "0")
            for corpus, kind in COLUMNS
            for system in (TYPED, BEFORE)
        ],
    ),
    _row(
        PAGE,
        "So the concepts the service gives are right",
        Fig(SUMMARY, partial(_spread, key="precision", pick=min), "%0"),
        Fig(SUMMARY, partial(_spread, key="precision", pick=max), "%0"),
        Fig(SUMMARY, partial(_spread, key="coverage", pick=min), "%0"),
        Fig(SUMMARY, partial(_spread, key="coverage", pick=max), "%0"),
    ),
    _row(
        PAGE,
        "(the goal was ≥ 0.92 at ≥ 70 %); type-blind,",
        None,  # ≥ 0.92 and ≥ 70 %: the goal
        None,
        Fig(SUMMARY, partial(_before_wrong, pick=min), "%0"),
        Fig(SUMMARY, partial(_before_wrong, pick=max), "%0"),
        Fig(SUMMARY, _before_wrong_kind, "%0"),
    ),
    _row(
        PAGE,
        "on all mentions); the gain is in what is given",
        *[
            Fig(SUMMARY, (corpus, "all", system, "accuracy_at_1"), "3")
            for corpus in CORPORA
            for system in (COMMITTED, TYPED)
        ],
    ),
    # -- the clinical check set --------------------------------------------------------------------
    _row(
        PAGE,
        "clinical mentions of the five types as notes write them",
        Fig(SUMMARY, (CHECK, "mentions"), ","),
    ),
    _row(
        PAGE,
        "of them right (",
        Fig(SUMMARY, (CHECK, TYPED, "given"), ","),
        Fig(SUMMARY, (CHECK, TYPED, "given_right"), ","),
        Fig(SUMMARY, partial(_right_share, system=TYPED), "2"),
        Fig(SUMMARY, (CHECK, BLIND, "given"), ","),
    ),
    _row(
        PAGE,
        "of another kind — among them",
        Fig(SUMMARY, (CHECK, BLIND, "given_right"), ","),
        Fig(SUMMARY, partial(_right_share, system=BLIND), "2"),
        Fig(SUMMARY, (CHECK, BLIND, "wrong_kind"), ","),
    ),
    # -- clinical shorthand as synonyms
    _row(
        PAGE,
        "the check set above went from 56 to 60 right of 60 to 63 given",
        Fig(BEFORE_SHORTHAND, (CHECK, TYPED, "given_right"), ","),
        Fig(SUMMARY, (CHECK, TYPED, "given_right"), ","),
        Fig(BEFORE_SHORTHAND, (CHECK, TYPED, "given"), ","),
        Fig(SUMMARY, (CHECK, TYPED, "given"), ","),
    ),
    _row(
        PAGE,
        '"CP" no longer Cleft Palate), NCBI-disease did not move',
        Fig(BEFORE_SHORTHAND, ("BC5CDR-original", "all", TYPED, "coverage"), "%1"),
    ),
    _row(
        PAGE,
        "84.6 %. A short form made a synonym",
        Fig(SUMMARY, ("BC5CDR-original", "all", TYPED, "coverage"), "%1"),
        None,  # 3.7 points: measured with such synonyms, a run that left no committed file
    ),
    _row(
        PAGE,
        "ms per mention on these test sets",
        Fig(SUMMARY, partial(_ms_per_mention, pick=min), "1"),
        Fig(SUMMARY, partial(_ms_per_mention, pick=max), "1"),
    ),
)

#: The page's lines whose decimals are no figure of a committed result file, and why.
UNMEASURED: tuple[Unmeasured, ...] = (
    Unmeasured(
        PAGE,
        "(`mslm_core/linking/data/mesh-default.tsv.gz`, 1.4 MB)",
        "the packaged vocabulary's size and count of descriptors: its data file's, no result file",
    ),
    Unmeasured(
        PAGE,
        "files as synonyms (31,044 concepts,",
        "counts of the packaged vocabulary's data file, no result file",
    ),
    Unmeasured(PAGE, "172,057 names; an id MeSH", "a count of the packaged vocabulary's data file"),
    Unmeasured(
        PAGE,
        "Synthea27Nj_5.4.zip` gives 679",
        "counts of the Eunomia import (its data), no result file",
    ),
    Unmeasured(
        PAGE,
        "standard concepts (227 conditions",
        "counts of the Eunomia import (its data), no result file",
    ),
    Unmeasured(PAGE, "whenever its score reaches 0.5", "a setting (the old threshold)"),
    Unmeasured(
        PAGE,
        "| published, BioSyn / SapBERT, accuracy@1 |",
        "the papers' own figures (BioSyn, SapBERT)",
    ),
    Unmeasured(
        PAGE,
        "unless it names a concept already — 564 names in all",
        "a setting (80 %) and a count of the packaged vocabulary's data file",
    ),
)
