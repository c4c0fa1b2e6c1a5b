#!/usr/bin/env bash
# What a GPU node needs for `deno task train --device cuda` beyond the NVIDIA driver: nvcc and the
# CUDA runtime's headers, so that `make build` builds build/libdtrain_cuda.so, and the cuBLAS and
# NCCL libraries that library opens at run time (it links neither). Installs only what is missing,
# for the CUDA version of the image (CUDA_VERSION, as NVIDIA's images set it) or else of the driver
# (nvidia-smi), and says what it found. Every recipe runs it before `make build`: cloud-init's
# setup-node.sh, the Kubernetes image's Dockerfile, and once per cluster for SLURM.
#
#   infrastructure/install-gpu-libs.sh              as root: from NVIDIA's CUDA apt repository
#                                                    (added when the packages are not found)
#   infrastructure/install-gpu-libs.sh --wheels DIR  no root needed: cuBLAS and NCCL from NVIDIA's
#       Python wheels into a venv at DIR; with DIR/bin first on PATH, dtrain finds them (it looks in
#       the site-packages of the python3 on PATH). nvcc then comes from the cluster (module load cuda).
#
# DTRAIN_CUDA_VERSION=12.4 chooses the CUDA version. CUDA_HOME is the toolkit's folder, where nvcc
# is looked for when it is not on PATH (default /usr/local/cuda, where `make build` looks too).
set -euo pipefail

CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}

log() { echo "install-gpu-libs: $*" >&2; }
die() {
  log "$*"
  exit 1
}

# The CUDA version to install for, as "MAJOR.MINOR": asked for, the image's, the driver's, or nvcc's.
cuda_version() {
  local v=${DTRAIN_CUDA_VERSION:-${CUDA_VERSION:-}}
  if [[ -z $v ]] && command -v nvidia-smi >/dev/null; then
    v=$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9][0-9.]*\).*/\1/p' | sed -n 1p)
  fi
  if [[ -z $v ]] && [[ -n $(find_nvcc) ]]; then
    v=$("$(find_nvcc)" --version | sed -n 's/.*release \([0-9][0-9.]*\).*/\1/p')
  fi
  [[ $v =~ ^([0-9]+)\.([0-9]+) ]] ||
    die "cannot tell which CUDA to install for: no CUDA_VERSION, no nvidia-smi (is the NVIDIA driver installed?), no nvcc; set DTRAIN_CUDA_VERSION=12.4 (say)"
  echo "${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"
}

# nvcc where the Makefile looks for it (PATH, then CUDA_HOME), or nothing.
find_nvcc() {
  command -v nvcc || { [[ -x $CUDA_HOME/bin/nvcc ]] && echo "$CUDA_HOME/bin/nvcc"; } || true
}

# Whether the dynamic loader finds a library by a name dtrain asks for (libcublas.so.13 or .12,
# libnccl.so.2), as dlopen will. (Not `ldconfig -p | grep -q`: pipefail would count the SIGPIPE.)
has_library() { grep -Eq "[[:space:]]$1 " <<<"$(ldconfig -p)"; }
has_cublas() { has_library 'libcublas\.so\.1[23]'; }
has_nccl() { has_library 'libnccl\.so\.2'; }

# The libnccl2 to install: the newest in the repository built for this CUDA major version and a
# minor version up to this one (the CUDA repository carries a build per CUDA release, such as
# 2.21.5-1+cuda12.4), else the newest for this major version (CUDA's minor-version compatibility
# runs it; some distributions' repositories start after the driver's release).
nccl_package() {
  local major=$1 minor=$2 version newest=""
  while read -r version; do
    if ! [[ $version =~ \+cuda([0-9]+)\.([0-9]+)$ ]] || ((BASH_REMATCH[1] != major)); then continue; fi
    if ((BASH_REMATCH[2] <= minor)); then
      echo "libnccl2=$version"
      return 0
    fi
    newest=${newest:-$version}
  done < <(apt-cache madison libnccl2 | awk -F'|' '{ gsub(/ /, "", $2); print $2 }')
  [[ -n $newest ]] && echo "libnccl2=$newest"
}

# Whether apt knows every package named (`apt-cache show` fails for one it cannot locate).
apt_knows() { apt-cache show "$@" >/dev/null 2>&1; }

# Whether apt knows the packages, and a libnccl2 for CUDA MAJOR.MINOR when $nccl asks for one.
known() {
  local major=$1 minor=$2
  shift 2
  if (($#)) && ! apt_knows "$@"; then return 1; fi
  [[ -z $nccl ]] || nccl_package "$major" "$minor" >/dev/null
}

# Makes apt know the packages: fresh package lists first (images often ship without), then NVIDIA's
# CUDA repository through its keyring package, unless it is configured already (a second entry for
# it, signed differently, would stop apt).
make_known() {
  local major=$1 minor=$2
  shift 2
  if known "$major" "$minor" "$@"; then return 0; fi
  apt-get update -qq >&2
  if known "$major" "$minor" "$@"; then return 0; fi
  if grep -rqs developer.download.nvidia.com/compute/cuda/repos /etc/apt/sources.list /etc/apt/sources.list.d; then
    die "NVIDIA's CUDA repository is configured but lacks ${*:-libnccl2} for CUDA $major.$minor"
  fi
  local distro arch
  # shellcheck disable=SC1091 # the running system's
  distro=$(. /etc/os-release && echo "${ID}${VERSION_ID//./}")
  arch=$(uname -m)
  if [[ $arch == aarch64 ]]; then arch=sbsa; fi
  local url=https://developer.download.nvidia.com/compute/cuda/repos/$distro/$arch/cuda-keyring_1.1-1_all.deb
  log "adding NVIDIA's CUDA repository ($url)"
  curl -fsSL -o /tmp/cuda-keyring.deb "$url" || die "could not download $url"
  dpkg -i /tmp/cuda-keyring.deb >&2
  apt-get update -qq >&2
  known "$major" "$minor" "$@" || die "NVIDIA's CUDA repository for $distro lacks ${*:-libnccl2} for CUDA $major.$minor"
}

from_apt() {
  local version=$1 major=${1%.*} minor=${1#*.} packages=()
  if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
    die "installing from apt needs root and apt-get; without root: $0 --wheels DIR"
  fi
  local suffix=$major-$minor
  if [[ -z $(find_nvcc) ]]; then packages+=("cuda-nvcc-$suffix" "cuda-cudart-dev-$suffix"); fi
  if ! has_cublas; then packages+=("libcublas-$suffix"); fi
  nccl=""
  if ! has_nccl; then nccl=libnccl2; fi
  if ((${#packages[@]} == 0)) && [[ -z $nccl ]]; then
    log "nothing to install for CUDA $version: nvcc, cuBLAS and NCCL are there"
    return 0
  fi
  make_known "$major" "$minor" "${packages[@]}"
  if [[ -n $nccl ]]; then packages+=("$(nccl_package "$major" "$minor")"); fi
  log "installing ${packages[*]} (CUDA $version)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}" >&2
  ldconfig
  # The packages install under /usr/local/cuda-M.m; make build looks in CUDA_HOME.
  if [[ -z $(find_nvcc) && -x /usr/local/cuda-$version/bin/nvcc ]]; then
    ln -sfn "/usr/local/cuda-$version" "$CUDA_HOME"
  fi
  local nvcc
  nvcc=$(find_nvcc)
  log "CUDA $version: nvcc ${nvcc:-missing}; cuBLAS $(has_cublas && echo found || echo missing);" \
    "NCCL $(has_nccl && echo found || echo missing) (by the loader's search path)"
  if [[ -z $nvcc ]] || ! has_cublas || ! has_nccl; then
    die "still missing after the install; set DTRAIN_CUBLAS_LIB / DTRAIN_NCCL_LIB to the libraries, or use --wheels"
  fi
}

from_wheels() {
  local dir=$1 major=${2%.*}
  local wheels=("nvidia-cublas-cu$major" "nvidia-nccl-cu$major")
  # From CUDA 13, cuBLAS's wheel drops the suffix (nvidia-cublas 13.x).
  if ((major >= 13)); then wheels[0]="nvidia-cublas==$major.*"; fi
  command -v python3 >/dev/null || die "--wheels needs python3 (with its venv module)"
  python3 -m venv "$dir" || die "could not make a venv at $dir"
  log "installing ${wheels[*]} into $dir (CUDA $2)"
  "$dir/bin/pip" install --quiet "${wheels[@]}" >&2
  local lib found
  for lib in libcublas.so libnccl.so; do
    found=$(compgen -G "$dir/lib/python3*/site-packages/nvidia/*/lib/$lib.*" || true)
    [[ -n $found ]] || die "the wheels brought no $lib into $dir"
    log "found ${found//$'\n'/ }"
  done
  local nvcc
  nvcc=$(find_nvcc)
  log "nvcc: ${nvcc:-missing} (needed where make build runs: module load cuda, say)"
  log "put $dir/bin first on PATH where dtrain runs (the SLURM script does, as GPU_LIBS)"
}

nccl=""
version=$(cuda_version)
case ${1:-} in
  "") from_apt "$version" ;;
  --wheels)
    [[ -n ${2:-} ]] || die "--wheels needs a folder: $0 --wheels DIR"
    from_wheels "$2" "$version"
    ;;
  *) die "unknown argument '$1'; usage: $0 [--wheels DIR]" ;;
esac
