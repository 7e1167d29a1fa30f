#!/usr/bin/env bash
# Carry the stack's images to a machine with no registry (air-gapped install):
#   bash scripts/images.sh save mslm-images.tar      # on the build machine, beside .env
#   (copy mslm-images.tar and the repository over)
#   bash scripts/images.sh load mslm-images.tar      # on the target; then docker compose up -d
# `save` writes every image the stack's compose file names (with .env's choices) that exists
# here: the API image, the worker of the chosen profile, Redis and PostgreSQL.
set -euo pipefail
# shellcheck source=scripts/compose.sh
. "$(dirname "$0")/compose.sh"
action="${1:?usage: images.sh save|load FILE}"
file="${2:?usage: images.sh save|load FILE}"
case "$action" in
  save)
    images=()
    while read -r image; do
      if $ENGINE image inspect "$image" >/dev/null 2>&1; then
        images+=("$image")
      else
        echo "not here, left out: $image" >&2
      fi
    done < <(compose config | sed -n 's/^ *image: *//p' | tr -d "'\"" | sort -u)
    [ ${#images[@]} -gt 0 ] || { echo "no image of the stack is here: build them first" >&2; exit 1; }
    if [ "$ENGINE" = podman ]; then
      podman save --multi-image-archive --output "$file.partial" "${images[@]}"
    else
      docker save --output "$file.partial" "${images[@]}"
    fi
    mv "$file.partial" "$file"
    printf 'saved %s\n' "${images[@]}"
    ;;
  load)
    $ENGINE load --input "$file"
    ;;
  *)
    echo "usage: images.sh save|load FILE" >&2
    exit 2
    ;;
esac
