#!/usr/bin/env bash
# The whole test suite: static checks, then `deno test`, ending with one summary line
# ("N passed, N failed") that CI reads.
set -uo pipefail
export NO_COLOR=1
cd "$(dirname "$0")/.."
DENO=${DENO:-$(scripts/bootstrap.sh | tail -n 1)}
mkdir -p build
log=build/test.log

static_failed=0
targets=$(ls -d mod.ts src ffi tests bench 2>/dev/null | tr '\n' ' ')
# `doc --lint mod.ts`: every export JSR renders has JSDoc, and no public type names a private one.
for check in "fmt --check" "lint" "doc --lint mod.ts" "check $targets"; do
  echo "== deno $check"
  # shellcheck disable=SC2086
  "$DENO" $check || static_failed=$((static_failed + 1))
done

echo "== deno test"
# Doc examples (README.md and JSDoc) run as tests too, so the examples stay true.
"$DENO" test -A --doc --v8-flags=--expose-gc README.md mod.ts src/ tests/ "$@" 2>&1 | tee "$log"
test_rc=${PIPESTATUS[0]}

summary=$(grep -E '^(ok|FAILED) \| ' "$log" | tail -n 1)
passed=$(sed -nE 's/.*\| ([0-9]+) passed.*/\1/p' <<<"$summary")
failed=$(sed -nE 's/.*\| ([0-9]+) failed.*/\1/p' <<<"$summary")
ignored=$(sed -nE 's/.*\| ([0-9]+) ignored.*/\1/p' <<<"$summary")
passed=${passed:-0}
failed=$(( ${failed:-0} + static_failed ))
if [[ -z "$summary" && $test_rc -ne 0 ]]; then failed=$((failed + 1)); fi
echo "${passed} passed, ${failed} failed, ${ignored:-0} skipped"
[[ $failed -eq 0 && $test_rc -eq 0 ]]
