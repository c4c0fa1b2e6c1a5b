#!/usr/bin/env bash
# The size cap: no source file in src/, ffi/ or csrc/ over 400 lines, so that each file stays one
# concept a reader can hold (a file that grows past it is split by concept, not trimmed).
# Prints each file over the cap with its length; exits 1 if there is any.
set -euo pipefail
cd "$(dirname "$0")/.."
CAP=${DTRAIN_LINE_CAP:-400}
over=0
while IFS= read -r -d '' file; do
  lines=$(wc -l <"$file")
  if ((lines > CAP)); then
    echo "line cap: $file has $lines lines (cap $CAP): split it by concept" >&2
    over=$((over + 1))
  fi
done < <(git ls-files -z --cached --others --exclude-standard -- src ffi csrc)
if ((over)); then exit 1; fi
echo "line cap: every file in src/, ffi/ and csrc/ has at most $CAP lines"
