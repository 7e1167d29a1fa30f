# Sourced by the operator scripts (backup.sh, restore.sh, images.sh): picks the container engine
# and the compose command the way an operator would, unless ENGINE / COMPOSE say otherwise.
#   ENGINE=podman COMPOSE="podman-compose" bash scripts/backup.sh
# Run them from the folder that holds the stack's docker-compose.yml and .env.

if [ -z "${ENGINE:-}" ]; then
  if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
    ENGINE=docker
  elif command -v podman >/dev/null 2>&1; then
    ENGINE=podman
  else
    echo "no container engine: install Docker or Podman (or set ENGINE)" >&2
    exit 1
  fi
fi
if [ -z "${COMPOSE:-}" ]; then
  if docker compose version >/dev/null 2>&1; then
    COMPOSE="docker compose"
  elif command -v docker-compose >/dev/null 2>&1; then
    COMPOSE="docker-compose"
  elif command -v podman-compose >/dev/null 2>&1; then
    COMPOSE="podman-compose"
  else
    echo "no compose command: install Docker Compose (or set COMPOSE)" >&2
    exit 1
  fi
fi

compose() {
  # shellcheck disable=SC2086  # COMPOSE is a command line, e.g. "docker compose"
  $COMPOSE "$@"
}

# wait until PostgreSQL in the stack answers (at most $1 seconds, default 120)
wait_for_postgres() {
  local deadline=$((SECONDS + ${1:-120}))
  until compose exec -T postgres pg_isready -U mslm -d mslm >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then
      echo "PostgreSQL did not answer within ${1:-120} s (docker compose logs postgres)" >&2
      return 1
    fi
    sleep 2
  done
}
