#!/usr/bin/env bash
# Make (or reuse) a Debian bookworm base image with Python 3.11, a C++ compiler and CMake, from Debian's own
# packages (debootstrap, then docker import), for machines that cannot pull python:3.11-slim or nvidia/cuda.
#
#   docker/debian-base.sh [IMAGE]        IMAGE defaults to qbackends-base:bookworm; prints the image's name
#
# Needs root, debootstrap and a Debian mirror (DEBIAN_MIRROR, default http://deb.debian.org/debian).
set -euo pipefail

image=${1:-qbackends-base:bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
docker=${DOCKER:-docker}

if "$docker" image inspect "$image" >/dev/null 2>&1; then
  echo "$image"
  exit 0
fi
command -v debootstrap >/dev/null || { echo "debian-base.sh: debootstrap is not installed: apt-get install debootstrap" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "debian-base.sh: debootstrap needs root: run it with sudo" >&2; exit 1; }

rootfs=$(mktemp -d /tmp/qbackends-rootfs.XXXXXX)
trap 'rm -rf "$rootfs"' EXIT
# python3-dev and g++/cmake: the simulators' kernels (qbackends-native) and sdists such as sagemaker-training compile
# at image build; libgomp1 (OpenMP) comes with g++ and stays for the kernels at run time.
nice -n 19 debootstrap --variant=minbase \
  --include=python3,python3-venv,python3-dev,g++,cmake,make,ca-certificates \
  bookworm "$rootfs" "$mirror" >&2
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
tar -C "$rootfs" -c . | "$docker" import \
  --change 'ENV LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["/bin/bash"]' - "$image" >&2
echo "$image"
