"""The machine a model runs on: which torch device, and how a training process allocates."""

from __future__ import annotations

import ctypes
import sys

from .errors import ConfigError


def resolve_device(name: str) -> str:
    """``auto`` → ``cuda`` when PyTorch sees a GPU, else ``cpu``; ``cuda`` without one is an
    error."""
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device: cuda was asked for but no CUDA device is available")
    return name


_BLOCKS_KEPT = False


def keep_large_blocks() -> None:
    """Ask glibc to keep large freed blocks instead of returning each to the kernel.

    Every step allocates gradient buffers as large as the vocabulary matrix (47 MB for
    MiniLM; twice for MSLM's tied decoder); above glibc's mmap threshold (32 MB at most) each
    is mmapped, page-faulted and zeroed anew. Measured on 2 cores: vanilla step 0.41 → 0.38 s,
    MSLM 0.49 → 0.45 s. A training process only; Linux/glibc only (elsewhere a no-op)."""
    global _BLOCKS_KEPT
    if _BLOCKS_KEPT or not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    libc.mallopt(M_MMAP_THRESHOLD, 1 << 30)
    libc.mallopt(M_TRIM_THRESHOLD, (1 << 31) - 1)
    _BLOCKS_KEPT = True
