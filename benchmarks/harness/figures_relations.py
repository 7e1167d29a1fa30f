"""The measured figures of docs/relations.md, each read from the committed result file it comes
from (see :mod:`harness.figures`); the lines with no committed file are :data:`UNMEASURED`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from harness.figures import Fig, Line, Unmeasured, _row, history

PAGE = "docs/relations.md"
REL = "relations/summary.json"
#: the same command on the first start's model as trained on an AMD EPYC
REL_EPYC = "relations/epyc/summary.json"
#: before and after the note rules of notes.md's last round (commit 5236222), that model again
REL_WORDS = "relations/note-words/{}/summary.json"
_TIE_TYPES = ("Anatomy", "Problem", "Result", "Test")


def _tie_types_f1(data: dict[str, Any], pick: Callable[[list[float]], float]) -> float:
    """The lowest or highest strict F1 at which the model finds the types most ties join."""
    return pick([float(data["end_to_end"]["entities"][t]["f1"]) for t in _TIE_TYPES])


#: summary.json as the two runs before the one the page quotes held it: a17c841 (the model
#: m-20261205143253) and 7d6142d (m-20261205114120).
REL_BEFORE = (history("a17c841", REL), history("7d6142d", REL))
AB = "api_load-ab-cpu.json"

GOLD = ("gold_entities", "pairs")
E2E = ("end_to_end", "relations")
ENTS = ("end_to_end", "modifier_entities")
CHECK = ("check_set", "strict")
CV = ("cross_validated", "pairs")


def _within_sentence(data: Any) -> float:
    """The share of MACCROBAT's ties (both ends kept) whose ends are in one sentence."""
    counts = data["relations_in_corpus"]
    kept = counts["relations"] + counts["relation_crosses_sentence"]
    return float(counts["relations"] / kept)


def _train_seconds(data: Any) -> float:
    """The scorer's training CPU seconds, the mean over its seeds."""
    seconds = data["gold_entities"]["train_cpu_seconds_per_seed"]
    return float(sum(seconds) / len(seconds))


def _lowest_of_30(data: Any) -> float:
    """The lowest attachment accuracy of the pairs with 30 or more test ties, Result → Problem
    (the one below its baselines) aside."""
    pairs = data["gold_entities"]["pairs"]
    return float(
        min(
            p["accuracy"]
            for k, p in pairs.items()
            if p["test_instances"] >= 30 and k != "Result→Problem"
        )
    )


def _above_oracle(data: Any) -> float:
    """Result → Test's accuracy over the nearest head of the gold type."""
    pair = data["gold_entities"]["pairs"]["Result→Test"]
    return float(pair["accuracy"] - pair["nearest_of_gold_type"])


def _one_sentence(data: Any) -> float:
    """What one melanoma sentence's five Result → Problem ties weigh among the pair's test
    ties."""
    return float(5 / data["gold_entities"]["pairs"]["Result→Problem"]["test_instances"])


def _exact_f1(data: Any, pair: str) -> float:
    """A check-set pair's strict F1 from its counts (stored F1s are rounded to four decimals:
    Route → Drug's 17/21 is stored 0.8095, which Python writes 0.809)."""
    row = data["check_set"]["strict"][pair]
    right = round(row["recall"] * row["gold"])
    if right == 0:
        return 0.0
    found = round(right / row["precision"])
    return float(2 * right / (row["gold"] + found))


def _route_f1(data: Any) -> float:
    return _exact_f1(data, "Route→Drug")


def _seed_accuracy(data: Any, pair: str, seed: int) -> float:
    """A seed's attachment accuracy from its count of right heads (stored accuracies are
    rounded to four decimals: Result → Problem's 28/33 is stored 0.8485, which Python writes
    0.849)."""
    row = data["gold_entities"]["pairs"][pair]
    n = row["test_instances"]
    return float(round(row["accuracy_per_seed"][seed] * n) / n)


# -- "With gold entities": pair, its seeds' format ---------------------------------------------
_GOLD_ROWS = (
    ("Result → Test", "Result→Test", "3"),
    ("Anatomy → Problem", "Anatomy→Problem", "3"),
    ("Anatomy → Test", "Anatomy→Test", "3"),
    ("Dosage → Drug", "Dosage→Drug", "3"),
    ("Severity → Problem", "Severity→Problem", "0"),  # 1 1 1
    ("Anatomy → Procedure", "Anatomy→Procedure", "3"),
    ("Result → Problem", "Result→Problem", "3"),
    ("Route → Drug", "Route→Drug", "0"),  # 1 1 1
    ("Frequency → Drug", "Frequency→Drug", "1"),  # 0.5 0.5 0.5
)


def _gold_row(shown: str, pair: str, seed_fmt: str) -> Line:
    at = (*GOLD, pair)
    return _row(
        PAGE,
        f"| {shown} |",
        Fig(REL, (*at, "test_instances"), ","),
        Fig(REL, (*at, "accuracy"), "3"),
        *[Fig(REL, partial(_seed_accuracy, pair=pair, seed=k), seed_fmt) for k in range(3)],
        Fig(REL, (*at, "nearest_of_gold_type"), "3"),
        Fig(REL, (*at, "nearest_of_any_type"), "3"),
        after="| pair | test ties |",
    )


# -- "End to end" ------------------------------------------------------------------------------
_E2E_ROWS = (
    ("Result → Test", "Result→Test"),
    ("Anatomy → Problem", "Anatomy→Problem"),
    ("Anatomy → Test", "Anatomy→Test"),
    ("Dosage → Drug", "Dosage→Drug"),
    ("Severity → Problem", "Severity→Problem"),
    ("Anatomy → Procedure", "Anatomy→Procedure"),
    ("Result → Problem", "Result→Problem"),
    ("Route → Drug", "Route→Drug"),
    ("Duration → Problem", "Duration→Problem"),
    ("Duration → Drug", "Duration→Drug"),
    ("**all**", "all"),
)
_PRF = ("precision", "recall", "f1")


def _e2e_row(shown: str, pair: str) -> Line:
    return _row(
        PAGE,
        f"| {shown} |",
        Fig(REL, (*E2E, "scorer", pair, "gold"), ","),
        *[
            Fig(REL, (*E2E, system, pair, k), "3")
            for system in ("scorer", "nearest_head")
            for k in _PRF
        ],
        after="| pair | gold | scorer P / R / F1 |",
    )


def _entity_row(kind: str, *variants: str) -> Line:
    return _row(
        PAGE,
        f"| {kind} |",
        Fig(REL, (*ENTS, "model", kind, "gold"), ","),
        *[Fig(REL, (*ENTS, v, kind, k), "3") for v in variants for k in _PRF],
        after="| type | gold | model P / R / F1 |",
    )


LINES: tuple[Line, ...] = (
    # -- How the head is chosen
    _row(PAGE, "Each modifier's candidates are the mentions", Fig(REL, _within_sentence, "%1")),
    _row(
        PAGE,
        "corpora that annotate them (about",
        Fig(REL, _train_seconds, "0"),
        Fig(REL, ("gold_entities", "train_modifiers"), ","),
    ),
    # -- How well
    _row(
        PAGE,
        "averaged, above) trained on the",
        None,  # 140 training documents: the recipe's split
        Fig(REL, _train_seconds, "0"),
    ),
    *[_gold_row(*r) for r in _GOLD_ROWS],
    _row(
        PAGE,
        "Every pair with 30 or more test ties but one",
        None,  # 30 ties: the threshold
        Fig(REL, _lowest_of_30, "2"),
    ),
    _row(PAGE, "points above the oracle.", Fig(REL, _above_oracle, "%0")),
    _row(
        PAGE,
        "oracle on the type and only level with the nearest of any type: its",
        Fig(REL, (*GOLD, "Result→Problem", "test_instances"), ","),
        None,  # 25 sentences: counted from the corpus, in no result file
    ),
    _row(PAGE, "sentences (five from one melanoma sentence", Fig(REL, _one_sentence, "%0")),
    _row(
        PAGE,
        "dev the same scorer gets",
        Fig(REL, (*GOLD, "Result→Problem", "dev_accuracy"), "3"),
        None,  # 19 dev ties: in no result file
        None,  # seed 3
    ),
    _row(
        PAGE,
        "by a scorer trained without its document, seed 1) — Result → Problem gets",
        None,  # the seed
        Fig(REL, (*CV, "Result→Problem", "accuracy"), "3"),
        Fig(REL, (*CV, "Result→Problem", "instances"), ","),
    ),
    _row(
        PAGE,
        "ties against the oracle's",
        Fig(REL, (*CV, "Result→Problem", "nearest_of_gold_type"), "3"),
        None,  # the goal
    ),
    _row(
        PAGE,
        "0.954 (oracle 0.882). Tried on these folds",
        Fig(REL, (*CV, "Result→Test", "accuracy"), "3"),
        Fig(REL, (*CV, "Result→Test", "nearest_of_gold_type"), "3"),
    ),
    _row(PAGE, "int8), on the", Fig(REL, ("end_to_end", "sentences"), ",")),
    *[_e2e_row(*r) for r in _E2E_ROWS],
    _row(
        PAGE,
        "| Frequency → Drug |",
        Fig(REL, (*E2E, "scorer", "Frequency→Drug", "gold"), ","),
        Fig(REL, (*E2E, "scorer", "Frequency→Drug", "f1"), "0"),
        Fig(REL, (*E2E, "nearest_head", "Frequency→Drug", "f1"), "0"),
        after="| pair | gold | scorer P / R / F1 |",
    ),
    _entity_row("Route", "model", "with_patterns"),
    _entity_row("Frequency", "model", "with_patterns"),
    _entity_row("Duration", "model"),
    _entity_row("Severity", "model"),
    _row(PAGE, "The step's cost: the same", Fig(REL, ("end_to_end", "sentences"), ",")),
    _row(
        PAGE,
        "paired, medians of",
        None,  # 3 runs
        Fig(REL, ("end_to_end", "annotate_seconds"), "2"),
        Fig(REL, ("end_to_end", "annotate_seconds_without_relations"), "2"),
    ),
    _row(
        PAGE,
        "(the averaged scorer is three times",
        Fig(REL, ("end_to_end", "throughput_ratio"), "2"),
    ),
    _row(
        PAGE,
        "a measurement of two seconds: with medians of",
        None,  # 3 runs
        *[Fig(s, ("end_to_end", "throughput_ratio"), "2") for s in REL_BEFORE],
    ),
    _row(
        PAGE,
        "sentences in the styles of medication lists",
        Fig(REL, ("check_set", "sentences"), ","),
    ),
    _row(PAGE, "lab lines,", Fig(REL, ("check_set", "ties"), ",")),
    _row(
        PAGE,
        "end to end with the same model and its own scorer: pair F1",
        Fig(REL, (*CHECK, "all", "f1"), "3"),
        Fig(REL, (*CHECK, "all", "precision"), "3"),
    ),
    _row(
        PAGE,
        "when the spans overlap; Dosage → Drug",
        Fig(REL, (*CHECK, "all", "recall"), "3"),
        Fig(REL, ("check_set", "lenient", "all", "f1"), "3"),
        Fig(REL, (*CHECK, "Dosage→Drug", "f1"), "3"),
        Fig(REL, (*CHECK, "Frequency→Drug", "f1"), "3"),
    ),
    _row(
        PAGE,
        "); with gold entities",
        Fig(REL, _route_f1, "3"),
        Fig(REL, (*CHECK, "Result→Test", "f1"), "3"),
        Fig(REL, (*CHECK, "Duration→Drug", "f1"), "1"),
        Fig(REL, (*CHECK, "Duration→Drug", "gold"), ","),
        Fig(REL, ("check_set", "gold_entities_attachment"), "3"),
    ),
    # -- Throughput
    _row(
        PAGE,
        "MACCROBAT test sentences; ",
        # the same test sentences as the relations run's end-to-end set
        Fig(REL, ("end_to_end", "sentences"), ","),
        None,  # 2 cores
    ),
    _row(
        PAGE,
        "of the texts per second it answered before at",
        *[Fig(AB, ("head_over_base", c), "2") for c in ("1", "8", "32")],
        None,  # 1, 8, 32 clients
        None,
        None,
    ),
    _row(
        PAGE,
        "texts/s, medians),",
        *[
            Fig(AB, (side, c), "0")
            for side in ("head_api_sps", "base_api_sps")
            for c in ("1", "8", "32")
        ],
        Fig(AB, ("errors",), "0"),
    ),
    # -- the entities ties join, as the EPYC-trained first-start model finds them
    _row(
        PAGE,
        "join (Anatomy, Problem, Result, Test) are found at",
        *(Fig(REL_EPYC, partial(_tie_types_f1, pick=pick), "2") for pick in (min, max)),
    ),
    _row(
        PAGE,
        "end to end where this table's model scores",
        Fig(REL_EPYC, ("end_to_end", "relations", "scorer", "all", "f1"), "3"),
        Fig(REL, ("end_to_end", "relations", "scorer", "all", "f1"), "3"),
    ),
    _row(
        PAGE,
        "its ties score",
        *(
            Fig(REL_EPYC, ("check_set", "strict", "all", k), "3")
            for k in ("f1", "precision", "recall")
        ),
        Fig(REL_EPYC, ("check_set", "ties"), "0"),
    ),
    _row(
        PAGE,
        "score 0.874 → 0.888 strict and",
        *(
            Fig(REL_WORDS.format(when), ("check_set", kind, "all", "f1"), "3")
            for kind in ("strict", "lenient")
            for when in ("before", "after")
        ),
    ),
    _row(
        PAGE,
        "sentences 0.446 → 0.446 end to end",
        *(
            Fig(REL_WORDS.format(when), ("end_to_end", "relations", "scorer", "all", "f1"), "3")
            for when in ("before", "after")
        ),
    ),
)

_NO_FILE = "and no committed file holds it"

#: The page's lines whose decimals are no figure of a committed result file, and why.
UNMEASURED: tuple[Unmeasured, ...] = (
    Unmeasured(PAGE, "patients on metoprolol ≥ 50 mg", "an example query"),
    Unmeasured(PAGE, 'and tip say "dose of', "an example of the web page's tip"),
    Unmeasured(PAGE, '("WBC, Hb and Plt were 12.1', "an example sentence"),
    Unmeasured(
        PAGE,
        "MACCROBAT has 15 Duration → Drug ties",
        "counted from the corpus, no result file",
    ),
    Unmeasured(
        PAGE,
        "a procedure modifies that procedure in 11 of 24 cases",
        "counted from the corpus's training documents, no result file",
    ),
)
