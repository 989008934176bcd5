#!/bin/sh
# Tear down the test swarm made by up.sh: its nodes (with their engines' data volumes), the
# registry and the network. Only objects carrying this cluster's label are removed.
set -eu
PREFIX=${PREFIX:-fbswarm}
LABEL=org.flower-batch.test-cluster=$PREFIX
here=$(cd "$(dirname "$0")" && pwd)
ENV_FILE=${ENV_FILE:-$here/../../images/.cache/cluster.env}
for c in $(docker ps -aq --filter "label=$LABEL"); do
    name=$(docker inspect -f '{{.Name}}' "$c" | tr -d /)
    docker rm -f "$c" >/dev/null
    docker volume rm "$name-data" >/dev/null 2>&1 || true
    echo "cluster: removed $name" >&2
done
for n in $(docker network ls -q --filter "label=$LABEL"); do docker network rm "$n" >/dev/null; done
rm -f "$ENV_FILE"
echo "cluster: down" >&2
