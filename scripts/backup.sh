#!/usr/bin/env bash
# Back up a running stack (postgres and api up): the database (pg_dump, custom format) and the artifacts volume
# (datasets, model bundles, checkpoints) into one dated archive.
#   cd /opt/mslm && bash scripts/backup.sh /backups      # → /backups/mslm-backup-<UTC time>.tar.gz
# The dump is taken first: bundles are immutable once written, so the artifact copy taken after
# it holds every model the dump lists. Restore with scripts/restore.sh into an empty stack.
set -euo pipefail
# shellcheck source=scripts/compose.sh
. "$(dirname "$0")/compose.sh"
out_dir="${1:-.}"
mkdir -p "$out_dir"
stamp="$(date -u +%Y-%m-%dT%H%M%SZ)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

wait_for_postgres 60
compose exec -T postgres pg_dump -U mslm -d mslm --format=custom > "$work/database.dump"
[ -s "$work/database.dump" ] || { echo "backup: the database dump is empty" >&2; exit 1; }
# the artifacts, read inside the running API container (as the volume's owner, uid 10001;
# `compose run` is not used: Compose v1 against Podman's socket cannot create its container)
compose exec -T api tar -C /var/lib/mslm/artifacts -cf - . > "$work/artifacts.tar"
tar -tf "$work/artifacts.tar" >/dev/null || { echo "backup: the artifact archive is unreadable" >&2; exit 1; }
{
  echo "created: $stamp"
  echo "alembic: $(compose exec -T postgres psql -U mslm -d mslm -Atc 'SELECT version_num FROM alembic_version' | tr -d '\r')"
  echo "database.dump: $(wc -c < "$work/database.dump") bytes"
  echo "artifacts.tar: $(wc -c < "$work/artifacts.tar") bytes, $(tar -tf "$work/artifacts.tar" | wc -l) entries"
} > "$work/MANIFEST"
archive="$out_dir/mslm-backup-$stamp.tar.gz"
tar -C "$work" -czf "$archive.partial" MANIFEST database.dump artifacts.tar
mv "$archive.partial" "$archive"
cat "$work/MANIFEST"
echo "$archive"
