#!/bin/sh
# Make a minimal Debian root filesystem for the flower-batch base image, for machines
# that cannot pull one from a registry. Usage: mkrootfs.sh DIR [SUITE] [MIRROR]
# The result is imported with:  tar -C DIR -c . | docker import - flower-batch-base:bookworm-2
# (flower_batch.running.image.build_image does both steps and skips them when the tag exists.)
set -eu
dir=${1:?usage: mkrootfs.sh DIR [SUITE] [MIRROR]}
suite=${2:-bookworm}
mirror=${3:-http://deb.debian.org/debian}

if [ "$(id -u)" != 0 ]; then
    echo "mkrootfs.sh: debootstrap needs root (run with sudo)" >&2; exit 2
fi
command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || {
    echo "mkrootfs.sh: debootstrap is not installed (apt-get install debootstrap)" >&2; exit 2; }
PATH=$PATH:/usr/sbin:/sbin

# python3 (3.11 in bookworm) + venv for the runtime's virtualenv, git for workflows,
# ca-certificates for the gateway's TLS upstream, patchelf to make the runtime's Python
# self-contained (images/runtime/relocate-python.sh).
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates,git,patchelf \
    "$suite" "$dir" "$mirror"

# Shrink: package caches and lists are useless in an image that never runs apt offline.
rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/* "$dir"/var/log/*.log
# The host's resolver config leaks in through debootstrap; Docker supplies its own.
: > "$dir"/etc/resolv.conf
: > "$dir"/etc/hostname
