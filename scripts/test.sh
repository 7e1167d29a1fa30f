#!/usr/bin/env bash
# Set up if needed, then lint, type-check and run the whole test suite offline. The service
# tests use the local Redis (6379) and PostgreSQL (5432) when they answer (.ci/run starts
# them and makes their absence a failure).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
.venv/bin/ruff check mslm_core mslm_client api worker store mslm_settings.py tests benchmarks docker scripts
.venv/bin/ruff format --check mslm_core mslm_client api worker store mslm_settings.py tests benchmarks docker scripts
.venv/bin/mypy mslm_core mslm_client api worker store mslm_settings.py benchmarks/harness
# -rs: every skipped test and its reason in the summary (a skip is never silent)
.venv/bin/python -m pytest -q -rs --durations=15 "$@"
