#!/usr/bin/env bash
# Restore a backup (scripts/backup.sh) into an EMPTY stack — new volumes, e.g. on a new server,
# or after `docker compose down -v` — then start it:
#   cd /opt/mslm && bash scripts/restore.sh /backups/mslm-backup-2026-11-25T101500Z.tar.gz
# It refuses a database that already holds tables: nothing is overwritten.
set -euo pipefail
# shellcheck source=scripts/compose.sh
. "$(dirname "$0")/compose.sh"
archive="${1:?usage: restore.sh ARCHIVE (from scripts/backup.sh)}"
[ -f "$archive" ] || { echo "restore: no such file: $archive" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tar -C "$work" -xzf "$archive" MANIFEST database.dump artifacts.tar \
  || { echo "restore: $archive is not a backup of this stack (MANIFEST, database.dump, artifacts.tar)" >&2; exit 1; }
cat "$work/MANIFEST"

compose up -d postgres
wait_for_postgres 120
tables="$(compose exec -T postgres psql -U mslm -d mslm -Atc \
  "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'" | tr -d '\r')"
if [ "$tables" != 0 ]; then
  echo "restore: the database already holds $tables tables; restore wants an empty stack" >&2
  echo "  (a new install, or 'docker compose down -v' — which deletes the current data)" >&2
  exit 1
fi
compose exec -T postgres pg_restore -U mslm -d mslm --no-owner --exit-on-error < "$work/database.dump"
# the artifacts, written inside the API container (as the volume's owner, uid 10001) before
# any worker starts; the schema is already at the dump's revision
compose up -d --no-deps api
deadline=$((SECONDS + 120))
until compose exec -T api true >/dev/null 2>&1; do
  [ $SECONDS -lt $deadline ] || { echo "restore: the api container did not start" >&2; exit 1; }
  sleep 2
done
compose exec -T api tar -C /var/lib/mslm/artifacts -xf - < "$work/artifacts.tar"
# the API looked for its served model before the bundles were back: start it again
compose restart api
compose up -d
echo "restored $archive"
