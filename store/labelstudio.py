"""Label Studio projects that use this service as their ML backend (``/labelstudio``): one row
per project and API key, made at ``/setup``; its annotations become a dataset of documents
(one per task, ``task-<id>``), a new version per change; every ``train_every`` new
annotations, or when asked, a fine-tuning job on it whose model is served once it succeeds
(``serve``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from mslm_core.active import STRATEGIES
from mslm_core.errors import ConfigError
from mslm_core.labelstudio_ml import LabelConfig
from mslm_settings import Settings

from .datasets import add_documents, create_from_documents, current_documents, get_dataset
from .documents import Document
from .errors import Forbidden, NotFound
from .jobs import create_job, job_config
from .keys import is_admin
from .queue import TaskQueue
from .tables import FINAL_STATES, Job, LabelStudioProject, new_id, utcnow

#: what a project's connection may set in Label Studio's "extra params" (JSON), and bounds
MAX_TRAIN_EVERY = 100_000
SOURCE = "labelstudio"


def document_id(task_id: object) -> str:
    return f"task-{task_id}"


OPTION_NAMES = ("train_every", "serve", "params", "strategy", "diversity")


@dataclass(frozen=True)
class Options:
    """A connection's options, from Label Studio's "extra params": train every N new
    annotations, serve what a job makes, and the jobs' parameters (``POST /v1/jobs``'s
    options; checked here, so a bad one fails the connection and not a job later)."""

    train_every: int = 10
    serve: bool = False
    params: dict[str, Any] | None = None
    # the order Label Studio's uncertainty sampling hands tasks out in (``mslm_core.active``)
    strategy: str = "least_confidence"
    diversity: float = 0.5

    @classmethod
    def parse(cls, settings: Settings, extra: Any, admin: bool = False) -> Options:
        """The options Label Studio's extra params give (unset: the defaults). ``admin``:
        whether the connecting key may serve a model — serving is an admin act, so it is what
        ``serve`` defaults to, and a non-admin key that asks for it gets a
        :class:`~store.errors.Forbidden`."""
        if extra is None or extra == "":
            return cls(serve=admin)
        if not isinstance(extra, dict):
            raise ConfigError("extra_params: must be a JSON object")
        unknown = sorted(set(extra) - set(OPTION_NAMES))
        if unknown:
            raise ConfigError(
                f"extra_params: unknown field(s) {', '.join(unknown)} "
                f"(valid: {', '.join(OPTION_NAMES)})"
            )
        every = extra.get("train_every", cls.train_every)
        if isinstance(every, bool) or not isinstance(every, int):
            raise ConfigError("extra_params.train_every: must be an integer")
        if not 1 <= every <= MAX_TRAIN_EVERY:
            raise ConfigError(f"extra_params.train_every: must be in [1, {MAX_TRAIN_EVERY}]")
        serve = extra.get("serve", admin)
        if not isinstance(serve, bool):
            raise ConfigError("extra_params.serve: must be true or false")
        if serve and not admin:
            raise Forbidden(
                "extra_params.serve: serving a model to every key is an admin act; connect "
                "with an admin key, or with serve false (the model is then trained, not served)"
            )
        params = extra.get("params")
        if params is not None:
            if not isinstance(params, dict):
                raise ConfigError("extra_params.params: must be a JSON object")
            try:
                job_config(settings, params)
            except ConfigError as exc:
                raise ConfigError(f"extra_params.params: {exc}") from None
        strategy = extra.get("strategy", cls.strategy)
        if strategy not in STRATEGIES:
            raise ConfigError(f"extra_params.strategy: one of {', '.join(STRATEGIES)}")
        diversity = extra.get("diversity", cls.diversity)
        if isinstance(diversity, bool) or not isinstance(diversity, (int, float)):
            raise ConfigError("extra_params.diversity: must be a number")
        if not 0.0 <= diversity <= 1.0:
            raise ConfigError("extra_params.diversity: must be in [0, 1]")
        return cls(every, serve, params, strategy, float(diversity))


def config_of(row: LabelStudioProject) -> LabelConfig:
    return LabelConfig(row.from_name, row.to_name, row.text_key, tuple(row.labels))


def options_of(row: LabelStudioProject) -> Options:
    return Options(row.train_every, row.serve, dict(row.params or {}), row.strategy, row.diversity)


def connect(
    session: Session, project: str, key_id: str, config: LabelConfig, options: Options
) -> LabelStudioProject:
    """The project's row, made or brought up to date with its labelling config and options
    (``/setup`` comes at every connection and whenever Label Studio checks the model)."""
    row = session.scalar(
        select(LabelStudioProject).where(
            LabelStudioProject.project == project, LabelStudioProject.key_id == key_id
        )
    )
    if row is None:
        row = LabelStudioProject(id=new_id("lsp"), project=project, key_id=key_id)
        session.add(row)
    row.from_name, row.to_name, row.text_key = config.from_name, config.to_name, config.text_key
    row.labels = list(config.labels)
    row.train_every, row.serve = options.train_every, options.serve
    row.params = dict(options.params or {})
    row.strategy, row.diversity = options.strategy, options.diversity
    row.updated_at = utcnow()
    session.commit()
    return row


def get_project(
    session: Session, project: str, key_id: str, lock: bool = False
) -> LabelStudioProject:
    """The row of ``project`` for this key; NotFound when it never called ``/setup``."""
    query = select(LabelStudioProject).where(
        LabelStudioProject.project == project, LabelStudioProject.key_id == key_id
    )
    row = session.scalar(query.with_for_update() if lock else query)
    if row is None:
        raise NotFound(f"Label Studio project {project} (connect this backend to it first: /setup)")
    return row


@dataclass(frozen=True)
class Annotation:
    """One annotation Label Studio reports: its id, its task's and the task as a document
    (``entities=None``: the annotation was skipped)."""

    annotation_id: str
    task_id: str
    document: Document


def record_annotations(
    settings: Settings,
    session: Session,
    row: LabelStudioProject,
    given: list[Annotation],
    new: bool,
) -> bool:
    """Put the tasks' documents into the project's dataset (made at the first annotation) as
    one new version; ``new``: these annotations were just created, and those that label their
    task count toward the next job. Returns whether a job is due (``train_every`` reached,
    and no job of the project's queued or running)."""
    if not given:
        return False
    annotations = dict(row.annotations or {})
    for a in given:
        annotations[a.annotation_id] = a.task_id
    row.annotations = annotations
    if new:  # a skipped task (no entities) teaches nothing
        row.since_job += sum(a.document.entities is not None for a in given)
    row.updated_at = utcnow()
    documents = list({a.document.id: a.document for a in given}.values())
    _change(settings, session, row, documents)
    return row.since_job >= row.train_every and not _job_open(session, row)


def _change(
    settings: Settings, session: Session, row: LabelStudioProject, documents: list[Document]
) -> None:
    """``documents`` into the project's dataset: made by the first change, a new version by
    every later one (either commits the row's changes with it)."""
    if row.dataset_id is None:
        name = f"Label Studio project {row.project}"
        dataset = create_from_documents(settings, session, documents, name, row.key_id, SOURCE)
        row.dataset_id = dataset.id
        session.commit()
    else:
        add_documents(
            settings,
            session,
            row.dataset_id,
            row.key_id,
            documents,
            created_by=row.key_id,
            source=SOURCE,
        )


def forget_annotations(
    settings: Settings, session: Session, row: LabelStudioProject, annotation_ids: list[str]
) -> int:
    """Deleted annotations: a task none of whose annotations is left goes back to the
    dataset's unlabelled pool. Returns how many tasks did."""
    annotations = dict(row.annotations or {})
    tasks = {annotations.pop(a) for a in annotation_ids if a in annotations}
    back = tasks - set(annotations.values())
    row.annotations = annotations
    row.updated_at = utcnow()
    if not back or row.dataset_id is None:
        session.commit()
        return 0
    dataset = get_dataset(session, row.dataset_id, row.key_id)
    texts = {d.id: d.text for d in current_documents(settings, dataset)}
    documents = [
        Document(document_id(t), texts[document_id(t)], None)
        for t in sorted(back)
        if document_id(t) in texts
    ]
    if documents:
        _change(settings, session, row, documents)
    else:
        session.commit()
    return len(documents)


def _job_open(session: Session, row: LabelStudioProject) -> bool:
    if row.last_job_id is None:
        return False
    job = session.get(Job, row.last_job_id)
    return job is not None and job.state not in FINAL_STATES


def start_training(
    settings: Settings, session: Session, queue: TaskQueue, row: LabelStudioProject
) -> Job:
    """A fine-tuning job on the project's dataset as it is now, with the connection's job
    parameters; its model is served once it succeeds when ``serve`` is set. A ConfigError
    when nothing is annotated yet."""
    if row.dataset_id is None:
        raise ConfigError(
            f"Label Studio project {row.project} has no annotation yet: nothing to train on"
        )
    job, _ = create_job(
        settings,
        session,
        queue,
        row.dataset_id,
        dict(row.params or {}),
        {"onnx": True, "quantize": None},
        created_by=row.key_id,
        owner=row.key_id,
        # serving is an admin act: the key that connected the project must still be one
        activate=row.serve and is_admin(session, row.key_id),
    )
    row.last_job_id, row.since_job, row.updated_at = job.id, 0, utcnow()
    session.commit()
    return job
