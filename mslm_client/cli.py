"""``mslm bulk``: annotation jobs on a running service, over its REST API (registered with the
``mslm`` command through the ``mslm.commands`` entry points).

    mslm bulk submit --file notes.jsonl --wait --download annotations.jsonl
    mslm bulk submit --warehouse omop --query "SELECT note_id, note_text FROM cdm.note" \\
        --omop-table cdm.note_nlp --wait
    mslm bulk status ID | list | cancel ID | errors ID | download ID -o FILE

The service's address and key: ``--url`` / ``--api-key``, else ``MSLM_URL`` and
``MSLM_API_KEY``.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._formats import NOTE_FORMATS, OUTPUT_FORMATS


def bulk(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("bulk", help="annotation jobs on a running service (bulk, OMOP NOTE_NLP)")
    p.add_argument("--url", help="the service (default: MSLM_URL, else http://127.0.0.1:8000)")
    p.add_argument("--api-key", help="an API key (default: MSLM_API_KEY)")
    commands = p.add_subparsers(dest="bulk_command", required=True)

    s = commands.add_parser("submit", help="upload notes (or name a query) and queue a job")
    source = s.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--file",
        type=Path,
        help="notes: JSONL, text (one per line), CSV or TSV with a header, BioC, PubTator, Parquet",
    )
    source.add_argument("--warehouse", help="a name in the service's MSLM_WAREHOUSES")
    s.add_argument("--notes-format", choices=NOTE_FORMATS)
    s.add_argument(
        "--notes-encoding", help="the notes file's encoding (default: told from its bytes)"
    )
    s.add_argument("--query", help="with --warehouse: SELECT note_id, note_text FROM …")
    s.add_argument(
        "--output-format",
        default=OUTPUT_FORMATS[0],
        choices=OUTPUT_FORMATS,
        help="a file of annotations to download (default: jsonl)",
    )
    s.add_argument("--omop-table", help="write OMOP NOTE_NLP rows to this schema.table instead")
    s.add_argument("--omop-warehouse", help="the warehouse of --omop-table (default: --warehouse)")
    s.add_argument(
        "--staging",
        metavar="SCHEMA",
        help="with --omop-table: also stage the facts as DRUG_EXPOSURE and MEASUREMENT rows in "
        "this schema's CDM tables (docs/bulk.md)",
    )
    s.add_argument(
        "--staging-drugs",
        choices=("with_regimen", "all"),
        default="with_regimen",
        help="which drugs --staging stages: those with a dose, route, frequency or duration "
        "tied to them (default), or all",
    )
    s.add_argument("--model", help="a model id (default: the served model)")
    s.add_argument(
        "--style",
        help="a model trained with source styles: read the notes as this corpus's ('': none, "
        "for a model with a blank style; default: the model's own)",
    )
    s.add_argument("--min-confidence", type=float)
    s.add_argument("--no-context", action="store_true", help="no ConText assertions, no sections")
    s.add_argument("--no-linking", action="store_true", help="no concepts")
    s.add_argument("--chunk-size", type=int, help="notes per chunk (default: the service's)")
    s.add_argument("--wait", action="store_true", help="follow the job to its end")
    s.add_argument("--download", type=Path, help="with --wait: write the annotations here")
    s.add_argument(
        "--keep-notes",
        action="store_true",
        help="with --file and --wait: keep the uploaded notes on the service (default: deleted "
        "once the job has succeeded — they are patient data)",
    )
    s.set_defaults(handler=_submit)

    for name, help_text in (
        ("status", "a job's state and progress (JSON)"),
        ("cancel", "cancel a job (committed chunks stay)"),
        ("errors", "the notes a job could not annotate, with their ids and reasons (JSON)"),
        ("wait", "follow a job to its end"),
        ("delete", "delete a finished job and its output files (NOTE_NLP rows stay)"),
    ):
        c = commands.add_parser(name, help=help_text)
        c.add_argument("job_id")
        c.set_defaults(handler=_simple)
    c = commands.add_parser("list", help="annotation jobs, newest first (JSON)")
    c.add_argument("--state", choices=["queued", "running", "succeeded", "failed", "cancelled"])
    c.set_defaults(handler=_list)
    c = commands.add_parser("download", help="a finished job's annotations")
    c.add_argument("job_id")
    c.add_argument("-o", "--output", type=Path, required=True)
    c.set_defaults(handler=_download)


def _reported(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """The service's refusals (a 422 naming the field, a 404, a failed job) and a file that
    cannot be read or written as one line on stderr and exit status 2, not a traceback."""

    @functools.wraps(handler)
    def run(args: argparse.Namespace) -> int:
        from mslm_client.errors import MSLMError

        try:
            return handler(args)
        except MSLMError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except OSError as exc:  # a file that is not there or cannot be read or written
            name = f"{exc.filename}: " if exc.filename else ""
            print(f"error: {name}{exc.strerror or exc}", file=sys.stderr)
            return 2

    return run


def _client(args: argparse.Namespace) -> Any:
    from mslm_client import Client

    return Client(args.url, api_key=args.api_key)


def _print(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str, ensure_ascii=False))


def _job_dict(job: Any) -> dict[str, Any]:
    import dataclasses

    return dataclasses.asdict(job)


@_reported
def _submit(args: argparse.Namespace) -> int:
    if args.warehouse and not args.query:
        raise SystemExit("--warehouse needs --query")
    if args.download and not args.wait:
        raise SystemExit("--download needs --wait")
    if args.download and args.omop_table:
        raise SystemExit("--download is for file output; --omop-table writes to the warehouse")
    if args.staging and not args.omop_table:
        raise SystemExit("--staging needs --omop-table (the facts' NOTE_NLP rows)")
    with _client(args) as client:
        if args.file is not None:
            notes = client.upload_notes(
                args.file, format=args.notes_format, encoding=args.notes_encoding
            )
            unread = sum(not p.get("warning") for p in notes.problems)
            read_as = f", {notes.encoding['name']}" if notes.encoding else ""
            print(
                f"{notes.id}: {notes.notes} notes read ({notes.format}{read_as}), "
                f"{unread} could not be read",
                file=sys.stderr,
            )
            source: Any = notes.id
        else:
            source = {"kind": "sql", "warehouse": args.warehouse, "query": args.query}
        if args.omop_table:
            warehouse = args.omop_warehouse or args.warehouse
            if not warehouse:
                raise SystemExit("--omop-table needs --omop-warehouse (or --warehouse)")
            output = {"kind": "omop", "warehouse": warehouse, "table": args.omop_table}
            if args.staging:
                output["staging"] = {"schema": args.staging, "drugs": args.staging_drugs}
        else:
            output = {"kind": "file", "format": args.output_format}
        job = client.create_annotation_job(
            source,
            output=output,
            model=args.model,
            style=args.style,
            min_confidence=args.min_confidence,
            context=not args.no_context,
            linking=not args.no_linking,
            chunk_size=args.chunk_size,
        )
        print(job.id)
        if not args.wait:
            return 0
        job = client.wait_for_annotation_job(job.id)
        p = job.progress
        print(
            f"{job.id} {job.state}: {p.committed} notes, {p.entities} entities, "
            f"{p.failed_notes} not annotated, {p.notes_per_second:.1f} notes/s",
            file=sys.stderr,
        )
        if args.download:
            args.download.write_bytes(client.annotation_job_output(job.id))
        if args.file is not None and not args.keep_notes:
            client.delete_notes(source)
    return 0


@_reported
def _simple(args: argparse.Namespace) -> int:
    with _client(args) as client:
        if args.bulk_command == "status":
            _print(_job_dict(client.get_annotation_job(args.job_id)))
        elif args.bulk_command == "cancel":
            _print(_job_dict(client.cancel_annotation_job(args.job_id)))
        elif args.bulk_command == "errors":
            _print(client.annotation_job_errors(args.job_id))
        elif args.bulk_command == "delete":
            client.delete_annotation_job(args.job_id)
        else:
            job = client.wait_for_annotation_job(args.job_id)
            _print(_job_dict(job))
    return 0


@_reported
def _list(args: argparse.Namespace) -> int:
    with _client(args) as client:
        page = client.list_annotation_jobs(state=args.state)
        _print({"count": page.count, "data": [_job_dict(j) for j in page.data]})
    return 0


@_reported
def _download(args: argparse.Namespace) -> int:
    with _client(args) as client:
        args.output.write_bytes(client.annotation_job_output(args.job_id))
    return 0


#: Texts per request of ``mslm annotate --url`` in JSON (the service's MSLM_MAX_TEXTS is 64 by
#: default); another format is one request.
REMOTE_BATCH = 32


def annotate_remote(
    url: str, api_key: str | None, texts: list[str], options: dict[str, Any], format: str
) -> tuple[Any, str | None]:
    """``mslm annotate --url`` (the ``mslm.remote`` entry point): the texts annotated by a
    running service, as it answers in ``format``; JSON a batch of texts at a time, the
    results joined in order. Returns (answer, None), or (None, the error in one line)."""
    from mslm_client import Client
    from mslm_client import _endpoints as ep
    from mslm_client.errors import MSLMError

    try:
        with Client(url, api_key=api_key) as client:
            if format != "json":
                return client._request(ep.annotate_as_answered(texts, options, format)), None
            answer: dict[str, Any] | None = None
            for start in range(0, len(texts), REMOTE_BATCH):
                part = texts[start : start + REMOTE_BATCH]
                got = client._request(ep.annotate_as_answered(part, options, "json"))
                if answer is None:
                    answer = got
                    options = {**options, "model": got["model"]["id"]}  # one model throughout
                else:
                    answer["results"] += got["results"]
            return answer, None
    except MSLMError as exc:
        return None, f"{url}: {exc}"
