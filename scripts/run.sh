#!/usr/bin/env bash
# Set up if needed, then run the main job: the service with its embedded default (`mslm up`:
# the API and one worker, SQLite and a filesystem broker in MSLM_HOME — no Redis, no
# PostgreSQL). On a fresh install it trains the clinical model (its four corpora from the
# corpus cache, fetched at pinned commits when GitHub is reachable: `mslm corpora fetch
# clinical`), or falls back on BC5CDR (chemicals and diseases; from MSLM_DATA, the folder of
# the BLURB IOB corpora, by default the checkout's sibling shared/data),
# saying why; the model is served as soon as it is ready; the admin API key is printed once.
# Any arguments are passed to `mslm up` instead of the defaults below.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export MSLM_HOME=${MSLM_HOME:-$PWD/.mslm/home}
DATA=${MSLM_DATA:-$(dirname "$PWD")/shared/data}/BC5CDR-IOB
if [ "$#" -eq 0 ]; then
  set -- --host 127.0.0.1 --port "${MSLM_PORT:-8000}" --bootstrap auto --bootstrap-data "$DATA"
fi
exec .venv/bin/mslm up "$@"
