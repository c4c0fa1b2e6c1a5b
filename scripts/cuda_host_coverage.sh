#!/usr/bin/env bash
# Which exported functions of the CUDA library the GPU tests run. Builds a gcov variant of the host
# build ([Note: the host build] in csrc/cuda/host/cuda_runtime.h) into a temporary folder, runs the
# given test files on it, then prints every exported dt_* function with whether it ran, ending
# with one line "N of M exported functions ran".
#
#   scripts/cuda_host_coverage.sh [TEST_FILE_OR_FOLDER...]
#
# The default files are tests/cuda/ and every other test file that declares gpuTest or deviceTest
# (the NCCL ones, tests/train/train_cuda_test.ts and tests/cuda/nccl_shim_test.ts, among them),
# less two that run their GPU tests in children on libraries of their own, so that minutes of them
# would count nothing here: tests/cuda/host_build_test.ts (mutant and sanitizer builds) and this
# script's own test. The child processes of a test (the ranks of a distributed one) load the same
# library, and their counts are added to the parent's.
# The exit status is the test run's: a failed test is reported, and the coverage still printed.
set -euo pipefail
export NO_COLOR=1
cd "$(dirname "$0")/.."
DENO=${DENO:-$(scripts/bootstrap.sh | tail -n 1)}
STANDINS=(build/cuda_host/libcublas_standin.so build/cuda_host/libnccl_standin.so)

if ((!$#)); then
  mapfile -t others < <(grep -rlE --include='*_test.ts' '\b(gpuTest|deviceTest)\(' tests |
    grep -v '^tests/cuda/' | sort)
  own=()
  for file in tests/cuda/*_test.ts; do
    case $file in
      tests/cuda/host_build_test.ts | tests/cuda/cuda_host_coverage_test.ts) ;;
      *) own+=("$file") ;;
    esac
  done
  set -- "${own[@]}" "${others[@]}"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
lib=$tmp/libdtrain_cuda_host.so

# errors.c is compiled by $(CC), with flags of its own: instrumented through CC, so that dt_fail
# and dt_last_error count like the rest.
echo "== gcov build of the host library in $tmp" >&2
make -s -j2 HOST_BUILD="$tmp/obj" HOST_LIB="$lib" HOST_CXXFLAGS="-O0 --coverage" \
  HOST_LDFLAGS="--coverage" CC="${CC:-cc} --coverage" "$lib" "${STANDINS[@]}" >&2

echo "== deno test on it: $*" >&2
test_rc=0
DTRAIN_CUDA_LIB=$lib DTRAIN_CUBLAS_LIB=$PWD/${STANDINS[0]} DTRAIN_NCCL_LIB=$PWD/${STANDINS[1]} \
  "$DENO" test -A --v8-flags=--expose-gc "$@" >&2 || test_rc=$?

# gcov -f summarises each function ("Function 'dt_abs'" then "Lines executed:P% of L"); one that
# ran executed at least its first line. -n writes no .gcov files.
# Counts are written at exit: what only a killed process ran reads as never run.
ran=$(cd "$tmp/obj" && { gcov -f -n -o . ./*.gcno 2>/dev/null || true; } |
  awk -v q="'" '/^Function / { name = $2; gsub(q, "", name); next }
    /^Lines executed:/ && name != "" { if ($0 !~ /:0\.00% /) print name; name = "" }' | sort -u)
mapfile -t exported < <(nm -D --defined-only "$lib" | awk '$3 ~ /^dt_/ { print $3 }' | sort -u)

count=0
for fn in "${exported[@]}"; do
  if grep -qx "$fn" <<<"$ran"; then
    count=$((count + 1))
    printf '%-36s ran\n' "$fn"
  else
    printf '%-36s never ran\n' "$fn"
  fi
done
if ((test_rc)); then echo "cuda_host_coverage: deno test failed (exit $test_rc)" >&2; fi
echo "$count of ${#exported[@]} exported functions ran"
exit "$test_rc"
