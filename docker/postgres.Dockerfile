# syntax=docker/dockerfile:1.7
# PostgreSQL from Debian's packages, for sites that cannot pull the official `postgres` image
# (no registry, or one that mirrors only Debian): the same contract as the official image for
# what docker-compose.yml uses — POSTGRES_USER, POSTGRES_DB, POSTGRES_PASSWORD_FILE, data in
# /var/lib/postgresql/data, pg_isready. Select it with MSLM_POSTGRES_IMAGE (see .env.example).
# A data volume belongs to one PostgreSQL major version: pick an image and keep it.
#   docker build -f docker/postgres.Dockerfile -t mslm-postgres:15 .
ARG BASE_IMAGE=debian:12.7-slim

FROM ${BASE_IMAGE} AS packages
ENV DEBIAN_FRONTEND=noninteractive
# the user first, with the official image's ids (999), so that the package keeps it
# hadolint ignore=DL3008
RUN groupadd --system --gid 999 postgres \
    && useradd --system --uid 999 --gid postgres --home-dir /var/lib/postgresql --shell /bin/sh postgres \
    && apt-get update \
    && apt-get install -y --no-install-recommends postgresql-15 \
    && rm -rf /var/lib/apt/lists/* /usr/share/doc /usr/share/man \
    && mkdir -p /var/lib/postgresql/data /var/run/postgresql \
    && chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql \
    && chmod 700 /var/lib/postgresql/data

FROM packages
COPY --chmod=0755 docker/postgres-entrypoint.sh /usr/local/bin/postgres-entrypoint
ENV PATH=/usr/lib/postgresql/15/bin:$PATH PGDATA=/var/lib/postgresql/data
USER 999:999
EXPOSE 5432
STOPSIGNAL SIGINT
HEALTHCHECK --interval=10s --timeout=3s --retries=5 CMD ["pg_isready", "-h", "127.0.0.1"]
ENTRYPOINT ["postgres-entrypoint"]
CMD ["postgres"]
