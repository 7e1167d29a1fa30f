"""One typed settings object for the API, the worker and the store: the ``MSLM_`` environment
(or files in ``MSLM_SECRETS_DIR``, default ``/run/secrets``, named like the variable in lower
case — how docker-compose mounts secrets), validated at start-up. Unsafe values are refused
there, with the variable's name (``MSLM_API_KEYS`` by the API, which alone reads keys:
``api/auth.py``)."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Literal
from urllib.parse import quote, urlsplit, urlunsplit

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MSLM_", extra="ignore", case_sensitive=False)

    home: Path = Field(
        default_factory=lambda: Path.home() / ".mslm",
        description="state directory: SQLite database, artifacts, embedded broker",
    )
    database_url: str | None = Field(
        None, description="SQLAlchemy URL; default: SQLite file in HOME (postgresql+psycopg://…)"
    )
    database_password: SecretStr | None = Field(
        None, description="replaces the password of DATABASE_URL (a compose secret)"
    )
    broker_url: str | None = Field(
        None, description="Celery broker (redis://…); unset: embedded filesystem transport"
    )
    artifacts_dir: Path | None = Field(None, description="datasets and model bundles")
    api_keys: SecretStr | None = Field(
        None, description='"SECRET:SCOPE[+SCOPE…],…" — e.g. "k1:admin,k2:annotate+train"'
    )
    base_model: str = Field("minilm", description="default encoder of fine-tuning jobs")
    base_models: str = Field(
        "minilm",
        description="encoders jobs may use: NAME or NAME=PATH_OR_HUB_ID, comma separated",
    )
    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto", description="training and serving device (auto: CUDA when available)"
    )
    precision: Literal["auto", "fp32", "int8"] = Field(
        "auto", description="serving precision (auto: int8 on CPU when exported)"
    )
    max_texts: int = Field(64, ge=1, description="texts per /v1/annotate request")
    max_text_chars: int = Field(100_000, ge=1, description="characters per text")
    max_upload_mb: float = Field(100.0, gt=0, description="request body size of uploads")
    log_text: bool = Field(False, description="log submitted text (off: it is patient data)")
    refuse_other_languages: bool = Field(
        False,
        description="refuse a text surely written in another language than the model reads "
        "(422; an annotation job's note: not annotated) instead of annotating it with a warning",
    )
    batch_wait_ms: float = Field(5.0, ge=0, description="micro-batching time budget")
    max_batch_texts: int = Field(256, ge=1, description="texts per micro-batch")
    model_poll_seconds: float = Field(2.0, gt=0, description="how often replicas check activation")
    model_cache_size: int = Field(2, ge=1, description="models kept loaded per replica")
    shutdown_grace_seconds: float = Field(
        8.0,
        ge=0,
        description="at SIGTERM, how long requests in flight may finish before they are "
        "cancelled (within Docker's default 10 s stop timeout)",
    )
    heartbeat_seconds: float = Field(10.0, gt=0, description="job heartbeat interval")
    heartbeat_timeout_seconds: float = Field(
        120.0, gt=0, description="a running job with no heartbeat this long lost its worker"
    )
    requeue_after_seconds: float = Field(
        60.0, gt=0, description="re-publish a queued job whose broker message went missing"
    )
    max_attempts: int = Field(3, ge=1, description="worker losses before a job fails")
    auto_migrate: bool = Field(True, description="upgrade the database schema at start")
    intra_op_threads: int = Field(
        0,
        ge=0,
        description="ONNX Runtime threads per run (0: one per run for int8 on CPU, whose runs "
        "go side by side, one per core; else the runtime's default)",
    )
    inter_op_threads: int = Field(0, ge=0, description="ONNX Runtime inter-op threads")
    context: bool = Field(
        True,
        description="ConText assertion per entity (negated, possible, hypothetical, historical, "
        "family); off: annotate returns no assertion",
    )
    context_rules: Path | None = Field(
        None,
        description="a site's ConText rules (JSON, mslm_core/context/rules.py) added to ours",
    )
    context_rules_mode: Literal["extend", "replace"] = Field(
        "extend", description="extend: the site's rules join ours (same phrase: theirs); replace"
    )
    context_profile: Literal["omop", "context"] = Field(
        "omop",
        description="the clinical context's conventions when a request or job names none: omop "
        "(a finding to rule out is hypothetical) or context (ConText's: affirmed; a dated or "
        "'prior' finding historical; a denied one not also historical)",
    )
    vocabulary: str = Field(
        "mesh",
        description="the deployment's own vocabulary, which entities are linked to unless an "
        "imported one is activated: 'mesh' (the packaged MeSH vocabulary; also when empty), "
        "'none' (no concept), or a TSV (id, name, synonyms) or OBO file",
    )
    vocabulary_name: str = Field("", description="the vocabulary's name in answers (default: file)")
    vocabulary_url: str = Field(
        "",
        description="a concept's page, {id} standing for its id (e.g. "
        "https://meshb.nlm.nih.gov/record/ui?ui={id}); empty: none",
    )
    link_threshold: float = Field(
        0.5, ge=0.0, le=1.0, description="the lowest candidate score given as the concept"
    )
    link_candidates: int = Field(5, ge=1, le=50, description="candidate concepts per entity")
    header_timeout_seconds: float = Field(
        10.0, gt=0, description="a request's head (line and headers) must arrive within this"
    )
    warehouse_statement_timeout_seconds: float = Field(
        1800.0,
        ge=0,
        description="a warehouse query of an annotation job (counting its notes, reading a "
        "chunk) is cancelled by the server after this (0: no limit)",
    )
    min_body_rate_kb: int = Field(
        64,
        ge=1,
        description="a request's body must arrive at this many KB/s on average after the "
        "head's timeout (else 408 and the connection is closed)",
    )
    keep_alive_seconds: float = Field(
        5.0, gt=0, description="an idle kept-alive connection is closed after this"
    )
    max_connections: int = Field(
        1000,
        ge=1,
        description="connections an API process holds at once (one more is closed unread); "
        "keep it under the open-files limit (ulimit -n)",
    )
    quota_queued_jobs: int = Field(
        10,
        ge=0,
        description="queued fine-tuning jobs per API key, and annotation jobs and evaluations "
        "queued or running, each kind on its own (0: no limit); 429 beyond",
    )
    quota_running_jobs: int = Field(
        2,
        ge=0,
        description="jobs of one API key that run at once (0: no limit); the others wait queued",
    )
    quota_uploads_per_hour: int = Field(
        30,
        ge=0,
        description="datasets, vocabularies and notes files one API key uploads per hour, "
        "refused ones included (0: no limit)",
    )
    max_queued_jobs: int = Field(
        200, ge=0, description="queued fine-tuning jobs, all keys together (0: no limit)"
    )
    protect_metadata: bool = Field(
        False,
        description="/metrics, /docs and /openapi.json want a valid API key (Bearer, or Basic "
        "with the key as password for a browser); /healthz stays open",
    )
    bootstrap: Literal["auto", "clinical", "data", "none"] = Field(
        "auto",
        description="the first model of a fresh install (no dataset, no model yet): clinical "
        "(the clinical recipe's corpora from CORPUS_CACHE, fetched when reachable), data "
        "(BOOTSTRAP_DATA), auto (clinical when possible, else BOOTSTRAP_DATA, saying why), "
        "none",
    )
    bootstrap_early: bool = Field(
        True,
        description="the clinical first start serves an early model (one short epoch on a "
        "subset: minutes) and replaces it with the full recipe's when that is ready",
    )
    bootstrap_data: Path | None = Field(
        None, description="a corpus folder (train/dev/test files) the first start falls back on"
    )
    corpus_cache: Path | None = Field(
        None,
        description="public corpora at pinned commits (mslm corpora fetch/unpack); default "
        "~/.cache/mslm/corpora",
    )
    warehouses: SecretStr | None = Field(
        None,
        description="databases annotation jobs read notes from and write NOTE_NLP rows to: "
        "NAME=SQLALCHEMY_URL, comma or newline separated (a compose secret; a reading role "
        "for the notes, a writing one for the target table)",
    )
    bulk_chunk_notes: int = Field(
        200, ge=1, le=100_000, description="notes per chunk of an annotation job (committed as one)"
    )
    forwarded_allow_ips: str = Field(
        "",
        description="proxies trusted to set X-Forwarded-For (comma-separated addresses; empty: "
        "none, the connecting address is the client)",
    )

    @field_validator(
        "database_url",
        "broker_url",
        "artifacts_dir",
        "context_rules",
        "bootstrap_data",
        "corpus_cache",
        mode="before",
    )
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        """``MSLM_BROKER_URL=`` (as compose files write it) means: not set."""
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("vocabulary", mode="before")
    @classmethod
    def _default_vocabulary(cls, value: object) -> object:
        if value is None or (isinstance(value, str) and not value.strip()):
            return "mesh"
        return str(value).strip() if isinstance(value, (str, Path)) else value

    @model_validator(mode="after")
    def _defaults(self) -> Settings:
        self.home = self.home.expanduser()
        if self.artifacts_dir is None:
            self.artifacts_dir = self.home / "artifacts"
        if self.database_url is None:
            self.database_url = f"sqlite:///{self.home / 'mslm.db'}"
        if self.heartbeat_timeout_seconds <= 2 * self.heartbeat_seconds:
            raise ValueError(
                "MSLM_HEARTBEAT_TIMEOUT_SECONDS must exceed twice MSLM_HEARTBEAT_SECONDS"
            )
        self.base_model_map()  # validates
        self.warehouse_map()
        if self.base_model not in self.base_model_map():
            raise ValueError(f"MSLM_BASE_MODEL {self.base_model!r} is not in MSLM_BASE_MODELS")
        return self

    # -- derived ----------------------------------------------------------------------------
    @property
    def artifacts(self) -> Path:
        assert self.artifacts_dir is not None
        return self.artifacts_dir

    @property
    def sqlalchemy_url(self) -> str:
        """DATABASE_URL with DATABASE_PASSWORD put in (when given)."""
        assert self.database_url is not None
        if self.database_password is None:
            return self.database_url
        parts = urlsplit(self.database_url)
        user = parts.username or ""
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
        password = quote(self.database_password.get_secret_value(), safe="")
        netloc = f"{quote(user, safe='')}:{password}@{host}{port}"
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))

    @property
    def embedded_broker(self) -> bool:
        return not self.broker_url

    def warehouse_map(self) -> dict[str, str]:
        """WAREHOUSES as name → SQLAlchemy URL (never logged: the URLs hold passwords)."""
        out: dict[str, str] = {}
        raw = self.warehouses.get_secret_value() if self.warehouses else ""
        for item in filter(None, (x.strip() for x in raw.replace("\n", ",").split(","))):
            name, sep, url = item.partition("=")
            if not sep or not name.strip() or not url.strip():
                raise ValueError("MSLM_WAREHOUSES: each entry is NAME=SQLALCHEMY_URL")
            out[name.strip()] = url.strip()
        return out

    def base_model_map(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for item in filter(None, (x.strip() for x in self.base_models.split(","))):
            name, _, target = item.partition("=")
            if not name.strip():
                raise ValueError(f"MSLM_BASE_MODELS: entry {item!r} has no name")
            out[name.strip()] = (target or name).strip()
        if not out:
            raise ValueError("MSLM_BASE_MODELS lists no encoder")
        return out


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment (and the secrets directory when it exists)."""
    secrets = os.environ.get("MSLM_SECRETS_DIR", "/run/secrets")
    kwargs: dict[str, object] = dict(overrides)
    if Path(secrets).is_dir():
        kwargs["_secrets_dir"] = secrets
    return Settings(**kwargs)  # type: ignore[arg-type]


@functools.lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings (cached; tests clear the cache or override the dependency)."""
    return load_settings()
