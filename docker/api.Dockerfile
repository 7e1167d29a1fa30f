# syntax=docker/dockerfile:1.7
# The API image: the FastAPI service and `mslm migrate`. CPU ONNX Runtime, no PyTorch, no
# transformers (serving imports neither; tested), no compilers in the final stage, non-root.
#   docker build -f docker/api.Dockerfile -t mslm-api .
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
# a CA bundle for pip behind a TLS-inspecting proxy (a build argument: not kept in the image)
ARG PIP_CERT
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
# the locked runtime first (a layer that changes only with the lock file)
COPY docker/requirements-api.txt /tmp/requirements-api.txt
RUN pip install --require-hashes --no-deps -r /tmp/requirements-api.txt
# then the project itself, without its training dependencies
COPY pyproject.toml README.md /src/
COPY mslm_core /src/mslm_core
COPY api /src/api
COPY worker /src/worker
COPY store /src/store
COPY mslm_settings.py /src/
RUN pip install --no-deps /src && python -m compileall -q /opt/venv/lib

FROM ${PYTHON_IMAGE}
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 \
    MSLM_HOME=/var/lib/mslm
RUN groupadd --system --gid 10001 mslm \
    && useradd --system --uid 10001 --gid mslm --home-dir /var/lib/mslm --create-home mslm \
    && mkdir -p /var/lib/mslm/artifacts /var/lib/mslm/corpora \
    && chown -R mslm:mslm /var/lib/mslm
COPY --from=build /opt/venv /opt/venv
USER 10001:10001
WORKDIR /var/lib/mslm
EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]
CMD ["mslm", "serve", "--host", "0.0.0.0", "--port", "8000"]
