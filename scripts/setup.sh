#!/usr/bin/env bash
# Idempotent set-up: a virtual environment in .venv with PyTorch installed FIRST (so that no
# dependency pulls a multi-GB CUDA build on a CPU machine), then this project with its dev tools.
#   TORCH_SPEC   what to install for torch when none is present (default: torch==2.13.0,
#                the CPU wheel on our machines; GPU users install their CUDA build first)
#   PYTHON       interpreter for the venv (default: python3)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
fi
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  .venv/bin/python -m pip install -q "$TORCH_SPEC"
fi
# Re-install only when the project's requirements changed since the last set-up.
stamp=.venv/.mslm-setup
want=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  .venv/bin/python -m pip install -q -e ".[dev]"
  # pubtator-loader (a PubTator reader the tests check our files with) pins spacy 3.0.5, which
  # no longer builds; it runs with the spacy 3.8 of the dev extra: installed without its pins
  .venv/bin/python -m pip install -q --no-deps "pubtator-loader==0.1.4"
  # medspaCy, for the test that runs our spaCy component beside it (docs/spacy.md): 1.3.1 asks
  # for spacy<3.8 on Python < 3.12 only (>=3.8 on 3.12+, the same code) and would take numpy
  # back to 1.x with it; it runs on the dev extra's spacy 3.8, so it and its own dependencies
  # are installed without their pins
  .venv/bin/python -m pip install -q --no-deps "medspacy==1.3.1" "PyRuSH==1.0.13" \
    "PyFastNER==1.0.10" "quicksectx==0.4.1" "loguru==0.7.3" "pysbd==0.3.4" \
    "medspacy_quickumls==3.2" "medspacy_unqlite==0.9.8" "pysimstring==1.3.0" "Unidecode==1.4.0"
  echo "$want" > "$stamp"
fi
