#!/usr/bin/env bash
# The deployment, run for real with Docker or Podman: build every image, bring the compose stack
# up from the quick start of docs/deployment.md and walk a user's path through the published
# port (see scripts/compose_smoke.py for every step). Writes its steps, timings and image sizes to
# benchmarks/results/deploy/ (or SMOKE_OUT).
#   bash scripts/compose-smoke.sh                 # Docker if its engine answers, else Podman
# Exit status: 0 passed; 1 our images or stack failed; 3 no container engine can run a
# container on this machine (printed loudly: nothing of ours was tested).
set -euo pipefail
exec python3 "$(dirname "$0")/compose_smoke.py" "$@"
