"""Python client of the mslm service (sync and async, typed, retrying).

    from mslm_client import Client

    with Client("http://mslm.internal:8000", api_key="...") as mslm:
        answer = mslm.annotate(["Cisplatin caused renal failure."])
        for entity in answer.results[0].entities:
            print(entity.type, entity.text, entity.confidence)

``base_url`` and ``api_key`` default to the ``MSLM_URL`` and ``MSLM_API_KEY`` environment
variables. Install with ``pip install "mslm[client]"`` (httpx and tqdm; pandas only for
``annotate_series``).
"""

from __future__ import annotations

from ._async import AsyncClient
from ._core import FileInput, RetryPolicy
from ._endpoints import AnnotateOptions, AnnotationJobOptions, JobParams
from ._sync import Client
from ._version import __version__
from .errors import (
    APIConnectionError,
    APIError,
    AuthenticationError,
    ConflictError,
    JobError,
    MSLMError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    RequestTooLargeError,
    ServerError,
    ValidationError,
    WaitTimeout,
)
from .results import (
    AnnotateResponse,
    AnnotationJob,
    AnnotationProgress,
    Assertion,
    Concept,
    ContextUsed,
    Cue,
    Dataset,
    DatasetVersion,
    Document,
    Entity,
    Evaluation,
    FactPart,
    Facts,
    Job,
    JobDataset,
    JobProgress,
    LinkedVocabulary,
    Linking,
    Measurement,
    Medication,
    Model,
    NoteFile,
    Page,
    Readiness,
    Relation,
    ServedModel,
    SplitFile,
    Suggestion,
    Suggestions,
    TextResult,
    VersionChange,
    Vocabulary,
)

__all__ = [
    "APIConnectionError",
    "APIError",
    "AnnotateOptions",
    "AnnotateResponse",
    "AnnotationJob",
    "AnnotationJobOptions",
    "AnnotationProgress",
    "Assertion",
    "AsyncClient",
    "AuthenticationError",
    "Client",
    "Concept",
    "ConflictError",
    "ContextUsed",
    "Cue",
    "Dataset",
    "DatasetVersion",
    "Document",
    "Entity",
    "Evaluation",
    "FactPart",
    "Facts",
    "FileInput",
    "Job",
    "JobDataset",
    "JobError",
    "JobParams",
    "JobProgress",
    "LinkedVocabulary",
    "Linking",
    "MSLMError",
    "Measurement",
    "Medication",
    "Model",
    "NotFoundError",
    "NoteFile",
    "Page",
    "PermissionDeniedError",
    "RateLimitError",
    "Readiness",
    "Relation",
    "RequestTooLargeError",
    "RetryPolicy",
    "ServedModel",
    "ServerError",
    "SplitFile",
    "Suggestion",
    "Suggestions",
    "TextResult",
    "ValidationError",
    "VersionChange",
    "Vocabulary",
    "WaitTimeout",
    "__version__",
]
