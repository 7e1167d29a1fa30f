"""Where things live in the artifact store (shared by the API and every worker)."""

from __future__ import annotations

import logging
import re
import shutil
import time
from pathlib import Path

from mslm_core.errors import BundleError
from mslm_settings import Settings

log = logging.getLogger(__name__)

# What an upload or an import leaves while it runs (renamed or removed when it ends); a
# process killed mid-way leaves it behind for good.
IN_PROGRESS = (
    "uploads/tmp*",
    "datasets/.staging-*",
    "models/.staging-*",
    "vocabularies/.staging-*",
)


def dataset_dir(settings: Settings, dataset_id: str) -> Path:
    return settings.artifacts / "datasets" / dataset_id


#: What a model id may be: it names a folder of the store (a manifest's ``"../../x"`` or an
#: absolute id would put a bundle outside it).
MODEL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


def model_dir(settings: Settings, model_id: str) -> Path:
    """A model's folder; a BundleError for an id that is not a plain folder name."""
    if not MODEL_ID.fullmatch(model_id) or model_id in (".", ".."):
        raise BundleError(
            f"model id {model_id[:80]!r}: letters, digits, '.', '_' and '-' only, starting "
            "with a letter or a digit"
        )
    return settings.artifacts / "models" / model_id


def vocabulary_dir(settings: Settings, vocabulary_id: str) -> Path:
    """An imported vocabulary: its file and its linker index."""
    return settings.artifacts / "vocabularies" / vocabulary_id


def work_dir(settings: Settings, job_id: str) -> Path:
    """A job's checkpoints and bundle in progress (kept between attempts, for resuming)."""
    return settings.artifacts / "work" / job_id


def evaluation_dir(settings: Settings, evaluation_id: str) -> Path:
    """An evaluation's reliability diagram."""
    return settings.artifacts / "evaluations" / evaluation_id


def sweep_orphans(settings: Settings, older_than_s: float = 3600.0) -> dict[str, int]:
    """Remove what an upload or an import killed mid-way left in the artifact store: entries
    of ``IN_PROGRESS`` last touched more than ``older_than_s`` ago (a younger one may belong
    to another replica's upload, now). Logs counts only, never names or contents."""
    cutoff = time.time() - older_than_s
    removed: dict[str, int] = {}
    for pattern in IN_PROGRESS:
        n = 0
        for path in settings.artifacts.glob(pattern):
            try:
                if path.lstat().st_mtime >= cutoff:
                    continue
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink()
                n += 1
            except FileNotFoundError:  # another replica swept it first
                continue
        if n:
            removed[pattern] = n
    if removed:
        log.info(
            "swept %d orphaned upload/staging entries (%s)",
            sum(removed.values()),
            ", ".join(f"{k}: {v}" for k, v in removed.items()),
        )
    return removed
