"""The measured figures of docs/linking.md, each read from the committed result file it comes
from (see :mod:`harness.figures`).

The files: ``linking/summary.json`` (``benchmarks/linking.py``: gold test mentions of
NCBI-disease and BC5CDR, per corpus and type, typed and abstaining against the type-blind linker
of before; the clinical check set; the calibration's thresholds), ``linking/speed.json``
(``benchmarks/linking_speed.py``: the linking step on the clinical model's answers, the packaged
MeSH and a full-size Athena import) and ``vocabulary_scale.json`` (a site vocabulary of a
million concepts imported, activated and looked up).

Not registered: the packaged vocabulary's own counts (1.4 MB, 30,764 descriptors, 31,044
concepts and 172,057 names before the 564 shorthand synonyms) and the Eunomia import's counts
(679 concepts: 227, 197, 235, 20) are counts of data files, not of a result file
(``summary.json``'s 172,621 names are the 172,057 and the 564); the index's first build (about
10 s) is in no result file; "loading the full-size index takes 16 s and 1.7 GB at peak" is
``linking/athena_scale.json``'s activation (15.6 s) beside its index build's peak (1,680 MB, the
activation's being 1,345 MB), or ``speed.json``'s load (16.1 s): which is meant is not sure;
"type-blind, 15–20 % of them were wrong, and up to 4 % of another kind" matches no reading of
``summary.json`` for sure (the three columns give 14–20 %, the corpora 15–20 %; another kind is
up to 6.6 % of NCBI-disease's mentions); the shorthand's before-and-after (56 to 60 right of 60
to 63 given, BC5CDR's coverage 84.4 to 84.6 %, 3.7 points of accuracy@1 lost to a short form
made a synonym of a second concept) quotes runs whose files are not committed (the 56, 60 and
84.4 are an earlier ``summary.json``'s, 9ac9838).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from harness.figures import Fig, Line, _row

PAGE = "docs/linking.md"
SUMMARY = "linking/summary.json"
SPEED = "linking/speed.json"
SCALE = "vocabulary_scale.json"

TYPED = "typed, abstaining"
BEFORE = "type-blind, score 0.5 (before)"
COMMITTED = "before, committed"  # the linker before the type map and the entry terms
CHECK = "clinical_check_set"
BLIND = "type-blind, score 0.5"  # the check set's type-blind linker

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
    # -- the re-rank, measured before the type map and the entry terms -------------------------
    _row(
        PAGE,
        "measured before the type map and the entry terms (NCBI-disease acc@",
        None,  # acc@1
        Fig(SUMMARY, ("NCBI-disease-original", "all", COMMITTED, "accuracy_at_1"), "3"),
        Fig(SUMMARY, ("NCBI-disease-original", "all", COMMITTED, "re-ranked"), "3"),
    ),
    _row(
        PAGE,
        "chose the weight",
        Fig(SUMMARY, ("BC5CDR-original", "all", COMMITTED, "accuracy_at_1"), "3"),
        Fig(SUMMARY, ("BC5CDR-original", "all", COMMITTED, "re-ranked"), "3"),
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
    _row(
        PAGE,
        "ms per mention on these test sets",
        Fig(SUMMARY, partial(_ms_per_mention, pick=min), "1"),
        Fig(SUMMARY, partial(_ms_per_mention, pick=max), "1"),
    ),
)
