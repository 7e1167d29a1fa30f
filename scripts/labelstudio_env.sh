#!/usr/bin/env bash
# Idempotent: a virtual environment of its own for the real Label Studio server and its SDK,
# which the live test (tests/test_labelstudio_live.py) starts and drives. Never in .venv:
# label-studio pins versions of Django, pydantic and friends that conflict with ours.
#   MSLM_CACHE        where it goes (default: ~/.cache/mslm); the venv is
#                     $MSLM_CACHE/labelstudio-<version>
#   LABEL_STUDIO_SPEC what to install (default: label-studio==1.23.2, which pulls its own
#                     label-studio-sdk pin)
#   PYTHON            interpreter for the venv (default: python3)
# Prints the venv's path on its last line. Exit status 0 only when `label_studio` and
# `label_studio_sdk` import from it.
set -euo pipefail
PYTHON=${PYTHON:-python3}
version=1.23.2
spec=${LABEL_STUDIO_SPEC:-label-studio==$version}
venv=${MSLM_CACHE:-$HOME/.cache/mslm}/labelstudio-$version
ready="$venv/.mslm-ready"

if [ -f "$ready" ] && [ "$(cat "$ready")" = "$spec" ]; then
  echo "$venv"
  exit 0
fi
mkdir -p "$(dirname "$venv")"
# while this runs, "$venv.installing" holds its pid: the live test waits for it (CI starts the
# install in the background, early)
echo $$ > "$venv.installing"
trap 'rm -f "$venv.installing"' EXIT
# a half-made venv (an install that was killed) is made again
rm -rf "$venv"
"$PYTHON" -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q "$spec"
"$venv/bin/python" -c "import label_studio, label_studio_sdk"
echo "$spec" > "$ready"
echo "$venv"
