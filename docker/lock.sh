#!/usr/bin/env bash
# Compile the images' hash-checked locks with uv, for the images' Python (3.11) on x86_64
# (manylinux_2_28). Existing pins are kept unless --upgrade is passed; the images install
# exactly these files (pip --require-hashes --no-deps) and `pip check` them. The GPU worker's
# lock comes first and constrains the others: a package two images run has one version in
# both (tests/test_deployment.py checks it).
#   bash docker/lock.sh                      # worker-gpu, then api and worker-cpu
#   bash docker/lock.sh worker-gpu --upgrade && bash docker/lock.sh api worker-cpu
# The CPU worker's torch (2.13.0+cpu) lives on PyTorch's CPU index; TORCH_CPU_WHEELS=DIR takes it
# from a folder of wheels instead (the same file, so the same sha256).
set -euo pipefail
cd "$(dirname "$0")"
targets=()
extra=()
for arg in "$@"; do
  case "$arg" in
    api | worker-gpu | worker-cpu) targets+=("$arg") ;;
    *) extra+=("$arg") ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(worker-gpu api worker-cpu)
command -v uv >/dev/null || { echo "uv is needed: pip install uv" >&2; exit 1; }
constraints="constraints-from-worker-gpu.txt"
trap 'rm -f "$constraints"' EXIT
for target in "${targets[@]}"; do
  source=()
  if [ "$target" != worker-gpu ]; then
    # the GPU lock's pins, but PyTorch's build, its CUDA wheels and ONNX Runtime
    sed -n 's/^\([a-z0-9][^ ]*==[^ ]*\) .*/\1/p' requirements-worker-gpu.txt \
      | grep -v -E '^(torch|triton|onnxruntime-gpu|nvidia-|cuda-)' > "$constraints"
    source+=(--constraint "$constraints")
  fi
  if [ "$target" = worker-cpu ]; then
    if [ -n "${TORCH_CPU_WHEELS:-}" ]; then
      source+=(--find-links "$TORCH_CPU_WHEELS")
    else
      source+=(--extra-index-url https://download.pytorch.org/whl/cpu --index-strategy unsafe-best-match)
    fi
  fi
  uv pip compile "requirements-$target.in" --python-version 3.11 \
    --python-platform x86_64-manylinux_2_28 --generate-hashes --no-header --quiet \
    "${source[@]}" "${extra[@]}" -o "requirements-$target.txt"
  {
    printf '# Compiled by docker/lock.sh (uv pip compile, Python 3.11, x86_64-manylinux_2_28) from\n'
    printf '# requirements-%s.in: edit that file and run `bash docker/lock.sh %s`.\n' "$target" "$target"
    grep -v -e '^#' -e '--find-links' -e '--extra-index-url' "requirements-$target.txt"
  } > "requirements-$target.txt.new"
  mv "requirements-$target.txt.new" "requirements-$target.txt"
  echo "requirements-$target.txt: $(grep -c '==' "requirements-$target.txt") pins"
done
