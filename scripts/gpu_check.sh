#!/usr/bin/env bash
# The GPU check: run on a machine with an NVIDIA GPU, from the repository root, with nothing but
# the checkout and a carried Deno (.device/ from ../shared/tools/pack-deno-for-device.sh; no
# package registry is needed). PyTorch and NVIDIA's cuBLAS/NCCL wheels come from the python3 on
# PATH. Under 8 minutes: each step has its own time limit (together 480 s), and a failed step does
# not stop the next. All results go to one file:
#
#   scripts/gpu_check.sh [RESULTS_FILE]        (default: gpu_check_results.txt)
#
# Steps: 1. the machine (GPU, driver, nvcc, torch); 2. build the libraries; 3. the CUDA tests
# (tests/cuda: every op against the CPU at f32 rel err <= 1e-4 and bf16 <= 2e-2, attention, a GPT
# step where nn.GPT exists, DDP over NCCL on every visible GPU); 4. the GPT-2 small benchmark,
# dtrain (scripts/gpu_bench.ts) then PyTorch eager (scripts/gpu_bench_torch.py), bf16.
set -uo pipefail
export NO_COLOR=1
cd "$(dirname "$0")/.." || exit 1
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
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$out"
  local rc=${PIPESTATUS[0]}
  say "-- $name: exit $rc after $(($(date +%s) - t0))s$([ "$rc" = 124 ] && echo ' (TIMED OUT)')"
  [ "$rc" = 0 ] || failures=$((failures + 1))
  return 0
}

# Deno: on PATH, in .tools/, or unpacked from the carried .device/deno.xz.
if ! command -v deno >/dev/null; then
  if [ -x .tools/node_modules/.bin/deno ]; then
    export PATH=$PWD/.tools/node_modules/.bin:$PATH
  elif [ -f .device/deno.xz ]; then
    xz -dc .device/deno.xz >/tmp/deno && chmod +x /tmp/deno
    export PATH=/tmp:$PATH DENO_DIR=$PWD/.device/deno_dir
  fi
fi
# nvcc: on PATH or in the toolkit's usual place.
NVCC=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)

say "dtrain GPU check, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
# What the machine has (its own step, so a missing tool shows in the results).
machine() {
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader ||
    echo "nvidia-smi: not found"
  echo "deno: $(deno --version 2>/dev/null | head -n 1 || echo missing)"
  echo "nvcc: ${NVCC:-missing} $("${NVCC:-false}" --version 2>/dev/null | tail -n 1)"
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 |
    tail -n 1
  python3 -c 'import site, glob
for d in site.getsitepackages():
    for p in sorted(glob.glob(d + "/nvidia/*/lib/lib*.so*")):
        if "cublas" in p or "nccl" in p: print("wheel library:", p)' 2>&1 | tail -n 6
}

# The CPU libraries need OpenBLAS and Gloo; the CUDA library needs nvcc (or a carried build/).
build() {
  make build/libdtrain.so build/libdtrain_gloo.so ||
    echo "cpu libraries: build failed (OpenBLAS or Gloo missing?); CPU comparisons will fail"
  if [ -n "$NVCC" ]; then
    local start
    start=$(date +%s)
    make -j"$(nproc)" cuda NVCC="$NVCC" || return 1
    echo "cuda library ready after $(($(date +%s) - start)) s (built now unless up to date)"
  elif [ -f build/libdtrain_cuda.so ]; then
    echo "nvcc not found: using the carried build/libdtrain_cuda.so"
  else
    echo "nvcc not found and no build/libdtrain_cuda.so: nothing CUDA can run"
    return 1
  fi
  if ldd build/libdtrain_cuda.so | grep -Ei "cublas|nccl"; then
    echo "build/libdtrain_cuda.so is linked to cuBLAS or NCCL: it must open them at run time"
    return 1
  fi
}
export NVCC
export -f machine build

step "machine" 20 bash -c machine
step "build" 120 bash -c build

# shellcheck disable=SC2016 # a TypeScript template literal, not a shell expansion
step "cuda available" 20 deno eval 'import { cuda } from "./mod.ts";
  console.log(cuda.isAvailable() ? `${cuda.deviceCount()} GPU(s): ${cuda.getDeviceName(0)}` : `unavailable: ${cuda.unavailableReason()}`);
  if (!cuda.isAvailable()) Deno.exit(1);'

step "CUDA tests (tests/cuda)" 180 deno test -A --v8-flags=--expose-gc tests/cuda/

step "benchmark: dtrain GPT-2 small, bf16" 90 deno run -A --v8-flags=--expose-gc scripts/gpu_bench.ts --batch 8 --steps 10
step "benchmark: PyTorch eager GPT-2 small, bf16 autocast" 50 python3 scripts/gpu_bench_torch.py --batch 8 --steps 10

say ""
say "== done in $(($(date +%s) - started))s, $failures step(s) failed; results in $out"
[ "$failures" = 0 ]
