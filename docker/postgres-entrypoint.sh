#!/bin/sh
# The first start initialises the cluster the way the official image does (a superuser
# POSTGRES_USER with the password from POSTGRES_PASSWORD_FILE, the database POSTGRES_DB,
# password authentication over TCP); later starts only run the server.
set -eu
: "${PGDATA:=/var/lib/postgresql/data}"
: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    if [ -n "${POSTGRES_PASSWORD_FILE:-}" ]; then
        password="$(cat "$POSTGRES_PASSWORD_FILE")"
    else
        password="${POSTGRES_PASSWORD:-}"
    fi
    if [ -z "$password" ]; then
        echo "postgres: no password: set POSTGRES_PASSWORD_FILE (a secret) or POSTGRES_PASSWORD" >&2
        exit 1
    fi
    pwfile="$(mktemp)"
    printf '%s' "$password" > "$pwfile"
    initdb --pgdata="$PGDATA" --username="$POSTGRES_USER" --pwfile="$pwfile" \
        --auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
    if [ "$POSTGRES_DB" != postgres ]; then
        pg_ctl --pgdata="$PGDATA" --options="-c listen_addresses=''" --wait start
        createdb --username="$POSTGRES_USER" "$POSTGRES_DB"
        pg_ctl --pgdata="$PGDATA" --mode=fast --wait stop
    fi
fi
if [ "${1:-}" = postgres ]; then
    shift
    exec postgres -D "$PGDATA" -c listen_addresses='*' "$@"
fi
exec "$@"
