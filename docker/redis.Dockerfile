# syntax=docker/dockerfile:1.7
# Redis from Debian's packages, for sites that cannot pull the official `redis` image: runs as
# the `redis` user with its data in /data, like the official image. Select it with
# MSLM_REDIS_IMAGE (see .env.example).
#   docker build -f docker/redis.Dockerfile -t mslm-redis:7 .
ARG BASE_IMAGE=debian:12.7-slim

FROM ${BASE_IMAGE} AS packages
ENV DEBIAN_FRONTEND=noninteractive
# the user first, with the official image's ids (999), so that the package keeps it
# hadolint ignore=DL3008
RUN groupadd --system --gid 999 redis \
    && useradd --system --uid 999 --gid redis --home-dir /var/lib/redis --shell /bin/sh redis \
    && apt-get update \
    && apt-get install -y --no-install-recommends redis-server \
    && rm -rf /var/lib/apt/lists/* /usr/share/doc /usr/share/man \
    && mkdir -p /data \
    && chown redis:redis /data

FROM packages
USER 999:999
WORKDIR /data
EXPOSE 6379
HEALTHCHECK --interval=10s --timeout=3s --retries=5 CMD ["redis-cli", "ping"]
CMD ["redis-server", "--protected-mode", "no"]
