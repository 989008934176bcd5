#!/bin/sh
# Run inside a test-cluster node (scripts/cluster/up.sh): make the node's own copy of REF (a
# repo digest) hold other bytes -- the pinned image with another /opt/flower/build-key --, or
# undo that. Docker trusts a digest it already holds and never pulls it again, so the node's
# tasks then run those bytes: what the per-node drift check must catch.
#   node_drift.sh make REF | node_drift.sh undo REF
# It edits the engine's reference store, so dockerd is restarted (as up.sh starts it).
set -eu
REPOS=/var/lib/docker/image/$(docker info -f '{{.Driver}}')/repositories.json  # the storage driver's own
restart() {
    kill "$(pidof dockerd)"; while pidof dockerd >/dev/null; do sleep 0.2; done
    "$@"
    sh -c "dockerd -H unix:///var/run/docker.sock -H tcp://0.0.0.0:2375 >>/var/log/dockerd.log 2>&1" &
    until docker info >/dev/null 2>&1; do sleep 0.2; done
}
ref=$2
if [ "$1" = make ]; then
    [ ! -e /var/lib/docker/fbdrift.old ] || { echo "node_drift: already made; undo first" >&2; exit 1; }
    docker pull -q "$ref" >/dev/null  # the pinned bytes first, as a task would pull them
    old=$(docker image inspect -f '{{.Id}}' "$ref")
    docker rm -f fbdrift >/dev/null 2>&1 || true
    docker run --name fbdrift "$old" sh -c 'echo other-bytes > /opt/flower/build-key'
    docker commit --change 'CMD ["flower", "--help"]' fbdrift fbdrift:other >/dev/null; docker rm fbdrift >/dev/null
    new=$(docker image inspect -f '{{.Id}}' fbdrift:other)
    echo "$old" > /var/lib/docker/fbdrift.old
    restart sed -i "s#\"$ref\":\"$old\"#\"$ref\":\"$new\"#" "$REPOS"
else
    old=$(cat /var/lib/docker/fbdrift.old)
    new=$(docker image inspect -f '{{.Id}}' fbdrift:other)
    restart sed -i "s#\"$ref\":\"$new\"#\"$ref\":\"$old\"#" "$REPOS"
    # the task containers that ran the other bytes go with them
    docker ps -aq --filter "ancestor=$new" | xargs -r docker rm -f >/dev/null
    docker rmi fbdrift:other >/dev/null
    rm /var/lib/docker/fbdrift.old
fi
docker image inspect -f '{{.Id}}' "$ref"
