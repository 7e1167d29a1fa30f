#!/usr/bin/env bash
# Set up if needed, then run the main job: fine-tune the default MiniLM encoder on
# NCBI-disease and write a model bundle. Any arguments replace the defaults below
# (they are passed to `mslm train`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
DATA=${MSLM_DATA:-../shared/data}/NCBI-disease-IOB
if [ "$#" -eq 0 ]; then
  set -- --train "$DATA/train.tsv" --dev "$DATA/devel.tsv" --test "$DATA/test.tsv" \
         --epochs 3 --output runs/ncbi-disease --overwrite
fi
exec .venv/bin/mslm train "$@"
