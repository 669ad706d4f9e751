#!/usr/bin/env bash
# scripts/gpu-deps.sh: on a Debian 12 development machine (apt reaches the
# Debian mirrors), gather what megasim builds and runs with and a bare GPU
# image lacks (OpenMPI, HDF5, GSL, cJSON, pkg-config) into one relocatable
# folder, default .gpu-deps/ (git-ignored), with an env.sh that points
# compilers, CMake, OpenMPI/PMIx and the loader at it. Carry the folder to
# the GPU machine; scripts/gpu-real.sh and scripts/gpu-calibrate.sh source
# .gpu-deps/env.sh when it is there.
#
#   usage: scripts/gpu-deps.sh [dest]       (default: .gpu-deps)
#
# How: `apt-get download` of the Debian packages below, unpacked with
# `dpkg -x` (nothing is installed on this machine), then every shared
# library the bundle's programs and libraries need (ldd, iterated) that is
# not in the bundle and not in a base every Linux GPU image has (glibc,
# libgcc, libstdc++, zlib) is traced to its Debian package, fetched and
# unpacked too. OpenMPI's plugins for fabrics a one-node run never uses
# (OFI, UCX, verbs, PSM) are left out, which keeps their libraries out;
# docs, man pages and static libraries are dropped. The result is checked:
# every ELF file's libraries resolve inside the bundle or the base, or the
# script fails naming what is missing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:-$root/.gpu-deps}
arch=x86_64-linux-gnu
base_pkgs=" libc6 libgcc-s1 libstdc++6 zlib1g "
pkgs=(libopenmpi3 libopenmpi-dev openmpi-bin openmpi-common libpmix2 libhwloc15
      libevent-core-2.1-7 libevent-pthreads-2.1-7
      libhdf5-103-1 libhdf5-dev hdf5-tools libsz2 libaec0
      libgsl27 libgslcblas0 libgsl-dev libcjson1 libcjson-dev
      pkgconf pkgconf-bin libpkgconf3)
# Plugins for networks other than TCP and shared memory, and their libraries.
skip_plugins='(mca_(btl_ofi|btl_openib|btl_uct|mtl_ofi|mtl_psm|mtl_psm2|pml_ucx|pml_yalla|osc_ucx|atomic_ucx|spml_ucx|sshmem_ucx|coll_hcoll|coll_fca|ras_tm|plm_tm)\.so|libmca_common_(ucx|verbs|ofi)\.so.*)'

command -v apt-get >/dev/null && command -v dpkg >/dev/null ||
  { echo "gpu-deps: needs apt-get and dpkg (a Debian 12 machine)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -rf "$dest"
mkdir -p "$dest/root" "$work/debs"
fetched=" "

fetch() { # package names: download and unpack the ones not yet here
  local p todo=()
  for p in "$@"; do
    [[ $fetched == *" $p "* || $base_pkgs == *" $p "* ]] && continue
    todo+=("$p")
    fetched+="$p "
  done
  [ ${#todo[@]} -eq 0 ] && return 0
  echo "gpu-deps: fetching ${todo[*]}"
  (cd "$work/debs" && apt-get download -q -o APT::Sandbox::User=root "${todo[@]}" >/dev/null)
  for p in "${todo[@]}"; do
    dpkg -x "$work/debs/${p}"_*.deb "$dest/root"
  done
}

prune() {
  rm -rf "$dest/root/usr/share/"{doc,man,info,lintian,bug} "$dest/root/usr/lib/$arch/fortran"
  # OpenMPI's internal headers (for building plugins); mpicc still names the folder
  rm -rf "$dest/root/usr/lib/$arch/openmpi/include/openmpi"
  mkdir -p "$dest/root/usr/lib/$arch/openmpi/include/openmpi"
  find "$dest/root" -name '*.a' -delete
  find "$dest/root" -regextype posix-extended -regex ".*/$skip_plugins" -delete
}

libpath() {
  local u=$dest/root/usr/lib/$arch
  echo "$dest/root/lib/$arch:$u:$u/openmpi/lib:$u/pmix2/lib:$u/hdf5/serial"
}

# Libraries the bundle's ELF files need that resolve outside the bundle:
# prints "LIBNAME PATH" (PATH "not" when nothing provides it).
outside() {
  local f
  find "$dest/root" -type f \( -name '*.so*' -o -perm -u+x \) -print0 |
    while IFS= read -r -d '' f; do
      head -c 4 "$f" 2>/dev/null | grep -q ELF || continue
      LD_LIBRARY_PATH=$(libpath) ldd "$f" 2>/dev/null | awk -v d="$dest/root" '
        $2 == "=>" && $3 == "not" { print $1, "not"; next }
        $2 == "=>" && index($3, d) != 1 { print $1, $3 }'
    done | sort -u
}

# The Debian package that installed a file (usrmerge: /lib and /usr/lib alike).
pkg_of() {
  local p
  p=$(dpkg -S "$1" 2>/dev/null || dpkg -S "/usr$1" 2>/dev/null || dpkg -S "${1#/usr}" 2>/dev/null || true)
  echo "${p%%:*}"
}

fetch "${pkgs[@]}"
prune
for round in 1 2 3 4 5 6; do
  need=()
  while read -r lib path; do
    [ "$path" = not ] && continue
    p=$(pkg_of "$path")
    [ -n "$p" ] && need+=("$p")
  done < <(outside)
  [ ${#need[@]} -eq 0 ] && break
  mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
  before=$fetched
  fetch "${need[@]}"
  prune
  [ "$before" = "$fetched" ] && break
done

# Debian reaches mpicc and mpirun through update-alternatives; here, links.
for t in mpicc mpirun mpiexec; do ln -sf "$t.openmpi" "$dest/root/usr/bin/$t"; done

# Check: nothing unresolved, and nothing outside the bundle but the base.
bad=$(outside | while read -r lib path; do
  [ "$path" = not ] && { echo "$lib (not found)"; continue; }
  p=$(pkg_of "$path")
  [[ $base_pkgs == *" $p "* ]] || echo "$lib ($path, package ${p:-unknown})"
done)
if [ -n "$bad" ]; then
  echo "gpu-deps: libraries still outside the bundle:" >&2
  echo "$bad" | sed 's/^/  - /' >&2
  exit 1
fi

# NCCL's header, when this machine has one (the CUDA Toolkit's): a GPU image
# may carry NCCL only as PyTorch's wheel, and a wheel may lack headers.
# Headers only; the library is the GPU machine's own (scripts/gpu-session.sh).
for h in /usr/local/cuda/include/nccl.h /usr/include/nccl.h; do
  [ -r "$h" ] && { mkdir -p "$dest/nccl/include"; cp "$h" "$dest/nccl/include/"; break; }
done

# Debian's files name /usr: env.sh relocates OpenMPI (OPAL_PREFIX, which
# mpicc and mpirun honour) and PMIx, points pkg-config's sysroot at the
# bundle so the .pc files' /usr paths land inside it, and hands CMake the
# paths its FindGSL and FindHDF5 would not guess (MEGASIM_CMAKE_DEPS).
cat > "$dest/env.sh" <<'EOF'
# .gpu-deps/env.sh: source it (bash) to build and run megasim against this
# bundle (written by scripts/gpu-deps.sh).
_d=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/root
_a=x86_64-linux-gnu
# what LD_LIBRARY_PATH was before: PyTorch runs on the image's own libraries
export MEGASIM_BASE_LD_LIBRARY_PATH="${MEGASIM_BASE_LD_LIBRARY_PATH-${LD_LIBRARY_PATH:-}}" # kept from the first source
export PATH="$_d/usr/bin:$PATH"
export LD_LIBRARY_PATH="$_d/lib/$_a:$_d/usr/lib/$_a:$_d/usr/lib/$_a/openmpi/lib:$_d/usr/lib/$_a/pmix2/lib:$_d/usr/lib/$_a/hdf5/serial${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LIBRARY_PATH="$_d/usr/lib/$_a${LIBRARY_PATH:+:$LIBRARY_PATH}"
export CPATH="$_d/usr/include:$_d/usr/include/hdf5/serial${CPATH:+:$CPATH}"
export OPAL_PREFIX="$_d/usr"
export PMIX_INSTALL_PREFIX="$_d/usr/lib/$_a/pmix2"
export PMIX_MCA_mca_base_component_path="$_d/usr/lib/$_a/pmix2/lib/pmix"
export PKG_CONFIG_SYSROOT_DIR="$_d"
export PKG_CONFIG_LIBDIR="$_d/usr/lib/$_a/pkgconfig:$_d/usr/share/pkgconfig"
export PKG_CONFIG="$_d/usr/bin/pkgconf"
export MPI_HOME="$_d/usr/lib/$_a/openmpi"
export HDF5_ROOT="$_d/usr/lib/$_a/hdf5/serial"
export MEGASIM_CMAKE_DEPS="-DMPI_C_COMPILER=$_d/usr/bin/mpicc -DGSL_ROOT_DIR=$_d/usr -DGSL_INCLUDE_DIR=$_d/usr/include -DGSL_LIBRARY=$_d/usr/lib/$_a/libgsl.so -DGSL_CBLAS_LIBRARY=$_d/usr/lib/$_a/libgslcblas.so -DPKG_CONFIG_EXECUTABLE=$_d/usr/bin/pkgconf"
unset _d _a
EOF
du -sh "$dest" | awk '{print "gpu-deps: " $2 " holds " $1}'
echo "gpu-deps: packages: $(echo $fetched | wc -w) (${fetched# })"
echo "gpu-deps: on the GPU machine: source .gpu-deps/env.sh (the gpu-*.sh scripts do it themselves)"
