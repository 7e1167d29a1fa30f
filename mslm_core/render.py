"""Predictions rendered for the people and tools that read them — the one place for every output
shape: this service's annotate JSON (``POST /v1/annotate`` and ``mslm annotate``), BioC JSON,
Label Studio pre-annotations and PubTator (each built with its format's writer helpers) and the
file outputs of annotation jobs (:data:`OUTPUTS`). ``mslm_core.pipeline`` renders an
annotation's response with them."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .corpus import formats
from .corpus.bioc import predictions_to_bioc
from .corpus.pubtator import predictions_to_pubtator
from .facts import facts_of, relations_of
from .language import Language
from .types import Entity

__all__ = [
    "OUTPUTS",
    "PREDICTIONS",
    "PREDICTION_FORMATS",
    "OutputFormat",
    "annotation_json",
    "media_type",
    "render_predictions",
]


def _fhir_bundle(
    texts: Sequence[str], entities: Sequence[Sequence[Entity]], options: formats.RenderOptions
) -> dict[str, Any]:
    from .fhir import bundle

    return bundle(texts, entities, options.model, options.ids)


def _service_json(
    texts: Sequence[str], entities: Sequence[Sequence[Entity]], options: formats.RenderOptions
) -> dict[str, Any]:
    """This service's own shape (:func:`annotation_json`); with ``ids``, each result names its
    text."""
    said = options.service() if options.service is not None else {}
    body = annotation_json(
        said.get("model", {"id": options.model}),
        entities,
        said.get("linking"),
        said.get("languages"),
        said.get("context"),
    )
    if options.ids is not None:
        for result, text_id in zip(body["results"], options.ids, strict=True):
            result["id"] = text_id
    return body


#: Every format predictions are rendered in, the first the default: this service's ``json``,
#: the corpus formats' renderers (``corpus.formats``), and FHIR R4, a Bundle of resources
#: (``mslm_core.fhir``).
PREDICTIONS: dict[str, formats.Predictions] = {
    "json": formats.Predictions(_service_json, help="this service's entities with their scores"),
    **{
        name: predictions
        for name, fmt in formats.formats().items()
        if (predictions := fmt.predictions) is not None
    },
    "fhir": formats.Predictions(
        _fhir_bundle,
        "application/fhir+json",
        "a FHIR R4 Bundle (Condition, MedicationStatement, Observation, Procedure, Provenance)",
    ),
}
PREDICTION_FORMATS = tuple(PREDICTIONS)


def predictions_help() -> str:
    """Every prediction format and what it is, for a field's or a flag's description."""
    return "; ".join(f"{name}: {p.help}" for name, p in PREDICTIONS.items())


def annotation_json(
    model: dict[str, Any],
    entities: Sequence[Sequence[Entity]],
    linking: dict[str, Any] | None = None,
    languages: Sequence[Language | None] | None = None,
    context: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``{"model": …, "linking": …, "context": …, "results": [{"entities": [{start, end,
    text, type, confidence, detection_score, type_score, …}, …], "relations": […],
    "facts": {…}, "warnings": […], "language": …}, …]}`` (relations and facts:
    ``mslm_core.facts``): one result per text, in order; ``linking`` what the concepts come
    from (None: no linking); ``context`` the conventions the clinical context followed
    (``{"profile": …}``; None: no context); ``languages``: per text, the other language it is
    written in (None: the model's, or too short to tell), said as a warning."""
    others = languages if languages is not None else [None] * len(entities)
    return {
        "model": model,
        "linking": linking,
        "context": context,
        "results": [
            {
                "entities": [e.to_dict() for e in ents],
                "relations": relations_of(ents),
                "facts": facts_of(ents),
                "warnings": [] if other is None else [other.warning(model.get("language", ""))],
                "language": None if other is None else other.to_dict(),
            }
            for ents, other in zip(entities, others, strict=True)
        ],
    }


def render_predictions(
    format: str,
    texts: Sequence[str],
    entities: Sequence[Sequence[Entity]],
    model: str,
    from_name: str = "label",
    to_name: str = "text",
    ids: Sequence[str] | None = None,
    service: Callable[[], dict[str, Any]] | None = None,
) -> str | dict[str, Any] | list[dict[str, Any]]:
    """Predictions (one list of entities per text) in ``format``, one of :data:`PREDICTIONS`:
    ``model`` names the model that made them; ``ids`` name the texts (BioC document ids,
    PubTator PMIDs, the results of ``json``; default: their indices); ``from_name`` and
    ``to_name``: the control and object names of a Label Studio labelling config;
    ``service``: what the service's ``json`` says beside the entities
    (``formats.RenderOptions``)."""
    found = PREDICTIONS.get(format)
    if found is None:
        valid = ", ".join(PREDICTIONS)
        raise ValueError(f"unknown prediction format {format!r}; valid: {valid}")
    options = formats.RenderOptions(model, ids, from_name, to_name, service)
    return found.render(texts, entities, options)


def media_type(format: str) -> str:
    """The media type of predictions rendered in ``format``."""
    return PREDICTIONS[format].media_type


# -- annotation jobs' file outputs --------------------------------------------------------------
def _concatenated(model: str, parts: Sequence[Path]) -> Iterator[bytes]:
    for part in parts:
        yield part.read_bytes()


def _jsonl_part(
    ids: Sequence[str],
    texts: Sequence[str],
    entities: Sequence[Sequence[Entity]],
    model: str,
    job_id: str,
) -> str:
    return "".join(
        json.dumps(
            {
                "id": i,
                "entities": [e.to_dict() for e in ents],
                "relations": relations_of(ents),
                "facts": facts_of(ents),
            },
            ensure_ascii=False,
        )
        + "\n"
        for i, ents in zip(ids, entities, strict=True)
    )


def _bioc_part(
    ids: Sequence[str],
    texts: Sequence[str],
    entities: Sequence[Sequence[Entity]],
    model: str,
    job_id: str,
) -> str:
    collection = predictions_to_bioc(texts, entities, model, ids)
    return "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in collection["documents"])


def _bioc_document(model: str, parts: Sequence[Path]) -> Iterator[bytes]:
    """One BioC collection: its head, the parts' documents (one per line) joined by commas."""
    empty = json.dumps(predictions_to_bioc([], [], model), ensure_ascii=False)
    head, tail = empty.rsplit('"documents": []', 1)
    yield (head + '"documents": [').encode()
    first = True
    for part in parts:
        for line in part.read_text(encoding="utf-8").splitlines():
            yield (("" if first else ",") + line).encode()
            first = False
    yield ("]" + tail).encode()


def _pubtator_part(
    ids: Sequence[str],
    texts: Sequence[str],
    entities: Sequence[Sequence[Entity]],
    model: str,
    job_id: str,
) -> str:
    return predictions_to_pubtator(texts, entities, ids)


def _fhir_part(
    ids: Sequence[str],
    texts: Sequence[str],
    entities: Sequence[Sequence[Entity]],
    model: str,
    job_id: str,
) -> str:
    """Each note's FHIR resources and their Provenance, one resource a line (FHIR Bulk
    Data's NDJSON)."""
    from .fhir import note_resources

    return "".join(
        json.dumps(resource, ensure_ascii=False) + "\n"
        for i, ents in zip(ids, entities, strict=True)
        for resource in note_resources(i, ents, model)
    )


def _note_nlp_part(
    ids: Sequence[str],
    texts: Sequence[str],
    entities: Sequence[Sequence[Entity]],
    model: str,
    job_id: str,
) -> str:
    """The chunk's ``NOTE_NLP`` rows, one JSON array of values a line (the CDM's columns but
    ``note_nlp_id``, which the document numbers); the note ids are integers (checked)."""
    import datetime as dt

    from . import __version__
    from .omop import nlp_system, note_nlp_values

    when = dt.datetime.now(dt.UTC).replace(microsecond=0)
    system = nlp_system(__version__, model, job_id)
    return "".join(
        json.dumps(row, ensure_ascii=False, default=str) + "\n"
        for i, t, ents in zip(ids, texts, entities, strict=True)
        for row in note_nlp_values(int(i), t, list(ents), system, when)
    )


def _note_nlp_rows(parts: Sequence[Path]) -> Iterator[list[Any]]:
    """The parts' rows, in order, numbered from 1 (``note_nlp_id``)."""
    number = 0
    for part in parts:
        with open(part, encoding="utf-8") as handle:
            for line in handle:
                number += 1
                yield [number, *json.loads(line)]


def _note_nlp_csv(model: str, parts: Sequence[Path]) -> Iterator[bytes]:
    """``NOTE_NLP`` as CSV: a header of the CDM v5.4 columns in the DDL's order, then a row a
    line (``omop.csv_field``: loads with ``COPY note_nlp FROM … CSV HEADER``)."""
    from .omop import NOTE_NLP_COLUMNS, csv_line

    yield (",".join(NOTE_NLP_COLUMNS) + "\r\n").encode()
    batch: list[str] = []
    for row in _note_nlp_rows(parts):
        batch.append(csv_line(row))
        if len(batch) == 1000:
            yield "".join(batch).encode()
            batch = []
    yield "".join(batch).encode()


def _note_nlp_parquet(model: str, parts: Sequence[Path]) -> Iterator[bytes]:
    """``NOTE_NLP`` as Parquet (pyarrow), the CDM's columns typed as its DDL types them
    (integers as int64, dates and datetimes as such), a row group per 10,000 rows; built in
    a spooled temporary file, then sent."""
    import datetime as dt
    import tempfile

    import pyarrow as pa
    import pyarrow.parquet as pq

    from .omop import NOTE_NLP_COLUMNS

    types = {
        "note_nlp_id": pa.int64(),
        "note_id": pa.int64(),
        "section_concept_id": pa.int64(),
        "note_nlp_concept_id": pa.int64(),
        "note_nlp_source_concept_id": pa.int64(),
        "nlp_date": pa.date32(),
        "nlp_datetime": pa.timestamp("s"),
    }
    schema = pa.schema([(c, types.get(c, pa.string())) for c in NOTE_NLP_COLUMNS])
    date_at = NOTE_NLP_COLUMNS.index("nlp_date")
    time_at = NOTE_NLP_COLUMNS.index("nlp_datetime")

    def table(rows: list[list[Any]]) -> pa.Table:
        for row in rows:
            row[date_at] = dt.date.fromisoformat(row[date_at])
            row[time_at] = dt.datetime.fromisoformat(row[time_at])
        columns: list[list[Any]] = [[row[k] for row in rows] for k in range(len(schema))]
        return pa.Table.from_arrays(
            [pa.array(v, type=f.type) for v, f in zip(columns, schema, strict=True)],
            schema=schema,
        )

    with tempfile.SpooledTemporaryFile(max_size=64 << 20) as out:
        with pq.ParquetWriter(out, schema) as writer:
            rows: list[list[Any]] = []
            for row in _note_nlp_rows(parts):
                rows.append(row)
                if len(rows) == 10_000:
                    writer.write_table(table(rows))
                    rows = []
            writer.write_table(table(rows))
        out.seek(0)
        while chunk := out.read(1 << 20):
            yield chunk


@dataclass(frozen=True)
class OutputFormat:
    """An annotation job's file output. Each chunk of notes is written as a part file
    (``part``: the notes' ids, texts, entities and the model → the file's text, stored under
    ``part_suffix``), so that a chunk run twice replaces its part; ``document`` serves the
    parts, in order, as one file of ``media_type`` (downloaded as ``<job id>.<suffix>``)."""

    media_type: str
    suffix: str
    part_suffix: str
    part: Callable[[Sequence[str], Sequence[str], Sequence[Sequence[Entity]], str, str], str]
    document: Callable[[str, Sequence[Path]], Iterator[bytes]] = _concatenated
    #: whether a note's id must be an integer (an OMOP ``note_id``); a note whose id is not
    #: is reported, not written
    integer_ids: bool = False
    help: str = ""  # what the file holds, in a few words


#: The file outputs of annotation jobs, each with what it holds (``store.bulk``, the worker's
#: file sink, the output route, the API's document, the client and the web page follow this
#: table).
OUTPUTS: dict[str, OutputFormat] = {
    "jsonl": OutputFormat(
        "application/x-ndjson",
        "jsonl",
        "jsonl",
        _jsonl_part,
        help="one note per line, its id and entities",
    ),
    "bioc": OutputFormat(
        "application/json",
        "bioc.json",
        "json",
        _bioc_part,
        _bioc_document,
        help="a BioC JSON collection",
    ),
    "pubtator": OutputFormat("text/plain", "pubtator", "txt", _pubtator_part, help="PubTator text"),
    "fhir": OutputFormat(
        "application/fhir+ndjson",
        "fhir.ndjson",
        "ndjson",
        _fhir_part,
        help="FHIR R4 resources, NDJSON (one a line)",
    ),
    "note_nlp_csv": OutputFormat(
        "text/csv",
        "note_nlp.csv",
        "nlp.jsonl",
        _note_nlp_part,
        _note_nlp_csv,
        True,
        "OMOP CDM v5.4 NOTE_NLP rows as CSV (loads with COPY … CSV HEADER), no warehouse needed "
        "(the notes' ids must be integers)",
    ),
    "note_nlp_parquet": OutputFormat(
        "application/vnd.apache.parquet",
        "note_nlp.parquet",
        "nlp.jsonl",
        _note_nlp_part,
        _note_nlp_parquet,
        True,
        "OMOP CDM v5.4 NOTE_NLP rows as Parquet (the notes' ids must be integers)",
    ),
}


def outputs_help() -> str:
    """Every file output of annotation jobs and what it holds, for a field's description."""
    return "; ".join(f"{name}: {o.help}" for name, o in OUTPUTS.items())
