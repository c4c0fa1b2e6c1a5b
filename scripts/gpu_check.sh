#!/usr/bin/env bash
# The GPU check: run on a machine with an NVIDIA GPU, from anywhere, with nothing but the checkout
# and a carried .device/ folder (no package registry is needed there):
#
#   scripts/gpu_check.sh --pack                here: everything the check needs into .device/
#   scripts/gpu_check.sh [RESULTS_FILE]        there (default $OUT/gpu_check_results.txt when $OUT
#                                              is set, as on a device machine, else
#                                              ./gpu_check_results.txt); a relative path is the
#                                              caller's
#   scripts/gpu_check.sh --judge GPUS RC FILE  how one step's output is judged (see judge below)
#   scripts/gpu_check.sh --host [RESULTS_FILE] here, without a GPU: the same steps on the host
#                                              build (see below)
#
# GPU_CHECK_STEPS="KEY ..." runs only those steps (keys: machine build cuda tests train
# bench-dtrain bench-torch), e.g. to rerun what failed; the unpacking always runs.
#
# --pack writes .device/deno.xz (this checkout's Deno), .device/deno_dir.tar.xz (its npm cache) and
# .device/gpu-check-libs.tar.xz: libdtrain.so built for any x86-64-v3 processor, libdtrain_gloo.so,
# libdtrain_cuda.so, the shared libraries they need beyond glibc and libstdc++ (OpenBLAS, Gloo and
# theirs, which a GPU image rarely has) and the commit they were built at; about 45 MB, so the
# checkout and .device/ together stay under the 64 MiB a device machine is sent. (The unpacked npm
# cache of ../shared/tools/pack-deno-for-device.sh is about 38 MB; --pack replaces it.) There,
# what the machine can build (make, a C compiler, OpenBLAS and Gloo headers, nvcc) is built, and
# what it cannot is taken from that archive. PyTorch and NVIDIA's cuBLAS/NCCL wheels come from the
# python3 on PATH. All results go to one file, ending with one line
# "gpu_check: N steps, N passed, N failed"; the exit status is non-zero when any step failed.
#
# Time: at most 9 minutes. Each step has its own limit and 5 s more to die (timeout -k 5):
#   unpack .device/ 25 + machine 15 + build 100 + cuda available 15 + tests 110 + train 80
#   + bench-dtrain 85 + bench-torch 60 = 490 s, + 8 x 5 s grace = 530 s, + 5 s for counting the
#   GPUs (nvidia-smi -L) = 535 s <= 540 s. A failed step does not stop the next.
#
# Steps: 1. unpack .device/; 2. the machine (GPU, driver, nvcc, python3, the wheels' libraries;
# not torch, whose import can take seconds: the PyTorch benchmark reports its version); 3. build;
# 4. CUDA available; 5. tests (tests/cuda but host_build_test.ts, which checks the host build
# itself, and every tests/*/*_cuda_test.ts but train_cuda_test.ts: every op against the CPU at f32
# rel err <= 1e-5 and bf16 <= 2e-2, attention, a DataLoader batch through pinned memory equal to
# the CPU batch, the train job on cuda against the cpu under DDP, FSDP and --pp over NCCL; each
# subprocess there has 45 s);
# 6. train (tests/train/train_cuda_test.ts: a GPT step against the cpu, DDP's gradients over a real
# NCCL group on every visible GPU, FSDP over NCCL; each subprocess there has 45 s and each
# in-process NCCL call 30 s, so an NCCL hang costs at most 45 s); 7. the GPT-2 small benchmark,
# dtrain (scripts/gpu_bench.ts) then 8. PyTorch eager (scripts/gpu_bench_torch.py), bf16.
#
# --host runs steps 1-6 here, without a GPU, on the host build of the CUDA library (make
# cuda-host; docs/reference/gpus.md): the build step makes it and the CPU stand-ins of cuBLAS and
# NCCL, which DTRAIN_CUDA_LIB, DTRAIN_CUBLAS_LIB and DTRAIN_NCCL_LIB then name, so the script a GPU
# machine runs has run before it goes there. Its limits are HOST_SCALE (4) times the GPU
# machine's, the host build being slower on a CPU; the benchmarks (GPT-2 small) are not run. The
# host build's devices count as GPUs for the judge: a GPU test skipped there fails its step.
#
# A step passes when it exits 0 and, where a GPU is visible (nvidia-smi lists one, or dtrain counts
# one), skipped nothing: a test ignored with "[skipped: ...]" in its name (or ignored tests the
# output does not name) or a benchmark printing "skipped" fails it.
set -uo pipefail
export NO_COLOR=1
HOST_SCALE=4

# judge GPUS RC FILE: the verdict on a step that exited RC, printing FILE, on a machine with GPUS
# visible GPUs; prints it ("passed", or "FAILED (why)") and returns 0 when the step passed. With a
# GPU, every ignored test must be one that is ignored because there is a GPU (its name has no
# "[skipped: ...]"), and no benchmark may print a "skipped" field.
judge() {
  local gpus=$1 rc=$2 file=$3
  if [[ $rc == 124 || $rc == 137 ]]; then echo "FAILED (exit $rc: timed out)" && return 1; fi
  if [[ $rc != 0 ]]; then echo "FAILED (exit $rc)" && return 1; fi
  if ((gpus > 0)); then
    local ignored by_design skipped
    # deno test's summary lines: "ok | 15 passed | 0 failed | 36 ignored (3s)".
    ignored=$(sed -nE 's/^(ok|FAILED) \|.* ([0-9]+) ignored.*/\2/p' "$file" | awk '{ n += $1 } END { print n + 0 }')
    by_design=$(grep -E ' \.\.\. ignored' "$file" | grep -cv '\[skipped: ')
    if ((ignored > by_design)); then
      skipped=$(grep -E '\[skipped: .* \.\.\. ignored' "$file" | head -n 3 | sed 's/ \.\.\. ignored.*//' | paste -sd ';' -)
      echo "FAILED ($((ignored - by_design)) test(s) skipped with $gpus GPU(s) visible${skipped:+: $skipped})"
      return 1
    fi
    if grep -q '"skipped":' "$file"; then
      echo "FAILED (skipped with $gpus GPU(s) visible: $(grep -m 1 -o '"skipped":.*' "$file"))"
      return 1
    fi
  fi
  echo "passed (exit 0)"
}
host=0
if [[ ${1:-} == --host ]]; then
  host=1
  shift
  if [[ ${1:-} == --* ]]; then echo "usage: gpu_check.sh --host [RESULTS_FILE]" >&2; exit 2; fi
fi
if [[ ${1:-} == --judge ]]; then
  (($# == 4)) || { echo "usage: gpu_check.sh --judge GPUS RC FILE" >&2; exit 2; }
  judge "$2" "$3" "$4"
  exit
fi

# The results file, resolved against the caller's folder before the cd below. A device machine's
# $OUT is what comes back from it: by default the results go there, never into the checkout.
if [[ ${1:-} != --pack ]]; then
  out=${1:-${OUT:+$OUT/}gpu_check_results.txt}
  [[ $out == /* ]] || out=$PWD/$out
fi
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
    scripts/gpu_bench.ts tests/cuda/*.ts tests/cuda/workers/*.ts tests/*/*_cuda_test.ts \
    tests/*/workers/*_cuda.ts >"$stage/cache.log" 2>&1 || { cat "$stage/cache.log" >&2; exit 1; }
  tar -C "$stage/deno_dir" -cf - . | xz -T0 -6 >.device/deno_dir.tar.xz
  rm -rf .device/deno_dir

  # -march=native would use whatever this processor has (AVX-512 here, say); the GPU host's may not.
  CFLAGS="-O3 -march=x86-64-v3 -fno-math-errno -fno-trapping-math" make -s BUILD="$stage/build" \
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

if ! { mkdir -p "$(dirname "$out")" && : >"$out"; }; then
  echo "gpu_check: cannot write the results file $out" >&2
  exit 1
fi
started=$(date +%s)
steps=0 passed=0 failed=0
only=${GPU_CHECK_STEPS:-}
# Visible GPUs: nvidia-smi's list now, dtrain's count once the cuda step has run (5 s at most).
gpus=$(timeout -k 1 4 nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
gpus=${gpus:-0}

say() { echo "$*" | tee -a "$out"; }
# step KEY LIMIT NAME COMMAND...: runs the command under a time limit (HOST_SCALE times it with
# --host), its output into the results file, and judges it (judge above); skipped when
# GPU_CHECK_STEPS is set and does not name KEY, and for the benchmarks with --host.
step() {
  local key=$1 limit=$2 name=$3
  shift 3
  if [[ -n $only && $key != unpack && " $only " != *" $key "* ]]; then return 0; fi
  if ((host)); then
    if [[ $key == bench-* ]]; then return 0; fi
    limit=$((limit * HOST_SCALE))
  fi
  say ""
  say "== $name (limit ${limit}s)"
  local t0 log rc verdict
  t0=$(date +%s)
  log=$(mktemp)
  timeout --kill-after=5 "$limit" "$@" 2>&1 | tee -a "$out" "$log"
  rc=${PIPESTATUS[0]}
  steps=$((steps + 1))
  if verdict=$(judge "$gpus" "$rc" "$log"); then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  rm -f "$log"
  say "-- $name: $verdict after $(($(date +%s) - t0))s"
}

# xz -dc, or Python's lzma where the image has no xz.
unxz() {
  if command -v xz >/dev/null; then
    xz -dc "$1"
  else
    python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' "$1"
  fi
}

# Deno, unpacked from the carried .device/deno.xz with its npm cache (packed by --pack, or left
# unpacked by ../shared/tools/pack-deno-for-device.sh) where none is on PATH, and the carried
# libraries, beside the checkout's own build/ (used where that lacks one).
tmp=/tmp/dtrain-gpu-check
unpacked=$tmp/libs
unpack() {
  rm -rf "$tmp" && mkdir -p "$tmp/bin" "$unpacked" || return 1
  if ! command -v deno >/dev/null && [ -f .device/deno.xz ]; then
    unxz .device/deno.xz >"$tmp/bin/deno" && chmod +x "$tmp/bin/deno" || return 1
    if [ -f .device/deno_dir.tar.xz ]; then
      mkdir -p "$tmp/deno_dir" && unxz .device/deno_dir.tar.xz | tar -C "$tmp/deno_dir" -xf - || return 1
    fi
    echo "deno: unpacked from .device/deno.xz"
  fi
  if [ -f "$carried" ]; then
    unxz "$carried" | tar -C "$unpacked" -xf - || return 1
    echo "carried libraries: unpacked from $carried"
  fi
}
export tmp unpacked carried
export -f unxz unpack
step unpack 25 "unpack .device/" bash -c unpack
if ! command -v deno >/dev/null; then
  if [ -x "$tmp/bin/deno" ]; then
    export PATH=$tmp/bin:$PATH DENO_DIR=$PWD/.device/deno_dir
    if [ -d "$tmp/deno_dir" ]; then export DENO_DIR=$tmp/deno_dir; fi
  elif [ -x .tools/node_modules/@deno/linux-x64-glibc/deno ]; then
    export PATH=$PWD/.tools/node_modules/@deno/linux-x64-glibc:$PATH
  fi
fi

commit=$(git rev-parse --short HEAD 2>/dev/null || head -n 1 "$unpacked/COMMIT" 2>/dev/null || echo '?')
say "dtrain GPU check, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $commit, $gpus GPU(s) listed by nvidia-smi"
# --host: the host build stands in for the GPU, from this checkout's build/ (made by the build step).
if ((host)); then
  export DTRAIN_CUDA_LIB=$PWD/build/libdtrain_cuda_host.so
  export DTRAIN_CUBLAS_LIB=$PWD/build/cuda_host/libcublas_standin.so
  export DTRAIN_NCCL_LIB=$PWD/build/cuda_host/libnccl_standin.so
  say "on the host build ($DTRAIN_CUDA_LIB, cuBLAS and NCCL stand-ins in build/cuda_host/); limits x$HOST_SCALE, no benchmarks"
fi
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
  echo "python3: $(python3 --version 2>&1 || echo missing)"
  # Where dtrain's loader will look last (csrc/cuda/libs.cu): python3's site-packages.
  python3 -c 'import site, glob
for d in site.getsitepackages() + [site.getusersitepackages()]:
    for p in sorted(glob.glob(d + "/nvidia/*/lib/lib*.so*")):
        if "cublas" in p or "nccl" in p: print("wheel library:", p)' 2>&1 | tail -n 6
  if [ -f "$unpacked/COMMIT" ]; then echo "carried libraries built at: $(cat "$unpacked/COMMIT")"; fi
}
# Builds what this machine can: the CPU libraries need OpenBLAS and Gloo, the CUDA one nvcc; with
# --host, the host build and the stand-ins (a C++ compiler, OpenBLAS, Gloo), which must build.
build() {
  make build/libdtrain.so build/libdtrain_gloo.so ||
    echo "cpu libraries: not built here (OpenBLAS or Gloo missing?); the carried ones are used"
  if ((host)); then
    make -j"$(nproc)" cuda-host && echo "host build ready (built now unless up to date)"
    return
  fi
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
export NVCC unpacked host
export -f machine build

step machine 15 "machine" bash -c machine
step build 100 "build" bash -c build

# Each library from this machine's build when there is one, else from the carried archive (whose
# lib/ then goes on the loader's path, for OpenBLAS and Gloo).
for lib in libdtrain:DTRAIN_LIB libdtrain_gloo:DTRAIN_GLOO_LIB libdtrain_cuda:DTRAIN_CUDA_LIB; do
  name=${lib%%:*}.so var=${lib##*:}
  if ((host)) && [[ $var == DTRAIN_CUDA_LIB ]]; then
    say "$name: the host build ($DTRAIN_CUDA_LIB$([ -f "$DTRAIN_CUDA_LIB" ] || echo ': missing'))"
  elif [ -f "build/$name" ]; then
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
step cuda 15 "cuda available" deno eval 'import { cuda } from "./mod.ts";
  console.log(cuda.isAvailable() ? `${cuda.deviceCount()} GPU(s): ${cuda.getDeviceName(0)}` : `unavailable: ${cuda.unavailableReason()}`);
  if (!cuda.isAvailable()) Deno.exit(1);'
# dtrain's own count where nvidia-smi listed none (an image without it).
if ((gpus == 0)); then
  gpus=$(sed -nE 's/^([0-9]+) GPU\(s\): .*/\1/p' "$out" | tail -n 1)
  gpus=${gpus:-0}
fi

# --no-check: the types are checked where the code is developed; here that would only cost time.
# gpu_check_test.ts checks this script offline (shellcheck, which a GPU image seldom has).
test_flags=(-A --no-check --v8-flags=--expose-gc)
# The CUDA library's own tests (tests/cuda) and every test of a concept on cuda, which sits beside
# the concept, named for the device (tests/nn/gpt_cuda_test.ts). Named one by one: deno test
# applies no --ignore once it is given files.
cuda_tests=()
for file in tests/cuda/*_test.ts tests/*/*_cuda_test.ts; do
  case $file in
    tests/train/train_cuda_test.ts | tests/cuda/gpu_check_test.ts | tests/cuda/host_build_test.ts) ;;
    *) cuda_tests+=("$file") ;;
  esac
done
step tests 110 "CUDA tests (tests/cuda and tests/*/*_cuda_test.ts but train_cuda_test.ts)" \
  deno test "${test_flags[@]}" "${cuda_tests[@]}"
step train 80 "CUDA training tests (tests/train/train_cuda_test.ts, NCCL)" \
  deno test "${test_flags[@]}" tests/train/train_cuda_test.ts

step bench-dtrain 85 "benchmark: dtrain GPT-2 small, bf16" \
  deno run -A --v8-flags=--expose-gc scripts/gpu_bench.ts --batch 8 --steps 10
step bench-torch 60 "benchmark: PyTorch eager GPT-2 small, bf16 autocast (import torch included)" \
  python3 scripts/gpu_bench_torch.py --batch 8 --steps 10

say ""
say "== done in $(($(date +%s) - started))s; results in $out"
say "gpu_check: $steps steps, $passed passed, $failed failed"
((failed == 0))
