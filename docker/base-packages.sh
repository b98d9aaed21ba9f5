#!/usr/bin/env bash
# Run inside an image build: install, from the base's own apt sources, only what the base lacks, then make the
# virtual environment /opt/venv (Debian's and Ubuntu's Python refuse pip installs outside one).
#   build: Python with its headers and venv, g++, cmake (the simulators' kernels and C extensions compile)
#   run:   Python with venv, and OpenMP's runtime (libgomp1) for the kernels
set -euo pipefail
mode=${1:?usage: base-packages.sh build|run}
need=()
if ! command -v python3 >/dev/null; then
  need+=(python3 python3-venv)
elif ! python3 -m venv /tmp/venv-probe >/dev/null 2>&1; then
  need+=(python3-venv)
fi
rm -rf /tmp/venv-probe
if [ "$mode" = build ]; then
  python3 -c 'import os, sys, sysconfig; sys.exit(not os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
    2>/dev/null || need+=(python3-dev)
  command -v g++ >/dev/null || need+=(g++)
  command -v cmake >/dev/null || need+=(cmake make)
else
  ldconfig -p | grep -q 'libgomp\.so\.1' || need+=(libgomp1)
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "base-packages.sh: installing ${need[*]}"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}"
  rm -rf /var/lib/apt/lists/*
fi
python3 -m venv /opt/venv
