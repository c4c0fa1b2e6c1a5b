#!/usr/bin/env bash
# The whole test suite: static checks, then `deno test`, ending with one summary line
# ("N passed, N failed") that CI reads.
set -uo pipefail
export NO_COLOR=1
cd "$(dirname "$0")/.."
DENO=${DENO:-$(scripts/bootstrap.sh | tail -n 1)}
mkdir -p build
log=build/test.log

# torchrun's port 29500 is held for the whole run, as another job on the machine would hold it: no
# test may depend on a fixed port (issue 36). Where something else already holds it, so much the
# better; the holder is stopped on exit however the run ends.
"$DENO" run --allow-net scripts/hold_port.ts 29500 &
port_holder=$!
trap 'kill "$port_holder" 2>/dev/null' EXIT

# The GPU tests ([cuda] and the NCCL ones) run on the host build of the CUDA library where there is
# no GPU (make cuda-host: the CPU, with stand-ins for cuBLAS and NCCL from tests/cuda/host/), chosen
# here by name, never found by accident; DTRAIN_TEST_CUDA=gpu (make test CUDA=gpu) leaves the real
# library in place.
if [[ "${DTRAIN_TEST_CUDA:-host}" == host ]]; then
  export DTRAIN_CUDA_LIB="$PWD/build/libdtrain_cuda_host.so"
  export DTRAIN_CUBLAS_LIB="$PWD/build/cuda_host/libcublas_standin.so"
  export DTRAIN_NCCL_LIB="$PWD/build/cuda_host/libnccl_standin.so"
  echo "== GPU tests on the host build of the CUDA library ($DTRAIN_CUDA_LIB; make test CUDA=gpu for a GPU)"
fi

# A second stream runs beside the static checks and the main run, and is counted with the rest:
# - the long GPU tests on the host build (a kernel's block threads run as fibers: the 300k-row
#   cross-entropy alone takes over a minute; the train job's agreement with the cpu runs real
#   jobs), which fill the core the static checks leave idle;
# - the tests that mostly wait (a SLURM cluster's timeouts, dead and hung ranks named after their
#   timeouts, elastic rounds re-forming): measured at 4-13% of the CPU for their wall time, their
#   waits overlap the main run's work. Their deadlines hold under far heavier load than this.
# - the docs' commands run in a fresh clone (a third of the CPU for their wall time: processes
#   starting, a clone, a build checked).
# - and, to even the two streams out, more tests that spend most of their time starting processes:
#   the guide's examples, the pipeline train jobs, the JSR package served, shared-memory set-up
#   killed (12-24% of the CPU for their wall time).
waiting_tests=(tests/infrastructure/slurm_test.ts tests/launch/elastic_death_test.ts
  tests/launch/launcher_test.ts tests/distributed/faults_test.ts tests/launch/elastic_join_test.ts
  tests/infrastructure/netns_elastic_test.ts tests/docs/fresh_clone_test.ts
  tests/docs/guide_test.ts tests/train/pp_train_test.ts tests/jsr/package_test.ts
  tests/distributed/shm_setup_test.ts)
beside_tests=("${waiting_tests[@]}")
if [[ "${DTRAIN_TEST_CUDA:-host}" == host ]]; then
  beside_tests=(tests/cuda/reductions_test.ts tests/train/train_agree_cuda_test.ts
    tests/train/pp_train_cuda_test.ts "${beside_tests[@]}")
fi
beside_log=build/test-beside.log
"$DENO" test -A --no-check --v8-flags=--expose-gc "${beside_tests[@]}" >"$beside_log" 2>&1 &
beside_pid=$!
trap 'kill "$port_holder" "$beside_pid" 2>/dev/null' EXIT
# The main run names every other test file: with --doc, deno test applies no --ignore to them.
mapfile -t main_tests < <(find tests -regex '.*\(_test\|\.test\|/test\)\.\(ts\|tsx\|mts\|js\|mjs\|jsx\)$' |
  grep -vxF -f <(printf '%s\n' "${beside_tests[@]}") | sort)

static_failed=0
targets=$(ls -d mod.ts src ffi tests bench docs/guide 2>/dev/null | tr '\n' ' ')
# `doc --lint mod.ts`: every export JSR renders has JSDoc, and no public type names a private one.
# The type check is here once, JSDoc examples and the Markdown pages' code blocks included: every
# `deno test` below runs with --no-check (each would otherwise type-check its files again, about
# two minutes of the main run).
for check in "fmt --check" "lint" "doc --lint mod.ts" "check --doc $targets" \
  "check --doc-only README.md docs/reference/"; do
  echo "== deno $check"
  # shellcheck disable=SC2086
  "$DENO" $check || static_failed=$((static_failed + 1))
done

# The 400-line cap on src/, ffi/ and csrc/ (.ci/line_cap.sh).
echo "== line cap"
.ci/line_cap.sh || static_failed=$((static_failed + 1))

echo "== deno test"
# Doc examples (README.md, docs/reference/ and JSDoc) run as tests too, so the examples stay true.
"$DENO" test -A --no-check --doc --v8-flags=--expose-gc \
  README.md docs/reference/ mod.ts src/ "${main_tests[@]}" "$@" 2>&1 | tee "$log"
test_rc=${PIPESTATUS[0]}

beside_rc=0
echo "== deno test, the tests that ran beside (${beside_tests[*]})"
wait "$beside_pid" || beside_rc=$?
cat "$beside_log"

# Ranks on one host talk over shared memory by default; the distributed tests run once more over
# Gloo (DTRAIN_SHM=0), the transport between hosts, so that both keep their guarantees. The tests
# of shared memory itself and of the emu backend (whose transport it is), and those that name
# every transport in one run (the half-precision collectives), choose their transport in every
# run: a second run would repeat the first.
# The fault-tolerant replicas make their own Gloo groups per quorum, the throttled link joins two
# network namespaces (Gloo between hosts), and the store's table has no transport: the same.
pinned_transport=(tests/distributed/shm_setup_test.ts tests/distributed/shm_test.ts
  tests/distributed/shm_netns_test.ts tests/distributed/emu_test.ts
  tests/distributed/half_collectives_test.ts tests/distributed/store_table_test.ts
  tests/distributed/throttled_link_test.ts tests/parallel/diloco_link_test.ts
  tests/parallel/ft_manager_test.ts tests/parallel/ft_diloco_test.ts tests/parallel/ft_quorum_test.ts)
mapfile -t gloo_tests < <(find tests/distributed tests/parallel -name '*_test.ts' |
  grep -vxF -f <(printf '%s\n' "${pinned_transport[@]}") | sort)
gloo_log=build/test-gloo.log
echo "== deno test, distributed tests again over Gloo (DTRAIN_SHM=0)"
DTRAIN_SHM=0 "$DENO" test -A --no-check --v8-flags=--expose-gc "${gloo_tests[@]}" \
  tests/train/ddp_train_test.ts tests/train/elastic_test.ts "$@" 2>&1 | tee "$gloo_log"
gloo_rc=${PIPESTATUS[0]}

# count WORD SUMMARY: the number before WORD in a `deno test` summary line, or 0.
count() { sed -nE "s/.*\\| ([0-9]+) $1.*/\\1/p" <<<"$2" | grep . || echo 0; }
passed=0 failed=$static_failed ignored=0
runs=("$log:$test_rc" "$gloo_log:$gloo_rc" "$beside_log:$beside_rc")
for run in "${runs[@]}"; do
  summary=$(grep -E '^(ok|FAILED) \| ' "${run%%:*}" | tail -n 1)
  passed=$((passed + $(count passed "$summary")))
  failed=$((failed + $(count failed "$summary")))
  ignored=$((ignored + $(count ignored "$summary")))
  if [[ -z "$summary" && ${run##*:} -ne 0 ]]; then failed=$((failed + 1)); fi
done
echo "${passed} passed, ${failed} failed, ${ignored} skipped"
[[ $failed -eq 0 && $test_rc -eq 0 && $gloo_rc -eq 0 && $beside_rc -eq 0 ]]
