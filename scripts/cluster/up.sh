#!/bin/sh
# Bring up the test swarm: a registry, a manager and two workers, all Docker-in-Docker nodes on
# one user-defined network made here. Idempotent: a cluster that is already up is reused.
#
#   SHARED   host folder bind-mounted at the same path into every node: the stand-in for NFS
#            (default: ./volumes, flower-batch's default home, and the swarm tests' folder, so
#            the tests can use a cluster made by hand). Several: space-separated.
#   STORAGE  the nodes' storage driver: overlay2 where the kernel mounts an overlay on a node's
#            data volume (the default when it does: a bare service starts in 1.4 s, not 3.1 s,
#            on fuse-overlayfs), else fuse-overlayfs; or vfs.
#
# Prints the lines to eval for using the cluster, and writes them to $ENV_FILE:
#   DOCKER_HOST=tcp://<manager-ip>:2375   (the manager's engine, on the private network only)
#   FLOWER_BATCH_REGISTRY=fbswarm-registry:5000
# Never touches the host engine's swarm state: the swarm lives inside the nodes.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
PREFIX=${PREFIX:-fbswarm}
NETWORK=${NETWORK:-$PREFIX-net}
[ "$PREFIX" = fbswarm ] && tests_dir=/var/tmp/fb-swarm-tests || tests_dir=/var/tmp/$PREFIX-tests
SHARED=${SHARED:-$(pwd)/volumes $tests_dir}  # tests_dir: as tests/batch_fixtures/swarm.py's SHARED
STORAGE=${STORAGE:-}
WORKERS=${WORKERS:-2}
# the same names as tests/batch_fixtures/swarm.py gives a prefix
[ "$PREFIX" = fbswarm ] && env_name=cluster.env || env_name=cluster-$PREFIX.env
ENV_FILE=${ENV_FILE:-$here/../../images/.cache/$env_name}
LOG=/tmp/flower-batch-cluster-$PREFIX.log
who() {  # who ran this script, for the log tests/batch_fixtures/swarm_health.py reports from
    printf '%s %s by pid %s (%s) in %s' "$(date -u +%FT%TZ)" "$(basename "$0")" "$PPID" \
        "$(ps -o args= -p "$PPID" 2>/dev/null | cut -c1-160)" "$(pwd)"
}
NODE_IMAGE=${NODE_IMAGE:-flower-batch-swarm-node:bookworm}
REGISTRY_IMAGE=${REGISTRY_IMAGE:-flower-batch-swarm-registry:bookworm}
REGISTRY=$PREFIX-registry:5000
LABEL=org.flower-batch.test-cluster=$PREFIX
. "$here/host_engine.sh"

"$here/images.sh"

docker network inspect "$NETWORK" >/dev/null 2>&1 ||
    docker network create --label "$LABEL" "$NETWORK" >/dev/null

running() { [ "$(docker inspect -f '{{.State.Running}}' "$1" 2>/dev/null)" = true ]; }

if ! running "$PREFIX-registry"; then
    docker rm -f "$PREFIX-registry" >/dev/null 2>&1 || true
    # Debian's default config asks for htpasswd auth; the test registry is private to the network.
    docker run -d --name "$PREFIX-registry" --label "$LABEL" --network "$NETWORK" \
        -v "$PREFIX-registry-data:/var/lib/docker-registry" "$REGISTRY_IMAGE" sh -c '
printf "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: /var/lib/docker-registry\n  delete:\n    enabled: true\nhttp:\n  addr: :5000\n" > /tmp/config.yml
exec /usr/bin/docker-registry serve /tmp/config.yml' >/dev/null
    echo "$(who): made $PREFIX-registry" >> "$LOG"
fi

mounts=""
for dir in $SHARED; do
    mkdir -p "$dir"
    mounts="$mounts -v $dir:$dir"
done

start_dockerd() {  # NAME
    # 2375 without TLS: reachable only on the private network this script made.
    docker exec -d "$1" sh -c "dockerd -H unix:///var/run/docker.sock -H tcp://0.0.0.0:2375 \
        >/var/log/dockerd.log 2>&1"
}

same_shared() {  # NAME: the node mounts every folder of $SHARED (else it is another checkout's)
    have=" $(docker inspect -f '{{range .Mounts}}{{.Source}} {{end}}' "$1") "
    for dir in $SHARED; do
        case "$have" in *" $dir "*) ;; *) return 1 ;; esac
    done
}

node_storage() {  # NAME: $STORAGE, else overlay2 if an overlay mounts on its data volume
    if [ -n "$STORAGE" ]; then echo "$STORAGE"; return; fi
    # shellcheck disable=SC2016
    if docker exec "$1" sh -c 'p=/var/lib/docker/.overlay-probe; rm -rf $p; mkdir -p $p/l $p/u $p/w $p/m &&
        mount -t overlay overlay -o lowerdir=$p/l,upperdir=$p/u,workdir=$p/w $p/m && umount $p/m
        s=$?; rm -rf $p; exit $s' >/dev/null 2>&1; then
        echo overlay2
    else
        echo fuse-overlayfs
    fi
}

start_node() {  # NAME
    name=$1
    if running "$name"; then
        if ! same_shared "$name"; then
            echo "cluster: $name was made with other shared folders (another checkout's?), not $SHARED:" \
                "take it down first (make cluster-down), or use another PREFIX" >&2
            exit 1
        fi
        # `docker start` of a stopped node brings back the container, not its dockerd (started
        # by exec below, not as the container's command): start it again; the swarm state is
        # on the node's data volume.
        docker exec "$name" docker info >/dev/null 2>&1 || {
            echo "$(who): started dockerd again in $name" >> "$LOG"
            start_dockerd "$name"
        }
        return 0
    fi
    docker rm -f "$name" >/dev/null 2>&1 || true
    # --privileged is refused on this machine (CAP_SYS_RESOURCE is outside the bounding set):
    # every other capability, no seccomp/apparmor, writable /proc/sys, /dev/fuse for fuse-overlayfs.
    # shellcheck disable=SC2086
    docker run -d --name "$name" --hostname "$name" --label "$LABEL" --network "$NETWORK" \
        --cap-add=ALL --cap-drop=SYS_RESOURCE \
        --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
        --security-opt systempaths=unconfined --device /dev/fuse \
        --tmpfs /run --tmpfs /var/run -v /sys/fs/cgroup:/sys/fs/cgroup:rw --cgroupns=host \
        -v "$name-data:/var/lib/docker" $mounts \
        "$NODE_IMAGE" >/dev/null
    echo "$(who): made $name" >> "$LOG"
    storage=$(node_storage "$name")
    echo "$(who): $name stores with $storage" >> "$LOG"
    docker exec -i "$name" sh -c "mkdir -p /etc/docker && cat > /etc/docker/daemon.json" <<JSON
{"storage-driver": "$storage", "insecure-registries": ["$REGISTRY"],
 "cgroup-parent": "/$name", "log-driver": "json-file"}
JSON
    start_dockerd "$name"
}

nodes="$PREFIX-manager"
i=1
while [ "$i" -le "$WORKERS" ]; do nodes="$nodes $PREFIX-worker$i"; i=$((i + 1)); done
for node in $nodes; do start_node "$node"; done
for node in $nodes; do
    t=0
    until docker exec "$node" docker info >/dev/null 2>&1; do
        t=$((t + 1))
        [ "$t" -lt 120 ] || { docker exec "$node" tail -5 /var/log/dockerd.log >&2; echo "cluster: dockerd in $node did not start" >&2; exit 1; }
        sleep 0.5
    done
done

manager_ip=$(docker inspect -f "{{(index .NetworkSettings.Networks \"$NETWORK\").IPAddress}}" "$PREFIX-manager")
state=$(docker exec "$PREFIX-manager" docker info -f '{{.Swarm.LocalNodeState}}')
if [ "$state" != active ]; then
    docker exec "$PREFIX-manager" docker swarm init --advertise-addr "$manager_ip" >/dev/null
fi
token=$(docker exec "$PREFIX-manager" docker swarm join-token -q worker)
for node in $nodes; do
    [ "$node" = "$PREFIX-manager" ] && continue
    if [ "$(docker exec "$node" docker info -f '{{.Swarm.LocalNodeState}}')" != active ]; then
        docker exec "$node" docker swarm join --token "$token" "$manager_ip:2377" >/dev/null
    fi
done
# A node made again (after it was stopped) joins as a new node: forget the one left down.
docker exec "$PREFIX-manager" docker node ls --format '{{.ID}} {{.Status}}' | while read -r id status; do
    if [ "$status" = Down ]; then docker exec "$PREFIX-manager" docker node rm --force "$id" >/dev/null; fi
done
# Node labels, for `placement = ["node.labels.pool==..."]` in jobs.toml.
docker exec "$PREFIX-manager" docker node update --label-add pool=manager "$PREFIX-manager" >/dev/null
i=1
for node in $nodes; do
    [ "$node" = "$PREFIX-manager" ] && continue
    pool=small; [ "$i" = 1 ] && pool=big
    docker exec "$PREFIX-manager" docker node update --label-add pool=$pool "$node" >/dev/null
    i=$((i + 1))
done

mkdir -p "$(dirname "$ENV_FILE")"
printf 'export DOCKER_HOST=tcp://%s:2375\nexport FLOWER_BATCH_REGISTRY=%s\nexport FLOWER_BATCH_CLUSTER_SHARED="%s"\nexport FLOWER_BATCH_CLUSTER_ENGINE=%s\n' \
    "$manager_ip" "$REGISTRY" "$SHARED" "${DOCKER_HOST:-}" > "$ENV_FILE"
docker exec "$PREFIX-manager" docker node ls >&2
storage=$(docker exec "$PREFIX-manager" docker info -f '{{.Driver}}')
echo "cluster: up (storage $storage); use it with:  . $ENV_FILE" >&2
cat "$ENV_FILE"
