# Sourced by up.sh, down.sh and push.sh (after ENV_FILE and PREFIX are set): talk to the engine
# the nodes run on. After `. cluster.env` (what up.sh tells you to do), DOCKER_HOST names the
# manager's engine, inside the cluster, where no node container exists: a `cluster-down` there
# removed nothing and said "down". So when DOCKER_HOST is this cluster's manager, use the
# engine the cluster was made on instead (FLOWER_BATCH_CLUSTER_ENGINE in the env file; empty:
# the local socket).
cluster_manager=""
cluster_engine=""
if [ -f "$ENV_FILE" ]; then
    cluster_manager=$(sed -n 's/^export DOCKER_HOST=//p' "$ENV_FILE")
    cluster_engine=$(sed -n 's/^export FLOWER_BATCH_CLUSTER_ENGINE=//p' "$ENV_FILE")
fi
if [ -n "${DOCKER_HOST:-}" ]; then
    if [ "$DOCKER_HOST" = "$cluster_manager" ] ||
        [ "$(timeout 5 docker info -f '{{.Name}}' 2>/dev/null || true)" = "$PREFIX-manager" ]; then
        if [ -n "$cluster_engine" ]; then export DOCKER_HOST="$cluster_engine"; else unset DOCKER_HOST; fi
        echo "cluster: DOCKER_HOST names $PREFIX's manager; using the engine its nodes run on (${DOCKER_HOST:-the local socket})" >&2
    fi
fi
