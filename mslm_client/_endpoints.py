"""Every REST operation as a :class:`~mslm_client._core.Call`: path, body, how to read the
answer, and whether it may be sent twice. Both clients call these; nothing here does I/O."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypedDict, TypeVar
from urllib.parse import quote

import httpx

from ._core import Call, FileInput
from .results import (
    AnnotateResponse,
    AnnotationJob,
    Dataset,
    DatasetVersion,
    Document,
    Evaluation,
    Job,
    JobDataset,
    Linking,
    Model,
    NoteFile,
    Page,
    Readiness,
    Suggestions,
    Vocabulary,
)

T = TypeVar("T")


class AnnotateOptions(TypedDict, total=False):
    """What ``annotate``, ``annotate_iter`` and ``annotate_series`` accept besides the texts."""

    model: str | None  # a model id; default: the active model
    style: str | None  # a model with source styles: read the texts as this corpus's
    min_confidence: float | None  # drop entities below this
    min_confidence_per_type: Mapping[str, float] | None  # per type, over min_confidence
    context: bool  # each finding's clinical context and section (default True)
    context_profile: str  # default (the service's), omop or context: its conventions
    linking: bool  # each entity's concept (default True)


class JobParams(TypedDict, total=False):
    """The fine-tuning settings of ``POST /v1/jobs``; unset ones take the service's defaults."""

    source_styles: bool  # several datasets: each one's windows open with its id
    blank_style: float  # with source_styles: this share of windows has none, nor the model
    note_style: float  # this share of training sentences rewritten as notes are written
    base_model: str  # an encoder allowed by MSLM_BASE_MODELS
    strategy: str  # one of the service's (JobCreate.strategy in its /openapi.json)
    elm_rate: float
    blm_rate: float
    epochs: int
    batch_size: int
    learning_rate: float
    max_length: int
    seed: int
    patience: int  # early stopping (0: never)
    max_train_sentences: int  # the first K training sentences of each dataset
    max_eval_sentences: int  # the first K dev and test sentences of each dataset
    min_dev_f1: float  # the floor: below it (or predicting nothing) the model is flagged
    below_floor: Literal["warn", "fail"]  # flagged: succeed with warnings, or fail
    partial_labels: bool
    head: str  # linear | paper
    decoding: str  # viterbi | argmax
    select: str  # best-dev | last
    mask_rate: float
    masking: str  # dynamic | static
    mask_replace: str  # mask | bert
    mask_weights: bool  # False: the ablation without mask-specific weights
    weight_rule: str  # paper | reference
    detect_on: str  # masked | clean
    detect_ignore_masked: bool
    mlm_weight: float
    tapt_epochs: int
    mlm_head_warmup_steps: int
    mlm_head_warmup_lr: float
    weight_decay: float
    warmup_ratio: float
    max_grad_norm: float
    pack: bool
    dropout: float
    eval_batch_size: int
    onnx: bool  # export to ONNX (default True)
    quantize: Literal["int8"] | None  # also an int8 model


_EXPORT_KEYS = ("onnx", "quantize")


def _segment(value: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"expected a non-empty id, got {value!r}")
    return quote(value, safe="")


def _json(build: Callable[[dict[str, Any]], T]) -> Callable[[httpx.Response], T]:
    return lambda response: build(response.json())


def _page(build: Callable[[dict[str, Any]], T]) -> Callable[[httpx.Response], Page[T]]:
    def parse(response: httpx.Response) -> Page[T]:
        body = response.json()
        return Page(data=[build(item) for item in body["data"]], count=int(body["count"]))

    return parse


def _nothing(response: httpx.Response) -> None:
    return None


def _content(response: httpx.Response) -> bytes:
    return response.content


def _decoded(response: httpx.Response) -> Any:
    """JSON when the service says so, else the text (PubTator, BioC XML, …)."""
    if "json" in response.headers.get("content-type", ""):
        return response.json()
    return response.text


def _paging(limit: int, offset: int, **extra: Any) -> dict[str, Any]:
    return {"limit": limit, "offset": offset, **{k: v for k, v in extra.items() if v is not None}}


# -- annotate ---------------------------------------------------------------------------------
def check_annotate_options(options: AnnotateOptions) -> None:
    unknown = set(options) - set(AnnotateOptions.__annotations__)
    if unknown:
        raise TypeError(f"unknown annotate option(s): {', '.join(sorted(unknown))}")


def annotate_body(texts: Sequence[str], options: AnnotateOptions) -> dict[str, Any]:
    if isinstance(texts, str):
        raise TypeError("texts must be a list of strings, not one string: pass [text]")
    check_annotate_options(options)
    body: dict[str, Any] = {"texts": list(texts)}
    for name, value in options.items():
        if value is not None:
            body[name] = dict(value) if isinstance(value, Mapping) else value
    return body


def annotate(
    texts: Sequence[str], options: AnnotateOptions, format: str | None = None
) -> Call[Any]:
    """``POST /v1/annotate``: no side effect, so it is retried like a GET. A ``format`` other
    than json is passed through and its answer returned decoded (JSON) or as text."""
    body = annotate_body(texts, options)
    headers: dict[str, str] = {}
    if format is not None:
        body["format"] = format
        headers["Accept"] = "*/*"  # the format decides the media type, not this client
    parse = AnnotateResponse.from_dict if format in (None, "json") else None
    return Call(
        "POST",
        "/v1/annotate",
        _json(parse) if parse else _decoded,
        json=body,
        headers=headers,
        idempotent=True,
    )


def annotate_as_answered(
    texts: Sequence[str], options: Mapping[str, Any], format: str
) -> Call[Any]:
    """``POST /v1/annotate`` answered as the service wrote it: decoded JSON, or text."""
    body = {"texts": list(texts), **options, "format": format}
    return Call(
        "POST", "/v1/annotate", _decoded, json=body, headers={"Accept": "*/*"}, idempotent=True
    )


# -- datasets ---------------------------------------------------------------------------------
def upload_dataset(
    name: str | None, train: FileInput, dev: FileInput | None, test: FileInput | None
) -> Call[Dataset]:
    """``POST /v1/datasets``: creates a dataset per call, so it is not sent twice (except
    after a connection that never opened)."""
    files = {k: v for k, v in (("train", train), ("dev", dev), ("test", test)) if v is not None}
    data = {"name": name} if name is not None else None
    return Call("POST", "/v1/datasets", _json(Dataset.from_dict), data=data, files=files)


def list_datasets(limit: int, offset: int) -> Call[Page[Dataset]]:
    return Call("GET", "/v1/datasets", _page(Dataset.from_dict), params=_paging(limit, offset))


def get_dataset(dataset_id: str) -> Call[Dataset]:
    return Call("GET", f"/v1/datasets/{_segment(dataset_id)}", _json(Dataset.from_dict))


def delete_dataset(dataset_id: str) -> Call[None]:
    return Call("DELETE", f"/v1/datasets/{_segment(dataset_id)}", _nothing)


def add_documents(
    dataset_id: str, documents: Sequence[Document], remove: Sequence[str]
) -> Call[DatasetVersion]:
    """``POST /v1/datasets/{id}/documents``: a new version per call, so it is not sent twice."""
    body = {"documents": [d.to_dict() for d in documents], "remove": list(remove)}
    path = f"/v1/datasets/{_segment(dataset_id)}/documents"
    return Call("POST", path, _json(DatasetVersion.from_dict), json=body)


def list_dataset_versions(dataset_id: str) -> Call[Page[DatasetVersion]]:
    path = f"/v1/datasets/{_segment(dataset_id)}/versions"
    return Call("GET", path, _page(DatasetVersion.from_dict))


def suggest(
    dataset_id: str,
    limit: int,
    strategy: str,
    diversity: float,
    model: str | None,
    max_documents: int,
) -> Call[Suggestions]:
    body: dict[str, Any] = {
        "limit": limit,
        "strategy": strategy,
        "diversity": diversity,
        "max_documents": max_documents,
    }
    if model is not None:
        body["model"] = model
    path = f"/v1/datasets/{_segment(dataset_id)}/suggest"
    return Call("POST", path, _json(Suggestions.from_dict), json=body, idempotent=True)


# -- jobs -------------------------------------------------------------------------------------
def create_job(
    datasets: str | Sequence[JobDataset], params: JobParams, idempotency_key: str | None
) -> Call[Job]:
    """``POST /v1/jobs`` with an ``Idempotency-Key`` (one per logical call unless given): the
    service answers a repeat with the job it created, so the POST is retried safely.
    ``datasets``: a dataset id, or several datasets with their type maps and weights."""
    unknown = set(params) - set(JobParams.__annotations__)
    if unknown:
        raise TypeError(f"unknown job parameter(s): {', '.join(sorted(unknown))}")
    body: dict[str, Any] = (
        {"dataset_id": datasets}
        if isinstance(datasets, str)
        else {"datasets": [d.to_dict() for d in datasets]}
    )
    body.update({k: v for k, v in params.items() if k not in _EXPORT_KEYS and v is not None})
    body["export"] = {"onnx": params.get("onnx", True), "quantize": params.get("quantize")}
    key = idempotency_key or f"mslm-client-{uuid.uuid4().hex}"
    return Call(
        "POST",
        "/v1/jobs",
        _json(Job.from_dict),
        json=body,
        headers={"Idempotency-Key": key},
        idempotent=True,
    )


def list_jobs(state: str | None, limit: int, offset: int) -> Call[Page[Job]]:
    params = _paging(limit, offset, state=state)
    return Call("GET", "/v1/jobs", _page(Job.from_dict), params=params)


def get_job(job_id: str) -> Call[Job]:
    return Call("GET", f"/v1/jobs/{_segment(job_id)}", _json(Job.from_dict))


def cancel_job(job_id: str) -> Call[Job]:
    """Cancelling twice is cancelling once: retried."""
    path = f"/v1/jobs/{_segment(job_id)}/cancel"
    return Call("POST", path, _json(Job.from_dict), idempotent=True)


# -- models -----------------------------------------------------------------------------------
def list_models(limit: int, offset: int) -> Call[Page[Model]]:
    return Call("GET", "/v1/models", _page(Model.from_dict), params=_paging(limit, offset))


def get_model(model_id: str) -> Call[Model]:
    return Call("GET", f"/v1/models/{_segment(model_id)}", _json(Model.from_dict))


def activate_model(model_id: str, force: bool = False) -> Call[Model]:
    """Activating the active model changes nothing: retried. ``force``: serve a model below
    its job's floor (its ``warnings``), which is otherwise refused."""
    path = f"/v1/models/{_segment(model_id)}/activate" + ("?force=true" if force else "")
    return Call("POST", path, _json(Model.from_dict), idempotent=True)


def delete_model(model_id: str) -> Call[None]:
    return Call("DELETE", f"/v1/models/{_segment(model_id)}", _nothing)


# -- vocabularies -----------------------------------------------------------------------------
def import_vocabulary(
    file: FileInput, name: str | None, url_pattern: str, activate: bool
) -> Call[Vocabulary]:
    """``POST /v1/vocabularies``: stores a vocabulary per call, so it is not sent twice."""
    data: dict[str, Any] = {"url_pattern": url_pattern, "activate": str(activate).lower()}
    if name is not None:
        data["name"] = name
    return Call(
        "POST", "/v1/vocabularies", _json(Vocabulary.from_dict), data=data, files={"file": file}
    )


def list_vocabularies(limit: int, offset: int) -> Call[tuple[Page[Vocabulary], Linking]]:
    def parse(response: httpx.Response) -> tuple[Page[Vocabulary], Linking]:
        body = response.json()
        page = Page([Vocabulary.from_dict(v) for v in body["data"]], int(body["count"]))
        return page, Linking.from_dict(body["linking"])

    return Call("GET", "/v1/vocabularies", parse, params=_paging(limit, offset))


def get_vocabulary(vocabulary_id: str) -> Call[Vocabulary]:
    path = f"/v1/vocabularies/{_segment(vocabulary_id)}"
    return Call("GET", path, _json(Vocabulary.from_dict))


def activate_vocabulary(vocabulary_id: str) -> Call[Linking]:
    """Activating the one in use changes nothing: retried. ``default``: the deployment's own."""
    path = f"/v1/vocabularies/{_segment(vocabulary_id)}/activate"
    return Call("POST", path, _json(Linking.from_dict), idempotent=True)


def delete_vocabulary(vocabulary_id: str) -> Call[None]:
    return Call("DELETE", f"/v1/vocabularies/{_segment(vocabulary_id)}", _nothing)


def model_calibration_png(model_id: str) -> Call[bytes]:
    path = f"/v1/models/{_segment(model_id)}/calibration.png"
    return Call("GET", path, _content, headers={"Accept": "image/png"})


# -- evaluations ------------------------------------------------------------------------------
def create_evaluation(
    model_id: str, dataset_id: str, split: str, type_map: Mapping[str, Any] | None = None
) -> Call[Evaluation]:
    """``POST /v1/evaluations`` queues a new evaluation per call: not sent twice."""
    body: dict[str, Any] = {"model_id": model_id, "dataset_id": dataset_id, "split": split}
    if type_map:
        body["type_map"] = dict(type_map)
    return Call("POST", "/v1/evaluations", _json(Evaluation.from_dict), json=body)


def get_evaluation(evaluation_id: str) -> Call[Evaluation]:
    return Call("GET", f"/v1/evaluations/{_segment(evaluation_id)}", _json(Evaluation.from_dict))


def evaluation_calibration_png(evaluation_id: str) -> Call[bytes]:
    path = f"/v1/evaluations/{_segment(evaluation_id)}/calibration.png"
    return Call("GET", path, _content, headers={"Accept": "image/png"})


# -- annotation jobs (bulk) -------------------------------------------------------------------
class AnnotationJobOptions(TypedDict, total=False):
    """What an annotation job takes besides its source and output."""

    model: str | None  # a model id; default: the active model
    style: str | None  # a model with source styles: read the notes as this corpus's
    min_confidence: float
    min_confidence_per_type: Mapping[str, float]
    context: bool  # ConText assertions and sections (default True)
    context_profile: str  # default (the service's), omop or context: its conventions
    linking: bool  # concepts from the served vocabulary (default True)
    chunk_size: int | None  # notes per chunk (default MSLM_BULK_CHUNK_NOTES)


def upload_notes(
    file: FileInput, format: str | None, encoding: str | None = None
) -> Call[NoteFile]:
    """``POST /v1/annotation-jobs/inputs``: stores a file per call, so it is not sent twice."""
    given = {"format": format, "encoding": encoding}
    data = {k: v for k, v in given.items() if v} or None
    path = "/v1/annotation-jobs/inputs"
    return Call("POST", path, _json(NoteFile.from_dict), data=data, files={"file": file})


def create_annotation_job(
    source: Mapping[str, Any], output: Mapping[str, Any], options: AnnotationJobOptions
) -> Call[AnnotationJob]:
    """``POST /v1/annotation-jobs`` queues a new job per call: not sent twice."""
    unknown = set(options) - set(AnnotationJobOptions.__annotations__)
    if unknown:
        raise TypeError(f"unknown annotation job option(s): {', '.join(sorted(unknown))}")
    body: dict[str, Any] = {"source": dict(source), "output": dict(output)}
    for name, value in options.items():
        if value is not None:
            body[name] = dict(value) if isinstance(value, Mapping) else value
    return Call("POST", "/v1/annotation-jobs", _json(AnnotationJob.from_dict), json=body)


def list_annotation_jobs(state: str | None, limit: int, offset: int) -> Call[Page[AnnotationJob]]:
    params = _paging(limit, offset, state=state)
    return Call("GET", "/v1/annotation-jobs", _page(AnnotationJob.from_dict), params=params)


def get_annotation_job(job_id: str) -> Call[AnnotationJob]:
    path = f"/v1/annotation-jobs/{_segment(job_id)}"
    return Call("GET", path, _json(AnnotationJob.from_dict))


def cancel_annotation_job(job_id: str) -> Call[AnnotationJob]:
    """Cancelling twice is cancelling once: retried."""
    path = f"/v1/annotation-jobs/{_segment(job_id)}/cancel"
    return Call("POST", path, _json(AnnotationJob.from_dict), idempotent=True)


def delete_annotation_job(job_id: str) -> Call[None]:
    return Call("DELETE", f"/v1/annotation-jobs/{_segment(job_id)}", _nothing)


def delete_notes(input_id: str) -> Call[None]:
    return Call("DELETE", f"/v1/annotation-jobs/inputs/{_segment(input_id)}", _nothing)


def annotation_job_errors(job_id: str) -> Call[list[dict[str, Any]]]:
    path = f"/v1/annotation-jobs/{_segment(job_id)}/errors"
    return Call("GET", path, lambda response: list(response.json()["data"]))


def annotation_job_output(job_id: str) -> Call[bytes]:
    path = f"/v1/annotation-jobs/{_segment(job_id)}/output"
    return Call("GET", path, _content, headers={"Accept": "*/*"})


# -- health -----------------------------------------------------------------------------------
def healthz() -> Call[dict[str, Any]]:
    return Call("GET", "/healthz", _json(dict))


def readyz() -> Call[Readiness]:
    """503 is an answer here (not ready, with reasons), not an error, and not retried."""

    def parse(response: httpx.Response) -> Readiness:
        return Readiness.from_dict(response.json(), ready=response.status_code == 200)

    return Call("GET", "/readyz", parse, answers=frozenset({503}))
