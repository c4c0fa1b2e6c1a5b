#!/usr/bin/env bash
# Makes a fresh Debian/Ubuntu machine ready for dtrain: the Debian packages the native
# library links against, and a pinned Deno from the npm registry in .tools/ when none is on PATH.
# Prints the path of the deno binary to use on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."

DENO_VERSION=2.9.6
# fortunes: the text corpus of the GPT job; slurm-wlm and munge: the SLURM cluster
# tests/infrastructure/slurm_test.ts brings up; shellcheck: the lint of the start-up and batch
# scripts; libdnnl2: oneDNN, opened at run time for bf16 products where the CPU has bf16
# instructions (csrc/core/matmul_bf16.c; nothing links it).
APT_PACKAGES=(build-essential libopenblas-dev libgloo-dev dataset-fashion-mnist xz-utils iproute2
  fortunes slurm-wlm munge shellcheck libdnnl2)
# Headless Chromium for the report's screenshot test (tests/train/report_test.ts) is opt-in: it is
# about 130 packages and 290 MB, more than the rest together, and the test says it skipped.
if [[ ${DTRAIN_CHROMIUM:-0} == 1 ]]; then APT_PACKAGES+=(chromium); fi

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    echo "bootstrap: installing ${missing[*]}" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}") >&2
  else
    echo "bootstrap: missing Debian packages: ${missing[*]}" >&2
    echo "bootstrap: run: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

if command -v deno >/dev/null && deno --version | grep -q "^deno 2\."; then
  command -v deno
  exit 0
fi
if [[ ! -x .tools/node_modules/.bin/deno ]] || ! .tools/node_modules/.bin/deno --version | grep -q "^deno $DENO_VERSION"; then
  command -v npm >/dev/null || { echo "bootstrap: neither deno nor npm is on PATH; install Node.js (npm) or Deno $DENO_VERSION" >&2; exit 1; }
  echo "bootstrap: installing deno $DENO_VERSION from the npm registry into .tools/" >&2
  mkdir -p .tools
  npm install --prefix .tools --no-audit --no-fund --loglevel=error "deno@$DENO_VERSION" >&2
fi
deno_bin="$PWD/.tools/node_modules/.bin/deno"
# The docs' commands are `deno task ...`: make the pinned Deno reachable by that name. As root,
# link it into /usr/local/bin (on PATH on Debian and Ubuntu); otherwise say the line to run.
if ! command -v deno >/dev/null; then
  if [[ $(id -u) -eq 0 && -d /usr/local/bin && -w /usr/local/bin && ! -e /usr/local/bin/deno ]] &&
    [[ ":$PATH:" == *:/usr/local/bin:* ]]; then
    ln -s "$deno_bin" /usr/local/bin/deno
    echo "bootstrap: linked /usr/local/bin/deno to $deno_bin" >&2
  else
    echo "bootstrap: deno is not on PATH; for the docs' \`deno task\` commands, run:" >&2
    echo "  export PATH=\"$PWD/.tools/node_modules/.bin:\$PATH\"" >&2
  fi
fi
echo "$deno_bin"
