"""Checkpoints that resume exactly: ``work_dir/ckpt-<step>/`` holds the weights
(safetensors), the optimizer's state and the RNG states (safetensors), and the run's state,
scheduler and configuration fingerprint (JSON) — no pickles. Written whole under a temporary
name, then ``LATEST`` points at it; older checkpoints are removed."""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from ..bundle import WEIGHTS
from ..errors import CheckpointError
from .state import Resumable

log = logging.getLogger("mslm_core.train")

BEST = Path("best") / WEIGHTS  # the kept weights, under the work directory
LATEST = "LATEST"
OPTIMIZER = "optimizer.safetensors"
STATE = "trainer_state.json"


def save_weights(model: Any, path: Path) -> None:
    """The model's weights to ``path`` (safetensors), replaced atomically."""
    from safetensors.torch import save_model

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    save_model(model, str(tmp))
    os.replace(tmp, path)


def save_checkpoint(run: Resumable) -> Path:
    """``work_dir/ckpt-<step>/`` written whole, then ``LATEST`` points at it."""
    from safetensors.torch import save_file

    work = run.work_dir
    name = f"ckpt-{run.state.global_step:08d}"
    tmp = work / f".{name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_weights(run.model, tmp / WEIGHTS)
    opt = run.optimizer.state_dict()
    tensors = {
        f"{pid}.{key}": (v if v.ndim else v.reshape(1)).detach().cpu().contiguous()
        for pid, entry in opt["state"].items()
        for key, v in entry.items()
    }
    tensors["torch_rng"] = torch.get_rng_state()
    if torch.cuda.is_available():
        tensors["cuda_rng"] = torch.cuda.get_rng_state()
    save_file(tensors, str(tmp / OPTIMIZER))
    meta = {
        "fingerprint": run.fingerprint,
        "state": asdict(run.state),
        "param_groups": opt["param_groups"],
        "scheduler": run.scheduler.state_dict(),
    }
    (tmp / STATE).write_text(json.dumps(meta, indent=1))
    final = work / name
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    latest = work / f"{LATEST}.tmp"
    latest.write_text(name)
    os.replace(latest, work / LATEST)
    for old in work.glob("ckpt-*"):
        if old.name != name:
            shutil.rmtree(old, ignore_errors=True)
    return final


def load_checkpoint(run: Resumable) -> bool:
    """Resume from ``work_dir/LATEST`` when present; False when there is none."""
    from safetensors.torch import load_file, load_model

    pointer = run.work_dir / LATEST
    if not pointer.exists():
        return False
    ckpt = run.work_dir / pointer.read_text().strip()
    try:
        meta = json.loads((ckpt / STATE).read_text())
        tensors = load_file(str(ckpt / OPTIMIZER))
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{ckpt}: cannot read checkpoint: {exc}") from exc
    if meta["fingerprint"] != run.fingerprint:
        raise CheckpointError(
            f"{ckpt} was written with another configuration; "
            "resume with the same settings or remove the work directory"
        )
    load_model(run.model, str(ckpt / WEIGHTS), strict=False, device=run.device)
    state: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in tensors.items():
        if key in ("torch_rng", "cuda_rng"):
            continue
        pid, name = key.split(".", 1)
        state.setdefault(int(pid), {})[name] = value.reshape(()) if name == "step" else value
    run.optimizer.load_state_dict({"state": state, "param_groups": meta["param_groups"]})
    run.scheduler.load_state_dict(meta["scheduler"])
    torch.set_rng_state(tensors["torch_rng"])
    if "cuda_rng" in tensors and torch.cuda.is_available():
        torch.cuda.set_rng_state(tensors["cuda_rng"])
    # update in place: callers (and fit's loop) hold a reference to this state object
    for key, value in meta["state"].items():
        setattr(run.state, key, value)
    run.state.should_stop, run.state.stop_reason = False, None
    log.info(
        "resumed from %s (epoch %d, step %d)",
        ckpt.name,
        run.state.epoch,
        run.state.step_in_epoch,
    )
    return True
