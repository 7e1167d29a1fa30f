"""The measured figures of docs/reliability.md, each read from the committed result file it comes
from (see :mod:`harness.figures`).

The files: ``reliability.json`` (``benchmarks/reliability.py``: ``details.records``, one per
scenario of the table, found by its name, and by what was done where a name is shared),
``soak-cpu.json`` (the load and soak row), ``context_scaling.json`` ("What one request may
take") and ``vocabulary_scale.json`` ("Large vocabularies").

In a row of the table, every number of "what was measured" is a figure, read from the
record's ``measured`` (counts, seconds, sizes, and the statuses answered too: the test recorded
them), but for the numbers inside a name (the status of ``statuses: 422: 17``, the size of
``3 M sentences: …``) or a message. The numbers of "what was done" are what the test sends and
the settings it runs under, no figures, but for those its description quotes from the run before
the fix ("before: RSS 228 MB → 1.67 GB"): :func:`_before` reads each from the record's ``done``
text, their only record. The statuses and bounds of "result" are no figures; hostile uploads'
"≤ 33.7 MB" is (the highest peak growth of the row).

Not registered:

- the bounds table and "Behind a reverse proxy": settings and limits, no measured figure.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from harness.figures import NUMBER, Fig, Line, _row

PAGE = "docs/reliability.md"
REL = "reliability.json"
SOAK = "soak-cpu.json"
SCALING = "context_scaling.json"
VOCABULARY = "vocabulary_scale.json"


def _record(data: Any, scenario: str, done: str | None) -> Any:
    """The one record of a scenario (of a scenario and what was done, where a name is shared)."""
    found = [
        r
        for r in data["details"]["records"]
        if r["scenario"] == scenario and (done is None or r["done"] == done)
    ]
    if len(found) != 1:
        raise LookupError(f"{len(found)} records of {scenario!r} in {REL}, not one")
    return found[0]


def _measured(data: Any, scenario: str, done: str | None, keys: tuple[str | int, ...]) -> float:
    """A measured value; an index into a count written "k/n" reads its part."""
    value = _record(data, scenario, done)["measured"]
    for key in keys:
        if isinstance(value, str) and isinstance(key, int):
            value = value.split("/")[key]
        else:
            value = value[key]
    return float(value)


def _quoted(data: Any, scenario: str, done: str | None, after: str) -> float:
    """The number that follows ``after`` (found once) in the text of what was done."""
    text = _record(data, scenario, done)["done"]
    if text.count(after) != 1:
        raise LookupError(f"{after!r} is {text.count(after)} times in {scenario!r}, not once")
    found = NUMBER.match(text, text.index(after) + len(after))
    if found is None:
        raise LookupError(f"no number after {after!r} in {scenario!r}")
    first = found.group().split("/")[0]  # of numbers joined by slashes, the first
    return float(first.replace(",", "").replace("−", "-"))


@dataclass(frozen=True)
class _Got:
    """A value of the scenario's "what was measured": its keys there."""

    keys: tuple[str | int, ...]
    fmt: str


@dataclass(frozen=True)
class _Before:
    """A figure "what was done" quotes from the run before the fix: the number after ``after``."""

    after: str
    fmt: str


def _got(*keys: str | int, fmt: str = "0") -> _Got:
    return _Got(keys, fmt)


def _before(after: str, fmt: str = "0") -> _Before:
    return _Before(after, fmt)


def _probe(*at: str) -> list[_Got]:
    """A probe's answers while the attack ran (``healthz: requests: …; median_ms: …; …``)."""
    return [
        _got(*at, "requests"),
        _got(*at, "median_ms", fmt="1"),
        _got(*at, "max_ms", fmt="1"),
        _got(*at, "failed"),
    ]


def _table(scenario: str, *items: _Got | _Before | Fig | None, done: str | None = None) -> Line:
    """A row of the scenarios' table, named by its first cell (and its second, with ``done``)."""
    figures: list[Fig | None] = []
    for item in items:
        if isinstance(item, _Got):
            at = partial(_measured, scenario=scenario, done=done, keys=item.keys)
            figures.append(Fig(REL, at, item.fmt))
        elif isinstance(item, _Before):
            at = partial(_quoted, scenario=scenario, done=done, after=item.after)
            figures.append(Fig(REL, at, item.fmt))
        else:
            figures.append(item)
    anchor = f"| {scenario} |" if done is None else f"| {scenario} | {done} |"
    return _row(PAGE, anchor, *figures)


HOSTILE = "hostile uploads"


def _hostile_peak(data: Any) -> float:
    """The highest peak RSS growth over the hostile uploads (the row's result quotes it)."""
    measured = _record(data, HOSTILE, None)["measured"]
    return float(max(v["peak_rss_growth_mb"] for v in measured.values()))


def _slowest_kind(data: Any) -> float:
    return float(max(data["largest_seconds"].values()))


def _kinds(data: Any) -> float:
    """How many kinds of text the scaling benchmark ran."""
    return float(len(data["largest_seconds"]))


def _widest_ratio(data: Any) -> float:
    return float(max(data["per_char_ratio_largest_to_smallest"].values()))


LINES: tuple[Line, ...] = (
    _table(
        "attack 3: NUL in an id (PostgreSQL)",
        None,  # 3: the scenario's number
        None,  # 11: sent, or a setting
        None,  # 5: sent, or a setting
        _got("requests"),
        None,  # 422: a status (a name)
        _got("statuses", "422"),
        _got("next_request_on_the_connection_ok", 0),
        _got("next_request_on_the_connection_ok", 1),
        _got("tracebacks_in_log"),
        None,  # 422: a status
    ),
    _table(
        "attack 4: bodies before keys, a huge header",
        None,  # 4: the scenario's number
        None,  # 20: sent, or a setting
        None,  # 75: sent, or a setting
        _before("before: RSS "),  # 228
        _before("228 MB → ", "2"),  # 1.67
        None,  # 100: sent, or a setting
        None,  # 401: a status
        _before("401 after "),  # 12
        _before("healthz stalled "),  # 4
        None,  # 75: the size sent (a name)
        _got("keyless 75 MiB bodies", "requests"),
        None,  # 401: a status (a name)
        _got("keyless 75 MiB bodies", "statuses", "401"),
        _got("keyless 75 MiB bodies", "body_sent_per_request_mb", fmt="1"),
        _got("keyless 75 MiB bodies", "seconds", fmt="2"),
        _got("keyless 75 MiB bodies", "api_rss_growth_mb", fmt="1"),
        *_probe("keyless 75 MiB bodies", "healthz"),
        None,  # 100: the size sent (a name)
        _got("100 MB header", "status"),
        _got("100 MB header", "sent_before_refusal_mb", fmt="1"),
        _got("100 MB header", "seconds", fmt="2"),
        _got("100 MB header", "api_rss_growth_mb", fmt="1"),
        *_probe("100 MB header", "healthz"),
        None,  # 401: a status
        None,  # 16: a bound
        None,  # 431: a status
    ),
    _table(
        "attack 1: a model evicted under a request",
        None,  # 1: the scenario's number
        None,  # 16: sent, or a setting
        None,  # 18,800: sent, or a setting
        None,  # 2: sent, or a setting
        _before("healthz stalled "),  # 11
        _got("long_request_on_b", "status"),
        _got("long_request_on_b", "seconds", fmt="2"),
        *[_got("requests_on_c_a_c_b_c", k) for k in range(5)],
        *_probe("healthz"),
    ),
    _table(
        "attack 2: activate and delete one model at once",
        None,  # 2: the scenario's number
        None,  # 5: sent, or a setting
        None,  # 500: a status
        None,  # 204: a status
        None,  # 503: a status
        None,  # 7: another attack's number
        _got("rounds"),
        None,  # 404: a status (a name)
        None,  # 204: a status (a name)
        _got("outcomes", "activate 404, delete 204"),
        None,  # 200: a status (a name)
        None,  # 409: a status (a name)
        _got("outcomes", "activate 200, delete 409"),
        _got("served_model_in_store_after_each", 0),
        _got("served_model_in_store_after_each", 1),
        _got("deleted_model_still_answering"),
        None,  # 409: a status
        None,  # 404: a status
        None,  # 404: a status
    ),
    _table(
        "attack 8: Label Studio result types in the log",
        None,  # 8: the scenario's number
        None,  # 5,000,190: sent, or a setting
        _before("before: one ", ","),  # 5,000,189
        _got("status"),
        _got("longest_log_line_chars"),
    ),
    _table(
        "attack 9: validation and races",
        None,  # 9: the scenario's number
        None,  # -1: sent, or a setting
        None,  # 2: sent, or a setting
        None,  # 64: sent, or a setting
        None,  # 202: a status
        None,  # 25: sent, or a setting
        _before("both won "),  # 3
        None,  # 25: sent, or a setting
        _got("min_confidence_per_type", "NaN"),
        None,  # -5: the value sent (a name)
        _got("min_confidence_per_type", "-5"),
        _got("min_confidence_per_type", "Infinity"),
        None,  # -1: the value sent (a name)
        _got("seed", "-1"),
        None,  # 2**64: the value sent (a name)
        _got("seed", "18446744073709551616"),
        None,  # 404: a status (a name)
        None,  # 204: a status (a name)
        _got("job_vs_dataset_delete_25_rounds", "job 404, delete 204"),
        None,  # 202: a status (a name)
        None,  # 409: a status (a name)
        _got("job_vs_dataset_delete_25_rounds", "job 202, delete 409"),
        _got("jobs_without_dataset"),
        None,  # 422: a status
    ),
    _table(
        "attack 10: who did what",
        None,  # 10: the scenario's number
        _got("get_anothers_dataset"),
        _got("delete_anothers_dataset"),
        _got("anothers_datasets_listed"),
        None,  # 202: in a message
        None,  # 200: in a message
        None,  # 202: in a message
        _got("secrets_in_log"),
        None,  # 404: a status
    ),
    _table(
        "attack 6: the bad-key throttle",
        None,  # 6: the scenario's number
        None,  # 8: sent, or a setting
        _before("requests "),  # 2
        _got("valid_key_after_8_bad_median_s", fmt="3"),
        *[_got("bad_key_with_rotated_x_forwarded_for_s", k, fmt="2") for k in range(2)],
    ),
    _table(
        "attack 1: SIGTERM during a long request",
        None,  # 1: the scenario's number
        None,  # 16: sent, or a setting
        None,  # 94,000: sent, or a setting
        _got("exit_seconds", fmt="1"),
        _got("grace_seconds", fmt="1"),
        _got("long_request"),
        None,  # 503: a status
    ),
    _table(
        "round 3, item 1: trigger words",
        None,  # 3: the scenario's number
        None,  # 1: the scenario's number
        None,  # 12,000: sent, or a setting
        _before("no' (before: "),  # 66
        _before("healthz held "),  # 62
        _before(" SIGTERM "),  # 58
        None,  # 100,000: sent, or a setting
        _before("them (before: "),  # 155
        None,  # 12,000: the size sent (a name)
        _got("12,000 no", "status"),
        _got("12,000 no", "seconds", fmt="1"),
        None,  # 100,000: the size sent (a name)
        _got("100,000 characters", "status"),
        _got("100,000 characters", "seconds", fmt="2"),
        *_probe("healthz_during"),
        *_probe("short_annotate_during"),
        *[_got("context_us_per_char_1k_10k_100k", k, fmt="2") for k in range(3)],
    ),
    _table(
        "round 3, item 4: vocabulary races, NUL bytes",
        None,  # 3: the scenario's number
        None,  # 4: the scenario's number
        None,  # 6: sent, or a setting
        None,  # 500: a status
        _before("before: 500 in "),  # 4
        None,  # 500: a status
        None,  # 404: a status (a name)
        None,  # 204: a status (a name)
        _got("activate_vs_delete_6_rounds", "activate 404, delete 204"),
        _got("nul_in_a_file_name", "status"),
        _got("nul_in_the_name_line", "status"),
        _got("nul_in_the_name_line", "error", "line"),
        _got("tracebacks_in_log"),
        None,  # 404: a status
        None,  # 409: a status
        None,  # 422: a status
    ),
    _table(
        "round 3, item 5: what a killed worker leaves",
        None,  # 3: the scenario's number
        None,  # 5: the scenario's number
        None,  # kill -9: the signal sent
        _before("scratch, "),  # 173
        _got("scratch_left_by_kill_9"),
        _got("job_folder_left_mb", fmt="1"),
    ),
    _table(
        "round 3, item 6: slow headers",
        None,  # 3: the scenario's number
        None,  # 6: the scenario's number
        None,  # 1,100: sent, or a setting
        None,  # 500: a setting
        None,  # 2: sent, or a setting
        _got("slow_connections_opened"),
        _got("api_fds_during"),
        _got("answers_to_them", "closed"),
        None,  # 408: a status (a name)
        _got("answers_to_them", "408"),
        *_probe("healthz_while_held"),
        _got("new_client_after"),
        _got("api_fds_after"),
        None,  # 408: a status
    ),
    _table(
        "round 3, item 7: the scope before the body",
        None,  # 3: the scenario's number
        None,  # 7: the scenario's number
        None,  # 50: sent, or a setting
        None,  # 403: a status
        _got("annotate key, dataset upload", "status"),
        _got("annotate key, dataset upload", "sent_mb", fmt="1"),
        _got("train key, vocabulary import", "status"),
        _got("train key, vocabulary import", "sent_mb", fmt="1"),
        _got("annotate key, job", "status"),
        _got("annotate key, job", "sent_mb", fmt="1"),
        None,  # 403: a status
    ),
    _table(
        "round 3, item 8: quotas",
        None,  # 3: the scenario's number
        None,  # 8: the scenario's number
        None,  # 5: sent, or a setting
        None,  # 5: sent, or a setting
        None,  # 200 epochs: asked
        None,  # 4: sent, or a setting
        None,  # 3: sent, or a setting
        None,  # 1: sent, or a setting
        *[_got("uploads_of_5", k) for k in range(5)],
        _got("upload_retry_after_s"),
        *[_got("jobs_of_5", k) for k in range(5)],
        None,  # 3: in a message
        _got("job_retry_after_s"),
        None,  # 429: a status
    ),
    _table(
        "round 3, item 9: metadata",
        None,  # 3: the scenario's number
        None,  # 9: the scenario's number
        _got("metrics_no_key"),
        _got("metrics_bearer"),
        _got("docs_no_key"),
        _got("docs_basic"),
        _got("openapi_no_key"),
        _got("healthz_no_key"),
        None,  # 401: a status
    ),
    _table(
        "round 4, item 2: slow bodies",
        None,  # 4: the scenario's number
        None,  # 2: the scenario's number
        None,  # 130: sent, or a setting
        None,  # 100,000: sent, or a setting
        None,  # 0.5: sent, or a setting
        None,  # 500 such bodies: what the test sent before
        _before("reset for "),  # 40
        None,  # 100: sent, or a setting
        None,  # 2: sent, or a setting
        None,  # 64: sent, or a setting
        _got("slow_bodies_opened"),
        _got("answers_to_them", "closed"),
        None,  # 408: a status (a name)
        _got("answers_to_them", "408"),
        *_probe("healthz_while_held"),
        _got("annotate_after"),
        _got("seconds", fmt="1"),
        None,  # 408: a status
    ),
    _table(
        "round 4, item 1: serving is an admin act",
        None,  # 4: the scenario's number
        None,  # 1: the scenario's number
        _before("key about "),  # 20
        _got("setup_serve_true"),
        _got("setup_without_serve"),
        None,  # 403: a status
    ),
    _table(
        "round 4, item 3: a duplicate Content-Type",
        None,  # 4: the scenario's number
        None,  # 3: the scenario's number
        None,  # 63: sent, or a setting
        None,  # 4.5: sent, or a setting
        _before("healthz stalled ", "1"),  # 14.8
        _before("peak ", "2"),  # 1.26
        _got("mb", fmt="1"),
        None,  # 400: a status (a name)
        _got("statuses_of_3_at_once", "400"),
        _got("seconds", fmt="2"),
        _got("api_rss_growth_mb", fmt="1"),
        *_probe("healthz"),
        None,  # 400: a status
        None,  # 413: a status
    ),
    _table(
        "round 4, item 4: unreadable notes uploads",
        None,  # 4: the scenario's number
        None,  # 4: the scenario's number
        None,  # 5,000,000: sent, or a setting
        None,  # 9.5: sent, or a setting
        None,  # 3: sent, or a setting
        None,  # 422: a status
        _before("422 after "),  # 25
        _before("25 s, API "),  # 575
        _before("API 575 → ", ","),  # 2,085
        _got("mb", fmt="1"),
        _got("status"),
        _got("seconds", fmt="2"),
        None,  # 1,000: in a message
        _got("api_rss_growth_mb", fmt="1"),
        *_probe("healthz"),
        *[_got("next_3_with_a_quota_of_3_an_hour", k) for k in range(3)],
        None,  # 1,000: a bound
        None,  # 429: a status
    ),
    _table(
        "round 4, item 6: ranking and Label Studio predict",
        None,  # 4: the scenario's number
        None,  # 6: the scenario's number
        None,  # 10,000: sent, or a setting
        None,  # 10,000: sent, or a setting
        None,  # 10,000: sent, or a setting
        _before("event loop, ", "2"),  # 2.97
        _before("GB, /healthz stalled ", "1"),  # 6.7
        None,  # 4,900: sent, or a setting
        _before("tasks (before: "),  # 61
        _before("work, /healthz stalled ", "1"),  # 8.6
        None,  # 3,000: sent, or a setting
        _got("suggest_10000", "status"),
        _got("suggest_10000", "scored"),
        _got("suggest_10000", "seconds", fmt="1"),
        _got("predict_4900", "status"),
        _got("predict_4900", "seconds", fmt="2"),
        _got("predict_3000", "status"),
        _got("predict_3000", "results"),
        _got("predict_3000", "seconds", fmt="1"),
        _got("api_rss_growth_mb", fmt="1"),
        *_probe("healthz"),
        *_probe("another_keys_short_annotate"),
        None,  # 4,900 tasks: sent
        None,  # 50,000 values: a bound
        None,  # 413: a status
        None,  # 3,000 tasks: sent
    ),
    _table(
        "round 4, item 7: queued annotation work",
        None,  # 4: the scenario's number
        None,  # 7: the scenario's number
        None,  # 5: sent, or a setting
        None,  # 1: sent, or a setting
        None,  # 3: sent, or a setting
        _before("(before: "),  # 25
        None,  # 25: sent, or a setting
        _before("accepted, and "),  # 40
        None,  # 40: sent, or a setting
        None,  # 1,000: sent, or a setting
        None,  # 8: sent, or a setting
        *[_got("annotation_jobs_of_5", k) for k in range(5)],
        None,  # 3: in a message
        _got("retry_after_s"),
        None,  # 429: a status
    ),
    _table(
        "round 4, item 8: NUL and lone surrogates",
        None,  # 4: the scenario's number
        None,  # 8: the scenario's number
        _got("notes_with_a_nul_id_and_a_surrogate", "status"),
        _got("notes_with_a_nul_id_and_a_surrogate", "kept"),
        None,  # 1: in a message
        None,  # 2: in a message
        _got("label_studio_annotation_id_with_a_nul"),
        _got("annotate_bioc_with_a_surrogate", "status"),
        _got("annotate_pubtator_with_a_surrogate", "status"),
        _got("annotate_labelstudio_with_a_surrogate", "status"),
        _got("next_request_on_the_connection"),
        _got("tracebacks_in_log"),
        None,  # 422: a status
    ),
    _table(
        "round 4, item 14: assorted",
        None,  # 4: the scenario's number
        None,  # 14: the scenario's number
        None,  # 3: sent, or a setting
        _got("delete_while_a_job_waits"),
        _got("slash_with_evil_host", "status"),
        _got("server_paths_in_an_annotate_keys_manifest"),
        _got("refused_activate"),
        None,  # 409: a status
        None,  # 404: a status
    ),
    _table(
        "round 4, item 9: planning heartbeats",
        None,  # 4: the scenario's number
        None,  # 9: the scenario's number
        None,  # 3: sent, or a setting
        None,  # 1.5: sent, or a setting
        None,  # 30: sent, or a setting
        None,  # 0.5: sent, or a setting
        None,  # 5: sent, or a setting
        None,  # 1: sent, or a setting
        _got("reaped"),
        _got("cancel_while_planning_s", fmt="2"),
    ),
    _table(
        "round 4, item 10: database errors",
        None,  # 4: the scenario's number
        None,  # 10: the scenario's number
        None,  # 0: in the query sent
        _got("notes_in_log_or_job"),
    ),
    _table(
        "round 4, item 13: over-long warehouse notes",
        None,  # 4: the scenario's number
        None,  # 13: the scenario's number
        None,  # 2,000,000: sent, or a setting
        None,  # 1,000: sent, or a setting
        None,  # 40 rows of 5 MB: what the test sent before
        None,
        _before("worker to "),  # 579
        None,  # 2000000: in a message
        None,  # 1000: in a message
    ),
    _table(
        "round 4, item 12: tar members",
        None,  # 4: the scenario's number
        None,  # 12: the scenario's number
        None,  # 64: sent, or a setting
        None,  # 1: sent, or a setting
        None,  # 3 GiB: what the test sent before
        _before("read whole, ", "1"),  # 3.2
        None,  # 256 MiB: a bound
        _got("seconds", fmt="3"),
        None,  # 67,108: in a message
    ),
    _table(
        "faults: Redis restart",
        _got("redis_down_queued_s", fmt="1"),
        _got("queued_recovered_s", fmt="1"),
        _got("redis_down_running_s", fmt="1"),
        _got("running_job_attempts"),
        _got("probe_requests"),
        _got("probe_failures"),
        _got("models_listed"),
        _got("stray_staging_dirs"),
    ),
    _table(
        "faults: PostgreSQL restart",
        _got("postgres_down_s", fmt="1"),
        _got("attempts"),
        _got("probe_requests"),
        _got("probe_failures"),
        _got("models_listed"),
        _got("stray_staging_dirs"),
    ),
    _table(
        "faults: artifact disk full",
        None,  # 64: sent, or a setting
        _got("filled_mb"),
        _got("models_listed"),
        _got("stray_staging_dirs"),
        _got("probe_requests"),
        _got("probe_failures"),
    ),
    _table(
        "round 4, item 11: a manifest's id as a path",
        None,  # 4: the scenario's number
        None,  # 11: the scenario's number
        _got("written_outside"),
        _got("staging_left"),
    ),
    _table(
        "fuzzing: schemathesis",
        None,  # 15: sent, or a setting
        _got("operations"),
        _got("requests"),
        _got("server_errors"),
        _got("not_problem_details"),
        _got("undocumented_statuses"),
        _got("schemathesis_checks"),
        None,  # 200: a status (a name)
        _got("statuses", "200"),
        None,  # 401: a status (a name)
        _got("statuses", "401"),
        None,  # 404: a status (a name)
        _got("statuses", "404"),
        None,  # 422: a status (a name)
        _got("statuses", "422"),
        None,  # 201: a status (a name)
        _got("statuses", "201"),
    ),
    _table(
        "interop: a generated OpenAPI client",
        None,  # 200: a status
        None,  # 401: a status (a name)
        None,  # 404: a status (a name)
        None,  # 422: a status (a name)
    ),
    _table(
        "property: annotate offsets",
        _got("texts"),
        _got("entities"),
    ),
    _table(
        "hostile uploads",
        None,  # 100: sent, or a setting
        None,  # 100: the size sent (a name)
        _got("a 100 MB single line", "status"),
        _got("a 100 MB single line", "seconds", fmt="2"),
        _got("a 100 MB single line", "peak_rss_growth_mb", fmt="1"),
        None,  # 8: in a message
        None,  # 5: the size sent (a name)
        _got("5 million empty lines", "status"),
        _got("5 million empty lines", "seconds", fmt="2"),
        _got("5 million empty lines", "peak_rss_growth_mb", fmt="1"),
        _got("a binary file", "status"),
        _got("a binary file", "seconds", fmt="2"),
        _got("a binary file", "peak_rss_growth_mb", fmt="1"),
        None,  # 2: in a message
        _got("invalid UTF-8", "status"),
        _got("invalid UTF-8", "seconds", fmt="2"),
        _got("invalid UTF-8", "peak_rss_growth_mb", fmt="1"),
        None,  # 4: in a message
        _got("tags with control characters", "status"),
        _got("tags with control characters", "seconds", fmt="2"),
        _got("tags with control characters", "peak_rss_growth_mb", fmt="1"),
        _got("a file name with ../", "status"),
        _got("a file name with ../", "seconds", fmt="2"),
        _got("a file name with ../", "peak_rss_growth_mb", fmt="1"),
        None,  # 422: a status
        Fig(REL, _hostile_peak, "1"),  # ≤ 33.7 MB: the highest above
    ),
    _table(
        "security: logs",
        _got("log_lines"),
    ),
    _table(
        "security: bad keys and headers",
        None,  # 9: sent, or a setting
        *[_got("seconds_per_attempt", k, fmt="3") for k in range(9)],
        None,  # 5: a bound
    ),
    _table(
        "corruption",
        _got("activate_status"),
    ),
    _table(
        "security: bandit",
        _got("findings"),
        _got("kinds"),
        _got("high_severity"),
    ),
    _table(
        "security: pip-audit",
        _got("packages"),
        _got("audited"),
        done="pip-audit -r docker/requirements-api.txt",
    ),
    _table(
        "security: pip-audit",
        _got("packages"),
        _got("audited"),
        done="pip-audit -r docker/requirements-worker-gpu.txt",
    ),
    _table(
        "security: pip-audit",
        _got("packages"),
        _got("audited"),
        done="pip-audit -r docker/requirements-worker-cpu.txt",
    ),
    _table(
        "security: keys and scopes",
        _got("protected_operations"),
        None,  # 401: a status
        None,  # 401: a status
        None,  # 403: a status
    ),
    _table(
        "faults: worker kill -9",
        None,  # kill -9: the signal (a name)
        None,  # 7: sent, or a setting
        None,  # 120: sent, or a setting
        _got("killed_after_epochs"),
        _got("attempts"),
        _got("epochs_in_history"),
    ),
    # -- the load and soak row
    _row(
        PAGE,
        "| load and soak |",
        None,  # 32 clients: the setting
        None,  # 10 min: the setting
        Fig(SOAK, ("requests",), "0"),
        Fig(SOAK, ("errors",), "0"),
        Fig(SOAK, ("texts_per_s",), "1"),
        Fig(SOAK, ("p50_ms",), "1"),
        Fig(SOAK, ("p95_ms",), "1"),
        Fig(SOAK, ("p99_ms",), "1"),
        Fig(SOAK, ("api_rss_mb", "start"), "1"),
        Fig(SOAK, ("api_rss_mb", "end"), "1"),
    ),
    # -- What one request may take
    _row(
        PAGE,
        "**What one request may take.**",
        None,  # 2 cores
        Fig(SCALING, _slowest_kind, "3"),
        None,  # 100,000 characters: the size run
        Fig(SCALING, _kinds, "0"),
        None,  # from 1,000 to 100,000 characters: the sizes run
        None,
        Fig(SCALING, _widest_ratio, "2"),
        None,  # 16 windows a step: a setting
        None,  # round 3, item 1
        None,
        None,  # 50,000 values, 32 levels, 4 MiB: bounds
        None,
        None,
    ),
    # -- Large vocabularies
    _row(
        PAGE,
        "**Large vocabularies.**",
        None,  # 1,000,000 concepts with 3 names each: the sizes run
        None,
        Fig(VOCABULARY, ("details", "file_mb"), "1"),
        Fig(VOCABULARY, ("import_s",), "0"),
        Fig(VOCABULARY, lambda d: d["import_peak_rss_mb"] / 1000, "1"),
        Fig(VOCABULARY, ("activate_s",), "0"),
        Fig(VOCABULARY, lambda d: d["activate_peak_rss_mb"] / 1000, "1"),
        Fig(VOCABULARY, ("ms_per_lookup",), "0"),
        None,  # 2,000,000 concepts, 1,000 names, 1,000 characters: the limits
        None,
        None,
    ),
)

#: The rows whose "before" growths are written with their sign (+390 MB): each for
#: The rows whose figures before the fix are signed (the formats "+0", "+1" and "+2").
PENDING: tuple[Line, ...] = (
    _table(
        "attack 5: heavy valid texts",
        None,  # 5: the scenario's number
        None,  # 100,000: sent, or a setting
        _before("' (before: "),  # 29
        _before("29 s, ", "+0"),  # +390
        None,  # 0.2: sent, or a setting
        _before("all blocked "),  # 73
        None,  # 16: sent, or a setting
        None,  # 1: sent, or a setting
        _got("one", "status"),
        _got("one", "entities"),
        _got("one", "seconds", fmt="2"),
        _got("one", "api_rss_growth_mb", fmt="1"),
        _got("one", "api_rss_kept_mb", fmt="1"),
        *[_got("three at once", "statuses", k) for k in range(3)],
        _got("three at once", "seconds", fmt="2"),
        *_probe("three at once", "short_requests"),
        _got("three at once", "api_rss_kept_mb", fmt="1"),
        _got("client gone", "abandoned_counted", fmt="1"),
        _got("client gone", "next_short_request_s", fmt="2"),
    ),
    _table(
        "attack 7: uploads",
        None,  # 7: the scenario's number
        None,  # 39: sent, or a setting
        None,  # 3: sent, or a setting
        _before("sentences (before: ", "+2"),  # +1.55
        None,  # 50: sent, or a setting
        None,  # 400: a status
        None,  # 3: the size sent (a name)
        _got("3 M sentences", "status"),
        _got("3 M sentences", "mb", fmt="1"),
        _got("3 M sentences", "sentences"),
        _got("3 M sentences", "seconds", fmt="1"),
        _got("3 M sentences", "api_rss_growth_mb", fmt="1"),
        _got("chunked over the limit", "status"),
        _got("chunked over the limit", "sent_mb", fmt="1"),
        None,  # kill -9: the signal sent (a name)
        _got("kill -9 mid-upload", "left_by_kill_9"),
        _got("kill -9 mid-upload", "kept_at_restart_while_younger_than_1h"),
        _got("kill -9 mid-upload", "swept_at_restart_once_older"),
        _got("kill -9 mid-upload", "readyz_after_restart"),
        None,  # 413: a status
        None,  # 1: a bound
        None,  # 10: a bound
    ),
    _table(
        "round 3, item 2: JSON amplification",
        None,  # 3: the scenario's number
        None,  # 2: the scenario's number
        None,  # 70: sent, or a setting
        None,  # 4.5: sent, or a setting
        _before("before: API "),  # 437
        _before("API 437 → ", ","),  # 4,299
        _before("healthz stalled ", "1"),  # 16.7
        None,  # 10.5: sent, or a setting
        _before("texts (before: ", "+0"),  # +918
        None,  # 100,000: sent, or a setting
        None,  # 4.5: the size sent (a name)
        _got("4.5 M thresholds", "mb", fmt="1"),
        None,  # 413: a status (a name)
        _got("4.5 M thresholds", "statuses_of_5_at_once", "413"),
        _got("4.5 M thresholds", "seconds", fmt="2"),
        None,  # 10.5: the size sent (a name)
        _got("10.5 M tiny texts", "mb", fmt="1"),
        None,  # 413: a status (a name)
        _got("10.5 M tiny texts", "statuses_of_5_at_once", "413"),
        _got("10.5 M tiny texts", "seconds", fmt="2"),
        None,  # 100,000: the size sent (a name)
        _got("nesting 100,000 deep", "mb", fmt="1"),
        None,  # 413: a status (a name)
        _got("nesting 100,000 deep", "statuses_of_5_at_once", "413"),
        _got("nesting 100,000 deep", "seconds", fmt="2"),
        _got("api_rss_growth_mb", fmt="1"),
        *_probe("healthz"),
        None,  # 413: a status
    ),
    _table(
        "round 3, item 3: vocabulary imports",
        None,  # 3: the scenario's number
        None,  # 3: the scenario's number
        None,  # 30,000: sent, or a setting
        _before("id (before: ", "1"),  # 28.8
        _before("to import, ", "1"),  # 27.6
        None,  # 7: sent, or a setting
        _before("7 MB (before: ", "+1"),  # +1.8
        None,  # 30,000: sent, or a setting
        None,  # 1: sent, or a setting
        None,  # 30,000: the size sent (a name)
        _got("30,000 lines of one id", "status"),
        _got("30,000 lines of one id", "seconds", fmt="2"),
        _got("30,000 lines of one id", "first_error", "line"),
        None,  # 1000: in a message
        None,  # 7: the size sent (a name)
        _got("a 7 MB name", "status"),
        _got("a 7 MB name", "seconds", fmt="2"),
        _got("a 7 MB name", "api_rss_growth_mb", fmt="1"),
        _got("a 7 MB name", "first_error", "line"),
        None,  # 1000: in a message
        None,  # 7000000: in a message
        None,  # 30,000: the size sent (a name)
        _got("30,000 distinct concepts", "status"),
        _got("30,000 distinct concepts", "seconds", fmt="1"),
    ),
    _table(
        "round 4, item 5: BioC offsets",
        None,  # 4: the scenario's number
        None,  # 5: the scenario's number
        None,  # 2: sent, or a setting
        _before("(before: "),  # 954
        _before("MB on disk, ", "+0"),  # +570
        _got("bytes"),
        _got("status"),
        _got("notes_kept"),
        _got("problems"),
        None,  # 100,000: in a message
        _got("seconds", fmt="2"),
        _got("disk_growth_mb", fmt="1"),
        _got("api_rss_growth_mb", fmt="1"),
    ),
)


LINES += PENDING  # the rows whose figures before the fix are signed ("+0", "+1", "+2")
