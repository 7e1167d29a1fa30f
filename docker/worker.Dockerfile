# syntax=docker/dockerfile:1.7
# The worker image: fine-tuning, evaluation and ONNX export. The same slim Debian Python base as
# the API image; CPU or GPU is a build argument, each installed from its hash-checked lock:
#   docker build -f docker/worker.Dockerfile -t mslm-worker .                        # GPU
#   docker build -f docker/worker.Dockerfile --build-arg VARIANT=cpu -t mslm-worker-cpu .
# GPU: PyPI's CUDA torch carries the CUDA runtime and cuDNN as nvidia-* wheels, and
# onnxruntime-gpu loads them from there: no CUDA base image, only a host driver that supports
# CUDA 13 (NVIDIA R580 or newer) and the NVIDIA container toolkit. CPU: PyTorch's CPU wheel from
# its CPU index (TORCH_INDEX_URL), or from docker/wheels/ when that folder holds it (a build with
# no route to download.pytorch.org: the lock's sha256 still checks it).
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ARG VARIANT=gpu
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
# a CA bundle for pip behind a TLS-inspecting proxy (a build argument: not kept in the image)
ARG PIP_CERT
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
# the locked runtime first (a layer that changes only with the lock file)
COPY docker/requirements-worker-${VARIANT}.txt /tmp/requirements.txt
COPY docker/wheels/ /tmp/wheels/
RUN if [ "$VARIANT" != gpu ] && [ "$VARIANT" != cpu ]; then \
        echo "VARIANT must be gpu or cpu, not '$VARIANT'" >&2; exit 1; \
    fi \
    && if [ "$VARIANT" = cpu ] && [ -n "$TORCH_INDEX_URL" ] \
        && ! ls /tmp/wheels/torch-*+cpu-*.whl >/dev/null 2>&1; then \
        export PIP_EXTRA_INDEX_URL="$TORCH_INDEX_URL"; \
    fi \
    && pip install --require-hashes --no-deps --find-links /tmp/wheels -r /tmp/requirements.txt \
    && pip check \
    && rm -rf /tmp/wheels
# then the project itself
COPY pyproject.toml README.md /src/
COPY mslm_core /src/mslm_core
COPY api /src/api
COPY worker /src/worker
COPY store /src/store
COPY mslm_settings.py /src/
# (torch's own test helpers hold Python 3.12 syntax: not compiled, never imported here)
RUN pip install --no-deps /src \
    && python -m compileall -q -x 'torch/testing/_internal/' /opt/venv/lib

FROM ${PYTHON_IMAGE}
ARG VARIANT=gpu
LABEL org.opencontainers.image.title="mslm-worker" \
      org.opencontainers.image.description="MSLM fine-tuning worker (${VARIANT})"
RUN groupadd --system --gid 10001 mslm \
    && useradd --system --uid 10001 --gid mslm --home-dir /var/lib/mslm --create-home mslm \
    && mkdir -p /var/lib/mslm/artifacts /var/lib/mslm/corpora \
    && chown -R mslm:mslm /var/lib/mslm
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 \
    MSLM_HOME=/var/lib/mslm \
    MSLM_WORKER_VARIANT=${VARIANT}
USER 10001:10001
WORKDIR /var/lib/mslm
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, sys, time; sys.exit(time.time() - os.path.getmtime('/tmp/mslm-worker.alive') > 60)"]
CMD ["mslm", "worker", "--queues", "train,eval", "--alive-file", "/tmp/mslm-worker.alive"]
