#!/usr/bin/env bash
# The GPU check: run on a machine with an NVIDIA GPU, from the repository root, with nothing but
# the checkout and a carried .device/ folder (no package registry is needed there):
#
#   scripts/gpu_check.sh --pack                here: everything the check needs into .device/
#   scripts/gpu_check.sh [RESULTS_FILE]        there (default results file: gpu_check_results.txt)
#
# --pack writes .device/deno.xz (this checkout's Deno), .device/deno_dir.tar.xz (its npm cache) and
# .device/gpu-check-libs.tar.xz: libdtrain.so built for any x86-64-v3 processor, libdtrain_gloo.so,
# libdtrain_cuda.so, the shared libraries they need beyond glibc and libstdc++ (OpenBLAS, Gloo and
# theirs, which a GPU image rarely has) and the commit they were built at; about 45 MB, so the
# checkout and .device/ together stay under the 64 MiB a device machine is sent. (The unpacked npm
# cache of ../shared/tools/pack-deno-for-device.sh is about 38 MB; --pack replaces it.) There,
# what the machine can build (make, a C compiler, OpenBLAS and Gloo headers, nvcc) is built, and
# what it cannot is taken from that archive. PyTorch and NVIDIA's cuBLAS/NCCL wheels come from the
# python3 on PATH. Under 8 minutes: each step has its own time limit, which with each step's 5 s
# grace to die adds up to 480 s, and a failed step does not stop the next. All results go to one
# file.
#
# Steps: 1. the machine (GPU, driver, nvcc, torch, the wheels' libraries); 2. build; 3. CUDA
# available; 4. the CUDA tests (tests/cuda: every op against the CPU at f32 rel err <= 1e-4 and
# bf16 <= 2e-2, attention, a DataLoader batch through pinned memory equal to the CPU batch, a GPT
# step where nn.GPT exists, DDP and FSDP over NCCL on every visible GPU, FSDP on one GPU against
# FSDP on the cpu); 5. the GPT-2 small benchmark,
# dtrain (scripts/gpu_bench.ts) then PyTorch eager (scripts/gpu_bench_torch.py), bf16.
set -uo pipefail
export NO_COLOR=1
cd "$(dirname "$0")/.." || exit 1
carried=.device/gpu-check-libs.tar.xz
NVCC=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)

# ---- --pack: here, before the checkout travels ----
if [[ ${1:-} == --pack ]]; then
  set -e
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' EXIT
  mkdir -p "$stage/build" "$stage/lib" "$stage/deno_dir" .device
  # .device/ travels as an ignored, carried path (git's own exclude file: worktrees share it).
  exclude=$(git rev-parse --git-path info/exclude)
  if ! git check-ignore -q .device/; then mkdir -p "$(dirname "$exclude")" && echo /.device/ >>"$exclude"; fi

  # Deno, and the npm packages it fetches for the check's entry points (deno.json's, all of them).
  deno=$(command -v deno || echo .tools/node_modules/@deno/linux-x64-glibc/deno)
  deno=$(readlink -f "$deno")
  [[ -x $deno ]] || { echo "gpu_check --pack: no deno: run make build first" >&2; exit 1; }
  if [[ ! -f .device/deno.xz || $deno -nt .device/deno.xz ]]; then
    xz -T0 -6 -c "$deno" >.device/deno.xz
  fi
  DENO_DIR=$stage/deno_dir "$deno" cache mod.ts src/train/main.ts src/launch/main.ts \
    scripts/gpu_bench.ts tests/cuda/*.ts >"$stage/cache.log" 2>&1 || { cat "$stage/cache.log" >&2; exit 1; }
  tar -C "$stage/deno_dir" -cf - . | xz -T0 -6 >.device/deno_dir.tar.xz
  rm -rf .device/deno_dir

  # -march=native would use whatever this processor has (AVX-512 here, say); the GPU host's may not.
  CFLAGS="-O3 -march=x86-64-v3 -fno-math-errno" make -s BUILD="$stage/build" \
    "$stage/build/libdtrain.so" "$stage/build/libdtrain_gloo.so"
  [[ -n $NVCC ]] || { echo "gpu_check --pack: nvcc not found: the CUDA library cannot be built" >&2; exit 1; }
  make -s cuda NVCC="$NVCC"
  cp build/libdtrain_cuda.so "$stage/build/"
  if ldd "$stage/build/libdtrain_cuda.so" | grep -Ei "cublas|nccl"; then
    echo "gpu_check --pack: libdtrain_cuda.so links cuBLAS or NCCL" >&2
    exit 1
  fi
  # Every library the two CPU ones load, but those any Linux with a C++ compiler has.
  base='^(linux-vdso|libc|libm|libdl|librt|libpthread|ld-linux-x86-64|libgcc_s|libstdc\+\+)\.so'
  ldd "$stage/build/libdtrain.so" "$stage/build/libdtrain_gloo.so" |
    awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u |
    while read -r name path; do
      if [[ ! $name =~ $base ]]; then cp -L "$path" "$stage/lib/$name"; fi
    done
  { git rev-parse HEAD && git status --porcelain | sed 's/^/  uncommitted: /'; } >"$stage/COMMIT"
  tar -C "$stage" -cf - build lib COMMIT | xz -T0 -6 >"$carried"
  tree=$(git ls-files -co --exclude-standard -z | du -cb --files0-from=- | tail -n 1 | cut -f1)
  device=$(du -cb .device | tail -n 1 | cut -f1)
  echo "packed .device/ ($((device >> 20)) MiB: $(cd .device && du -h ./* | tr '\t\n' ' '))," \
    "the checkout is $((tree >> 20)) MiB; run with carry [\".device\"]"
  if (((tree + device) >> 20 >= 64)); then echo "gpu_check --pack: over the 64 MiB a device run takes" >&2; exit 1; fi
  exit 0
fi

out=${1:-gpu_check_results.txt}
: >"$out"
started=$(date +%s)
failures=0

say() { echo "$*" | tee -a "$out"; }
# step NAME LIMIT_S COMMAND...: runs the command under a time limit, its output into the file.
step() {
  local name=$1 limit=$2
  shift 2
  say ""
  say "== $name (limit ${limit}s)"
  local t0
  t0=$(date +%s)
  timeout --kill-after=5 "$limit" "$@" 2>&1 | tee -a "$out"
  local rc=${PIPESTATUS[0]}
  say "-- $name: exit $rc after $(($(date +%s) - t0))s$([ "$rc" = 124 ] && echo ' (TIMED OUT)')"
  [ "$rc" = 0 ] || failures=$((failures + 1))
  return 0
}

# xz -dc, or Python's lzma where the image has no xz.
unxz() {
  if command -v xz >/dev/null; then
    xz -dc "$1"
  else
    python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' "$1"
  fi
}

# Deno: on PATH, unpacked from the carried .device/deno.xz with its npm cache (packed by --pack, or
# left unpacked by ../shared/tools/pack-deno-for-device.sh), or in .tools/.
if ! command -v deno >/dev/null; then
  if [ -f .device/deno.xz ]; then
    unxz .device/deno.xz >/tmp/deno && chmod +x /tmp/deno
    export PATH=/tmp:$PATH DENO_DIR=$PWD/.device/deno_dir
    if [ -f .device/deno_dir.tar.xz ]; then
      DENO_DIR=/tmp/dtrain-gpu-check-deno-dir
      rm -rf "$DENO_DIR" && mkdir -p "$DENO_DIR" && unxz .device/deno_dir.tar.xz | tar -C "$DENO_DIR" -xf -
    fi
  elif [ -x .tools/node_modules/@deno/linux-x64-glibc/deno ]; then
    export PATH=$PWD/.tools/node_modules/@deno/linux-x64-glibc:$PATH
  fi
fi
# The carried libraries, unpacked beside the checkout's own build/ (used where that lacks one).
unpacked=/tmp/dtrain-gpu-check-libs
if [ -f "$carried" ]; then
  rm -rf "$unpacked" && mkdir -p "$unpacked" && unxz "$carried" | tar -C "$unpacked" -xf -
fi

commit=$(git rev-parse --short HEAD 2>/dev/null || head -n 1 "$unpacked/COMMIT" 2>/dev/null || echo '?')
say "dtrain GPU check, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $commit"
# What the machine has (its own step, so a missing tool shows in the results).
machine() {
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
  else
    echo "nvidia-smi: not found"
  fi
  echo "deno: $(deno --version 2>/dev/null | head -n 1 || echo missing)"
  echo "nvcc: ${NVCC:-missing} $("${NVCC:-false}" --version 2>/dev/null | tail -n 1)"
  echo "make: $(command -v make || echo missing); cc: $(command -v cc || echo missing)"
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 |
    tail -n 1
  # Where dtrain's loader will look last (csrc/cuda/libs.cu): python3's site-packages.
  python3 -c 'import site, glob
for d in site.getsitepackages() + [site.getusersitepackages()]:
    for p in sorted(glob.glob(d + "/nvidia/*/lib/lib*.so*")):
        if "cublas" in p or "nccl" in p: print("wheel library:", p)' 2>&1 | tail -n 6
  if [ -f "$unpacked/COMMIT" ]; then echo "carried libraries built at: $(cat "$unpacked/COMMIT")"; fi
}

# Builds what this machine can: the CPU libraries need OpenBLAS and Gloo, the CUDA one nvcc.
build() {
  make build/libdtrain.so build/libdtrain_gloo.so ||
    echo "cpu libraries: not built here (OpenBLAS or Gloo missing?); the carried ones are used"
  if [ -n "$NVCC" ] && make -j"$(nproc)" cuda NVCC="$NVCC"; then
    echo "cuda library ready (built now unless up to date)"
    if ldd build/libdtrain_cuda.so | grep -Ei "cublas|nccl"; then
      echo "build/libdtrain_cuda.so is linked to cuBLAS or NCCL: it must open them at run time"
      return 1
    fi
  else
    echo "cuda library: not built here (no nvcc, or it failed); the carried one is used"
  fi
}
export NVCC unpacked
export -f machine build

step "machine" 15 bash -c machine
step "build" 110 bash -c build

# Each library from this machine's build when there is one, else from the carried archive (whose
# lib/ then goes on the loader's path, for OpenBLAS and Gloo).
for lib in libdtrain:DTRAIN_LIB libdtrain_gloo:DTRAIN_GLOO_LIB libdtrain_cuda:DTRAIN_CUDA_LIB; do
  name=${lib%%:*}.so var=${lib##*:}
  if [ -f "build/$name" ]; then
    say "$name: build/$name"
  elif [ -f "$unpacked/build/$name" ]; then
    export "$var=$unpacked/build/$name"
    [[ :${LD_LIBRARY_PATH:-}: == *":$unpacked/lib:"* ]] ||
      export LD_LIBRARY_PATH="$unpacked/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    say "$name: carried ($var=$unpacked/build/$name)"
  else
    say "$name: missing (not built here, none carried: scripts/gpu_check.sh --pack makes one)"
  fi
done

# shellcheck disable=SC2016 # a TypeScript template literal, not a shell expansion
step "cuda available" 15 deno eval 'import { cuda } from "./mod.ts";
  console.log(cuda.isAvailable() ? `${cuda.deviceCount()} GPU(s): ${cuda.getDeviceName(0)}` : `unavailable: ${cuda.unavailableReason()}`);
  if (!cuda.isAvailable()) Deno.exit(1);'

# --no-check: the types are checked where the code is developed; here that would only cost time.
step "CUDA tests (tests/cuda)" 170 deno test -A --no-check --v8-flags=--expose-gc tests/cuda/

step "benchmark: dtrain GPT-2 small, bf16" 85 deno run -A --v8-flags=--expose-gc scripts/gpu_bench.ts --batch 8 --steps 10
step "benchmark: PyTorch eager GPT-2 small, bf16 autocast" 45 python3 scripts/gpu_bench_torch.py --batch 8 --steps 10

say ""
say "== done in $(($(date +%s) - started))s, $failures step(s) failed; results in $out"
[ "$failures" = 0 ]
