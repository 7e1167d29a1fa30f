"""The measured figures of docs/bulk.md, docs/active-learning.md and docs/deployment.md, each read
from the committed result file it comes from (see :mod:`harness.figures`).

The numbers of docs/labelstudio.md, install.md, api.md, spacy.md, models.md, cli.md,
settings.md and the other lines of these pages are no figure of a committed result file: each
such line is :data:`UNMEASURED`, with why.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from harness.figures import Fig, Line, Unmeasured, _row, history

# -- docs/bulk.md ------------------------------------------------------------------------------
BULK_PAGE = "docs/bulk.md"
BULK = "bulk/bulk.json"
#: bulk.json as earlier commits held it: the run before this one (653fb12: the clinical model,
#: int8's two threads a run) and the BC5CDR-only model's (271ba06).
BULK_BEFORE = history("653fb12", BULK)
BULK_BC5CDR = history("271ba06", BULK)


def _workers(key: str, fmt: str) -> list[Fig]:
    """A figure of the 1- and the 2-worker runs."""
    return [Fig(BULK, (key, n), fmt) for n in ("1", "2")]


def _rows_per_note(data: Any) -> float:
    """``NOTE_NLP`` rows a note: the clean run's rows over the job's notes."""
    return float(data["kill_test"]["rows_expected"] / data["job_notes"])


# -- docs/active-learning.md -------------------------------------------------------------------
ACTIVE_PAGE = "docs/active-learning.md"
INFERENCE = "inference-cpu.json"


def _seconds_for_1000(data: Any) -> float:
    """What 1,000 sentences take at the int8 engine's rate."""
    return float(1000 / data["int8_sps"])


# -- docs/deployment.md ------------------------------------------------------------------------
DEPLOY_PAGE = "docs/deployment.md"
# The table quotes the cold run committed in 624bf06 (762 s); 03d8f41 replaced the file with a
# 607 s run whose base images were already built, so the page differs from it.
SMOKE = "deploy/compose-smoke-cold.json"  # the cold run the page quotes (commit 624bf06)
WARM = "deploy/compose-smoke-warm.json"


def _step(data: Any, step: str, key: str = "seconds") -> float:
    """A value of the compose smoke's step of that name."""
    return float(next(s for s in data["steps"] if s["step"] == step)[key])


def _steps(data: Any, steps: tuple[str, ...]) -> float:
    """The seconds of several steps together."""
    return float(sum(_step(data, s) for s in steps))


def _archive_gb(data: Any) -> float:
    """The images' archive in GB (``archive_mb`` / 1000, as the page's MB are ``archive_kb`` /
    1000)."""
    return _step(data, "air-gapped install: save, remove, load the images", "archive_mb") / 1000


def _backup_mb(data: Any) -> float:
    return _step(data, "backup, down -v, restore into fresh volumes", "archive_kb") / 1000


def _smoke_step(step: str, key: str = "seconds") -> Fig:
    return Fig(SMOKE, partial(_step, step=step, key=key), "0")


_KILLED = "a worker killed mid-job: its job runs again, never stuck running"
_TRAIN = ("upload a corpus", "fine-tune on the CPU worker", "activate, annotate, evaluate")
_AFTER = "| step | seconds | found |"

LINES: tuple[Line, ...] = (
    # -- docs/bulk.md, "Measured"
    _row(
        BULK_PAGE,
        "| the engine alone, in 1 / 2 processes at once (notes/s) |",
        None,  # 1 / 2 processes
        None,
        *_workers("offline_processes_notes_per_s", "0"),
        Fig(BULK, ("offline_scaling_1_to_2",), "2"),
    ),
    _row(
        BULK_PAGE,
        "| through the whole job path: read, annotate, write, commit (notes/s) |",
        *_workers("job_notes_per_s", "0"),
        Fig(BULK, ("scaling_1_to_2",), "2"),
    ),
    _row(
        BULK_PAGE,
        "| per worker, against the engine alone (goal",
        None,  # the goal, 0.90
        *_workers("job_vs_offline_per_worker", "2"),
    ),
    _row(
        BULK_PAGE,
        "| per-chunk overhead beyond the engine (median,",
        Fig(BULK, ("chunk_notes",), ","),
        *_workers("chunk_overhead_ms_median", "0"),
    ),
    _row(
        BULK_PAGE,
        "| peak RSS per worker |",
        Fig(BULK, ("worker_peak_rss_mb", "1", 0), "0"),
        Fig(BULK, ("worker_peak_rss_mb", "2", 0), "0"),
        Fig(BULK, ("worker_peak_rss_mb", "2", 1), "0"),
    ),
    _row(
        BULK_PAGE,
        "of the engine's own rate (",
        Fig(BULK, ("job_vs_offline_per_worker", "1"), "%0"),
        Fig(BULK, ("ms_per_note_per_core",), "1"),
    ),
    _row(
        BULK_PAGE,
        "SIGKILLed after",
        Fig(BULK, ("kill_test", "killed_after_committed_notes"), ","),
        Fig(BULK, ("job_notes",), ","),
    ),
    _row(
        BULK_PAGE,
        "holds exactly the",
        Fig(BULK, ("kill_test", "rows_expected"), ","),
        Fig(BULK, ("kill_test", "duplicated_rows"), "0"),
        Fig(BULK, ("kill_test", "missing_rows"), "0"),
    ),
    _row(
        BULK_PAGE,
        "single-threaded engine processes ×",
        Fig(BULK, ("offline_scaling_1_to_2",), "2"),
        Fig(BULK_BEFORE, ("offline_scaling_1_to_2",), "2"),
        None,  # ×1.40: a run of its own whose file was never committed
    ),
    _row(
        BULK_PAGE,
        "overhead is 76 ms and the goal is met",
        Fig(BULK, ("chunk_overhead_ms_median", "1"), "0"),
    ),
    _row(
        BULK_PAGE,
        "model writes 10.3 rows a note against",
        Fig(BULK, _rows_per_note, "1"),
        Fig(BULK_BC5CDR, _rows_per_note, "1"),
    ),
    _row(
        BULK_PAGE,
        "gave one worker 133 notes/s, 0.86 of its engine",
        None,  # issue 54
        Fig(BULK_BEFORE, ("job_notes_per_s", "1"), "0"),
        Fig(BULK_BEFORE, ("job_vs_offline_per_worker", "1"), "2"),
    ),
    _row(
        BULK_PAGE,
        "below the goal — with 152 ms a chunk",
        Fig(BULK_BEFORE, ("chunk_overhead_ms_median", "1"), "0"),
    ),
    _row(
        BULK_PAGE,
        "before reached 0.92 of its engine at 242 notes/s",
        Fig(BULK_BC5CDR, ("job_vs_offline_per_worker", "1"), "2"),
        Fig(BULK_BC5CDR, ("job_notes_per_s", "1"), "0"),
    ),
    # -- docs/active-learning.md, "Suggest: what to label next"
    _row(
        ACTIVE_PAGE,
        "annotating it costs — one prediction pass, about",
        Fig(INFERENCE, ("int8_sps",), "0"),
        None,  # 2 CPU cores
    ),
    _row(
        ACTIVE_PAGE,
        "PubMed-sized sentences take about",
        Fig(INFERENCE, _seconds_for_1000, "0"),
        None,  # 1,000 notes of 25 sentences: an example
        None,
    ),
    # -- docs/deployment.md, "How this is tested"
    _row(DEPLOY_PAGE, "cached, with the annotator:", Fig(WARM, ("seconds",), "0")),
    _row(DEPLOY_PAGE, "from empty image storage,", Fig(SMOKE, ("seconds",), "0")),
    _row(
        DEPLOY_PAGE,
        "| base images (debootstrap; Redis, PostgreSQL from Debian) |",
        _smoke_step("base images"),
        Fig(SMOKE, ("image_mb", "localhost/mslm-redis:bookworm"), ","),
        Fig(SMOKE, ("image_mb", "localhost/mslm-postgres:bookworm"), ","),
        after=_AFTER,
    ),
    _row(
        DEPLOY_PAGE,
        "| build the API image / the CPU worker image |",
        _smoke_step("build the API image"),
        _smoke_step("build the CPU worker image"),
        Fig(SMOKE, ("image_mb", "mslm-api:0.1.0"), ","),
        Fig(SMOKE, ("image_mb", "mslm-worker-cpu:0.1.0"), ","),
        after=_AFTER,
    ),
    _row(
        DEPLOY_PAGE,
        "| first start (`up -d` to a healthy API",
        _smoke_step("the first start: up -d"),
        after=_AFTER,
    ),
    _row(
        DEPLOY_PAGE,
        "| upload, fine-tune (",
        None,  # 3 epochs: the smoke's setting
        Fig(SMOKE, partial(_steps, steps=_TRAIN), "0"),
        after=_AFTER,
    ),
    _row(
        DEPLOY_PAGE,
        "| `down` + `up` |",
        _smoke_step("down + up: keys, datasets, jobs and the served model survive"),
        after=_AFTER,
    ),
    _row(
        DEPLOY_PAGE,
        "| worker killed (SIGKILL) mid-job |",
        _smoke_step(_KILLED),
        _smoke_step(_KILLED, "attempts"),
        _smoke_step(_KILLED, "seconds_to_recover"),
        after=_AFTER,
    ),
    _row(
        DEPLOY_PAGE,
        "| `--scale api=",
        None,  # api=2, worker-cpu=2: the scale asked for
        None,
        _smoke_step("scale out: api=2, worker-cpu=2"),
        after=_AFTER,
    ),
    _row(
        DEPLOY_PAGE,
        "| non-root |",
        _smoke_step("every container runs as non-root"),
        None,  # uid 10001
        after=_AFTER,
    ),
    _row(
        DEPLOY_PAGE,
        "| images saved, removed, loaded |",
        _smoke_step("air-gapped install: save, remove, load the images"),
        Fig(SMOKE, _archive_gb, "1"),
        after=_AFTER,
    ),
    _row(
        DEPLOY_PAGE,
        "| backup, `down -v`, restore |",
        _smoke_step("backup, down -v, restore into fresh volumes"),
        Fig(SMOKE, _backup_mb, "0"),
        after=_AFTER,
    ),
)

#: The pages' lines whose decimals are no figure of a committed result file, and why.
UNMEASURED: tuple[Unmeasured, ...] = (
    # -- docs/bulk.md
    Unmeasured(BULK_PAGE, '"confidence": 1.0}`); a guess', "an API example's value"),
    Unmeasured(BULK_PAGE, "(`type=Problem;confidence=0.9312;negated=true", "a format example"),
    Unmeasured(BULK_PAGE, "| `term_modifiers` | `type=Problem;", "a format example"),
    Unmeasured(BULK_PAGE, 'above 0.04" with the rest of the CDM', "an example query"),
    Unmeasured(
        BULK_PAGE, "| `operator_concept_id` |", "OMOP concept ids and an example value (< 0.01)"
    ),
    # -- docs/active-learning.md
    Unmeasured(ACTIVE_PAGE, '`{"limit": 10, "strategy": "least_confidence"', "an API example"),
    # -- docs/deployment.md
    Unmeasured(DEPLOY_PAGE, "Python 3.11 base (`MSLM_PYTHON_IMAGE`)", "a version"),
    Unmeasured(DEPLOY_PAGE, "localhost/python:3.11-bookworm", "a version"),
    # -- docs/labelstudio.md
    Unmeasured("docs/labelstudio.md", '"diversity": 0.5}` —', "an API example"),
    Unmeasured("docs/labelstudio.md", "`diversity` 0.5 by default", "a setting (its default)"),
    Unmeasured("docs/labelstudio.md", "`1 − (priority + 0.5)`", "the score's formula"),
    Unmeasured(
        "docs/labelstudio.md", "`priority = 0.5 × uncertainty", "the formula, a version (1.23)"
    ),
    Unmeasured("docs/labelstudio.md", "scores `0.5 × (1 − uncertainty)`", "the score's formula"),
    Unmeasured(
        "docs/labelstudio.md", "*Start Training*; Label Studio 1.23", "a version (Label Studio)"
    ),
    Unmeasured(
        "docs/labelstudio.md",
        "some 3,800 tasks of",
        "worked out from the limit of 50,000 JSON values a body",
    ),
    # -- docs/api.md
    Unmeasured("docs/api.md", "attempt waits 0.25 s × 2ⁿ", "a setting (retry backoff)"),
    Unmeasured(
        "docs/api.md",
        "within ±25 % of the truth after the first 10 %",
        "the bounds tests/test_pace.py holds the estimate to",
    ),
    # -- docs/cli.md, docs/install.md, docs/models.md, docs/settings.md, docs/spacy.md
    Unmeasured(
        "docs/cli.md", "the honest-mslm study's choice); every other", "settings (ELM 0.25, 1.0)"
    ),
    Unmeasured("docs/install.md", '"onnxruntime-gpu>=1.20,<2"', "a version range"),
    Unmeasured(
        "docs/models.md", "pipeline.options(min_confidence=0.5)", "a code example's setting"
    ),
    Unmeasured("docs/settings.md", "| `MSLM_LINK_THRESHOLD` | 0.5 |", "a setting's default"),
    Unmeasured("docs/settings.md", "| `MSLM_REFUSE_OTHER_LANGUAGES` |", "a setting (0.5)"),
    Unmeasured("docs/spacy.md", "medspaCy 1.3.1 asks for spaCy below 3.8", "versions"),
    Unmeasured("docs/spacy.md", "on 3.11 its pin would take numpy back to 1.x", "versions"),
)
