# syntax=docker/dockerfile:1.7
# The worker image: fine-tuning, evaluation and ONNX export on a GPU. CUDA runtime base,
# CUDA PyTorch and onnxruntime-gpu (both built for CUDA 13 on PyPI: the host driver must
# support CUDA 13, i.e. NVIDIA R580 or newer), non-root.
#   docker build -f docker/worker.Dockerfile -t mslm-worker .
# CPU-only variant (docker-compose.cpu.yml builds it):
#   docker build -f docker/worker.Dockerfile --build-arg BASE_IMAGE=ubuntu:24.04 \
#     --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu \
#     --build-arg ONNXRUNTIME=onnxruntime -t mslm-worker-cpu .
ARG BASE_IMAGE=nvidia/cuda:13.0.0-cudnn-runtime-ubuntu24.04

FROM ${BASE_IMAGE} AS build
ARG TORCH_INDEX_URL=""
ARG ONNXRUNTIME=onnxruntime-gpu
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 DEBIAN_FRONTEND=noninteractive
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3.12 python3.12-venv \
    && rm -rf /var/lib/apt/lists/*
RUN python3.12 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
COPY docker/requirements-worker.txt docker/cpu_requirements.py /tmp/
# GPU: the hash-checked lock. CPU variant: PyTorch from its CPU index, the lock's other pins,
# no CUDA wheels, the CPU ONNX Runtime.
RUN if [ -z "$TORCH_INDEX_URL" ]; then \
        pip install --require-hashes --no-deps -r /tmp/requirements-worker.txt; \
    else \
        pip install --index-url "$TORCH_INDEX_URL" "torch==2.13.0" \
        && python /tmp/cpu_requirements.py /tmp/requirements-worker.txt > /tmp/req.txt \
        && pip install -r /tmp/req.txt "${ONNXRUNTIME}==1.31.1"; \
    fi
COPY pyproject.toml README.md /src/
COPY mslm_core /src/mslm_core
COPY api /src/api
COPY worker /src/worker
COPY store /src/store
COPY mslm_settings.py /src/
RUN pip install --no-deps /src && python -m compileall -q /opt/venv/lib

FROM ${BASE_IMAGE}
ENV DEBIAN_FRONTEND=noninteractive
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3.12 \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 mslm \
    && useradd --system --uid 10001 --gid mslm --home-dir /var/lib/mslm --create-home mslm \
    && mkdir -p /var/lib/mslm/artifacts /var/lib/mslm/corpora \
    && chown -R mslm:mslm /var/lib/mslm
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 \
    MSLM_HOME=/var/lib/mslm
USER 10001:10001
WORKDIR /var/lib/mslm
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, sys, time; sys.exit(time.time() - os.path.getmtime('/tmp/mslm-worker.alive') > 60)"]
CMD ["mslm", "worker", "--queues", "train,eval", "--alive-file", "/tmp/mslm-worker.alive"]
