"""Model bundles (docs/design.md): a directory written under a temporary name and renamed into
place, with a manifest that records the sha256 of every file. Loading verifies every
checksum first and never unpickles (weights are safetensors)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import BundleError, StyleError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from .model import MSLMModel

SCHEMA_VERSION = 1
MANIFEST = "manifest.json"
WEIGHTS = "model.safetensors"


def new_model_id() -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d%H%M%S")
    return f"m-{stamp}-{uuid.uuid4().hex[:6]}"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_manifest(directory: Path, manifest: dict[str, Any]) -> None:
    files = sorted(p for p in directory.rglob("*") if p.is_file() and p.name != MANIFEST)
    manifest["files"] = {str(p.relative_to(directory)): sha256_file(p) for p in files}
    tmp = directory / (MANIFEST + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(manifest, fh, indent=2, ensure_ascii=False, sort_keys=True)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, directory / MANIFEST)


def publish(staging: Path, target: Path, overwrite: bool = False) -> Path:
    """Atomically move a complete staging directory to ``target``."""
    if target.exists():
        if not overwrite:
            raise BundleError(f"{target} already exists (choose another --output)")
        trash = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:6]}"
        os.replace(target, trash)
        os.replace(staging, target)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        os.replace(staging, target)
    _fsync_dir(target.parent)
    return target


def save_bundle(
    model: MSLMModel,
    tokenizer: PreTrainedTokenizerBase,
    target: str | Path,
    manifest: dict[str, Any],
    overwrite: bool = False,
    extra_files: dict[str, Path] | None = None,
) -> Path:
    """Write ``model`` (an MSLMModel), its tokenizer, ``extra_files`` (bundle name → file to
    copy) and ``manifest`` as a bundle."""
    from safetensors.torch import save_model

    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:8]}"
    staging.mkdir()
    try:
        save_model(model, str(staging / WEIGHTS), metadata={"format": "pt"})
        model.mlm_model.config.save_pretrained(str(staging))
        tokenizer.save_pretrained(str(staging))
        for name, source in (extra_files or {}).items():
            shutil.copyfile(source, staging / name)
        full = {
            "schema_version": SCHEMA_VERSION,
            "id": manifest.get("id") or new_model_id(),
            "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "types": list(model.types),
            "detection_labels": ["B", "I", "O"],
            **{k: v for k, v in manifest.items() if k != "id"},
        }
        _write_manifest(staging, full)
        return publish(staging, target, overwrite)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def add_files(
    directory: str | Path,
    files: dict[str, Path],
    updates: dict[str, Any],
    remove: list[str] | tuple[str, ...] = (),
) -> None:
    """Add files (e.g. ONNX exports) to an existing bundle, remove others, and update its
    manifest, as one atomic step: the bundle is copied, changed and swapped in."""
    directory = Path(directory)
    manifest = read_manifest(directory)
    staging = directory.parent / f".{directory.name}.tmp-{uuid.uuid4().hex[:8]}"
    shutil.copytree(directory, staging)
    try:
        for name in remove:
            (staging / name).unlink(missing_ok=True)
        for name, src in files.items():
            shutil.copyfile(src, staging / name)
        manifest.update(updates)
        _write_manifest(staging, manifest)
        publish(staging, directory, overwrite=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def head_of(manifest: dict[str, Any]) -> str:
    """The bundle's head (``model.HEADS``); bundles from before the choice have the paper's."""
    return str(manifest.get("head", "paper"))


def predictor_options(manifest: dict[str, Any]) -> dict[str, Any]:
    """How a :class:`~mslm_core.predict.Predictor` reads this bundle: its decoding, where
    mentions are pooled, whether sentences are packed, the style its windows open with
    (bundles from before these choices: argmax, all subwords, one sentence per window, no
    style). Its :class:`~mslm_core.features.WindowBuilder` takes :func:`styles_of` it."""
    return {
        "decoding": str(manifest.get("decoding", "argmax")),
        "first_subword_types": head_of(manifest) == "linear",
        "pack": bool(manifest.get("pack", False)),
        "style": str(manifest.get("style", "")),
    }


def styles_of(manifest: dict[str, Any]) -> list[str]:
    """The styles a bundle's windows may open with: the corpora of a run trained with
    ``source_styles`` (every one of them: they set the room left for text), else none."""
    return [str(s) for s in manifest.get("styles") or []]


def readable_styles(manifest: dict[str, Any]) -> list[str]:
    """The styles a bundle may be asked to read text as: :func:`styles_of`, and ``""``, none,
    when it was trained with a ``blank_style`` too — or without styles (its only reading: a
    client that always asks for none is served by every such model)."""
    styles = styles_of(manifest)
    return styles + ([""] if manifest.get("blank_style") or not styles else [])


def check_style(manifest: dict[str, Any], style: str) -> str:
    """``style``, when the bundle may read text as it (:func:`readable_styles`); else a
    :class:`~mslm_core.errors.StyleError` naming the ones it may."""
    readable = readable_styles(manifest)
    if style not in readable:
        known = ", ".join(s or repr(s) for s in readable)
        if readable == [""]:
            known = "'' only: it was not trained with source styles"
        raise StyleError(f"style {style!r}: this model's styles are {known}")
    return style


def read_manifest(directory: str | Path) -> dict[str, Any]:
    path = Path(directory) / MANIFEST
    try:
        manifest: object = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BundleError(f"{directory}: not a model bundle (no {MANIFEST})") from None
    except ValueError as exc:
        raise BundleError(f"{path}: unreadable manifest: {exc}") from exc
    if not isinstance(manifest, dict):
        raise BundleError(
            f"{path}: the manifest must be a JSON object, not {type(manifest).__name__}"
        )
    if manifest.get("schema_version") != SCHEMA_VERSION:
        raise BundleError(
            f"{path}: schema_version {manifest.get('schema_version')!r} is not supported "
            f"(this version reads {SCHEMA_VERSION})"
        )
    return manifest


def verify_bundle(directory: str | Path) -> dict[str, Any]:
    """The manifest, after checking that every listed file exists and matches its sha256."""
    directory = Path(directory)
    manifest = read_manifest(directory)
    files = manifest.get("files") or {}
    if WEIGHTS not in files:
        raise BundleError(f"{directory}: manifest lists no {WEIGHTS}")
    for name, digest in files.items():
        path = directory / name
        if ".." in Path(name).parts or not path.is_file():
            raise BundleError(f"{directory}: file {name} listed in the manifest is missing")
        actual = sha256_file(path)
        if actual != digest:
            raise BundleError(
                f"{directory}: checksum mismatch for {name} (manifest {digest[:12]}…, "
                f"file {actual[:12]}…); the bundle is corrupt or was modified"
            )
    return manifest


@dataclass
class LoadedBundle:
    path: Path
    manifest: dict[str, Any]
    model: Any
    tokenizer: Any

    @property
    def id(self) -> str:
        model_id: str = self.manifest["id"]
        return model_id


def load_bundle(
    directory: str | Path, device: str = "cpu", manifest: dict[str, Any] | None = None
) -> LoadedBundle:
    """Verify checksums, then rebuild the model from ``config.json`` and the safetensors.
    ``manifest``: what :func:`verify_bundle` just returned (skips hashing twice)."""
    from safetensors.torch import load_model
    from transformers import AutoTokenizer

    from .model import model_from_config_dir

    directory = Path(directory)
    if manifest is None:
        manifest = verify_bundle(directory)
    model = model_from_config_dir(directory, manifest["types"], head_of(manifest))
    missing, unexpected = load_model(model, str(directory / WEIGHTS), strict=False, device=device)
    # tied weights (MLM decoder = input embeddings) are stored once
    missing = [k for k in missing if not k.endswith("decoder.weight")]
    if missing or unexpected:
        raise BundleError(
            f"{directory}: weights do not match the architecture "
            f"(missing {missing[:3]}, unexpected {unexpected[:3]})"
        )
    model.to(device).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(directory))
    return LoadedBundle(directory, manifest, model, tokenizer)
