#!/usr/bin/env bash
# Installs the Debian 12 packages megasim needs, only those missing.
# Why each: OpenMPI (multi-rank runs, distributed sweeps), GSL (fits,
# statistics, random distributions), HDF5 (every result file), gnuplot
# (every figure), cJSON (job and hardware JSON files: small, well kept,
# packaged by Debian), cmake/gcc (the build). CUDA and NCCL come from the
# CUDA Toolkit in /usr/local/cuda when present; nothing here needs them.
set -euo pipefail
pkgs=(build-essential cmake pkg-config libopenmpi-dev openmpi-bin libgsl-dev
      libhdf5-dev hdf5-tools gnuplot-nox libcjson-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "install-deps: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
