#!/usr/bin/env bash
# Set up if needed, then lint and run the whole test suite offline.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
.venv/bin/ruff check mslm_core tests benchmarks
.venv/bin/ruff format --check mslm_core tests benchmarks
.venv/bin/mypy mslm_core
.venv/bin/python -m pytest -q "$@"
