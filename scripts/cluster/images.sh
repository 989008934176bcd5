#!/bin/sh
# Make (or reuse) the two images the test cluster is built from, with no registry:
#   flower-batch-swarm-node:bookworm      Debian + docker.io + fuse-overlayfs (a Docker-in-Docker node)
#   flower-batch-swarm-registry:bookworm  Debian's docker-registry 2.8
# Each is `debootstrap --variant=minbase` + `docker import`, like the runtime's base image
# (flower_batch/running/image.py); an existing tag is reused, so this costs nothing the second time.
set -eu
PATH=$PATH:/usr/sbin:/sbin
NODE_IMAGE=${NODE_IMAGE:-flower-batch-swarm-node:bookworm}
REGISTRY_IMAGE=${REGISTRY_IMAGE:-flower-batch-swarm-registry:bookworm}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
CACHE=${CACHE:-$(dirname "$0")/../../images/.cache}

make_image() {  # TAG PACKAGES CMD
    tag=$1 packages=$2 cmd=$3
    if docker image inspect "$tag" >/dev/null 2>&1; then
        echo "cluster: reusing $tag"; return
    fi
    [ "$(id -u)" = 0 ] || { echo "cluster: debootstrap needs root (run with sudo)" >&2; exit 2; }
    command -v debootstrap >/dev/null || { echo "cluster: debootstrap is not installed (apt-get install debootstrap)" >&2; exit 2; }
    mkdir -p "$CACHE"
    root=$(mktemp -d "$CACHE/rootfs-cluster.XXXXXX")
    trap 'rm -rf "$root"' EXIT
    echo "cluster: making $tag with debootstrap ($packages)"
    t0=$(date +%s)
    debootstrap --variant=minbase --include="$packages" bookworm "$root" "$MIRROR" >/dev/null
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/*.log
    : > "$root"/etc/resolv.conf
    : > "$root"/etc/hostname
    t1=$(date +%s)
    tar -C "$root" -c . | docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change "CMD $cmd" - "$tag" >/dev/null
    rm -rf "$root"; trap - EXIT
    echo "cluster: $tag made (debootstrap $((t1 - t0)) s, import $(($(date +%s) - t1)) s)"
}

make_image "$NODE_IMAGE" docker.io,iptables,ca-certificates,procps,fuse-overlayfs '["/bin/sleep","infinity"]'
make_image "$REGISTRY_IMAGE" docker-registry,ca-certificates \
    '["/usr/bin/docker-registry","serve","/etc/docker/registry/config.yml"]'
