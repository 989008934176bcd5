#!/bin/sh
# Put the host's runtime image into the test swarm: load it into the manager's engine (the host
# engine cannot push to the cluster's plain-HTTP registry), then `flower-batch image push` from
# there, which records the repo digest every node runs. Skips the load when the manager has it.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
PREFIX=${PREFIX:-fbswarm}
# the same names as tests/batch_fixtures/swarm.py gives a prefix
[ "$PREFIX" = fbswarm ] && env_name=cluster.env || env_name=cluster-$PREFIX.env
ENV_FILE=${ENV_FILE:-$here/../../images/.cache/$env_name}
IMAGE=${IMAGE:-flower-batch-runtime:latest}
FB=${FB:-$here/../../.venv/bin/flower-batch}
[ -f "$ENV_FILE" ] || { echo "cluster: not up (no $ENV_FILE): run make cluster-up" >&2; exit 2; }
. "$here/host_engine.sh"
host=${DOCKER_HOST:-unix:///var/run/docker.sock}  # the engine the image was built on
id=$(docker image inspect -f '{{.Id}}' "$IMAGE")
. "$ENV_FILE"
if [ "$(docker image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null || true)" != "$id" ]; then
    echo "cluster: loading $IMAGE ($id) into the manager" >&2
    DOCKER_HOST=$host docker save "$IMAGE" | docker load >/dev/null
fi
"$FB" image push "$FLOWER_BATCH_REGISTRY" --image "$id"
