#!/bin/sh
# Tear down the test swarm made by up.sh: its nodes (with their engines' data volumes), the
# registry and the network. Only objects carrying this cluster's label are removed.
# Refused (exit 3) while a test session uses the cluster: the session holds $LOCK shared
# (tests/batch_fixtures/swarm_lock.py); CLUSTER_LOCK_HELD=1 says the caller holds it exclusive.
# Each run is logged to $LOG, so a session that loses its cluster can say who took it down.
set -eu
PREFIX=${PREFIX:-fbswarm}
LABEL=org.flower-batch.test-cluster=$PREFIX
here=$(cd "$(dirname "$0")" && pwd)
# the same names as tests/batch_fixtures/swarm.py gives a prefix
[ "$PREFIX" = fbswarm ] && env_name=cluster.env || env_name=cluster-$PREFIX.env
ENV_FILE=${ENV_FILE:-$here/../../images/.cache/$env_name}
LOCK=/tmp/flower-batch-cluster-$PREFIX.lock
LOG=/tmp/flower-batch-cluster-$PREFIX.log
. "$here/host_engine.sh"
who() {  # who ran this script, for the log tests/batch_fixtures/swarm_health.py reports from
    printf '%s %s by pid %s (%s) in %s' "$(date -u +%FT%TZ)" "$(basename "$0")" "$PPID" \
        "$(ps -o args= -p "$PPID" 2>/dev/null | cut -c1-160)" "$(pwd)"
}
if [ "${CLUSTER_LOCK_HELD:-}" != 1 ]; then
    exec 9>>"$LOCK"
    if ! flock -n -x 9; then
        echo "cluster: $PREFIX is in use by a test session (it holds $LOCK; fuser -v $LOCK names it): not taking it down" >&2
        echo "$(who): refused, in use" >> "$LOG"
        exit 3
    fi
fi
echo "$(who): taking $PREFIX down" >> "$LOG"
found=$(docker ps -aq --filter "label=$LABEL") || {
    echo "cluster: the engine at ${DOCKER_HOST:-the local socket} does not answer: nothing removed" >&2
    exit 1
}
if [ -z "$found" ]; then
    echo "cluster: no node of $PREFIX on the engine at ${DOCKER_HOST:-the local socket}: nothing to take down" >&2
fi
for c in $found; do
    name=$(docker inspect -f '{{.Name}}' "$c" | tr -d /)
    docker rm -f "$c" >/dev/null
    docker volume rm "$name-data" >/dev/null 2>&1 || true
    echo "cluster: removed $name" >&2
done
for n in $(docker network ls -q --filter "label=$LABEL"); do docker network rm "$n" >/dev/null; done
rm -f "$ENV_FILE"
[ -z "$found" ] || echo "cluster: down" >&2
