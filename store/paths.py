"""Where things live in the artifact store (shared by the API and every worker)."""

from __future__ import annotations

from pathlib import Path

from mslm_settings import Settings


def dataset_dir(settings: Settings, dataset_id: str) -> Path:
    return settings.artifacts / "datasets" / dataset_id


def model_dir(settings: Settings, model_id: str) -> Path:
    return settings.artifacts / "models" / model_id


def work_dir(settings: Settings, job_id: str) -> Path:
    """A job's checkpoints and bundle in progress (kept between attempts, for resuming)."""
    return settings.artifacts / "work" / job_id


def evaluation_dir(settings: Settings, evaluation_id: str) -> Path:
    """An evaluation's reliability diagram."""
    return settings.artifacts / "evaluations" / evaluation_id
