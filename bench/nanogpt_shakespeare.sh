#!/usr/bin/env bash
# nanoGPT's Shakespeare character model on the CPU, dtrain's train job beside PyTorch's nanoGPT on
# the same machine in the same run (issue 23): nanoGPT's config/train_shakespeare_char.py with the
# flags of its README's CPU run, 2,000 iterations each. Prints both wall times, their ratio and the
# validation losses every 250 iterations; the results go in BENCHMARKS.md. Not a test (about 4 min).
#
#   NANOGPT_DIR=~/src/nanoGPT DTRAIN_BENCH_PYTHON=.torchenv/bin/python3 bench/nanogpt_shakespeare.sh [INPUT_TXT]
#
# NANOGPT_DIR is a checkout of karpathy/nanoGPT (train.py, model.py, configurator.py, config/ and
# data/shakespeare_char/prepare.py); DTRAIN_BENCH_PYTHON a python with torch and numpy. INPUT_TXT
# defaults to ../shared/data/tinyshakespeare/input.txt beside the checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
input=$(readlink -f "${1:-$root/../shared/data/tinyshakespeare/input.txt}")
python=${DTRAIN_BENCH_PYTHON:-python3}
[[ -n ${NANOGPT_DIR:-} && -f $NANOGPT_DIR/train.py ]] || {
  echo "nanogpt_shakespeare: set NANOGPT_DIR to a checkout of karpathy/nanoGPT" >&2
  exit 2
}
[[ -f $input ]] || { echo "nanogpt_shakespeare: no input text at $input" >&2; exit 2; }
"$python" -c "import torch, numpy" 2>/dev/null || {
  echo "nanogpt_shakespeare: $python has no torch/numpy (set DTRAIN_BENCH_PYTHON)" >&2
  exit 2
}
deno=$(scripts/bootstrap.sh | tail -n 1)
make -s build >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The README's CPU run, spelled for each side.
flags=(eval_iters=20 log_interval=1 block_size=64 batch_size=12 n_layer=4 n_head=4 n_embd=128
  max_iters=2000 lr_decay_iters=2000 dropout=0.0)
now() { date +%s.%N; }

# ---- dtrain: deno task prepare, then the train job ----
"$deno" run -A src/prepare/main.ts --tokenizer char --input "$input" --out "$work/dtrain_data" >/dev/null
dtrain_flags=(--device cpu)
for f in "${flags[@]}"; do
  key=${f%%=*} value=${f#*=}
  dtrain_flags+=("--${key//_/-}" "$value")
done
start=$(now)
"$deno" run -A --v8-flags=--expose-gc src/train/main.ts \
  --config "$NANOGPT_DIR/config/train_shakespeare_char.py" --data-dir "$work/dtrain_data" \
  --out-dir "$work/dtrain_out" "${dtrain_flags[@]}" >"$work/dtrain.log" 2>&1 ||
  { cat "$work/dtrain.log" >&2; exit 1; }
dtrain_s=$(echo "$(now) - $start" | bc)

# ---- PyTorch: nanoGPT's prepare.py and train.py, unchanged, in a copy of the checkout ----
cp -r "$NANOGPT_DIR" "$work/nanogpt"
cp "$input" "$work/nanogpt/data/shakespeare_char/input.txt"
# prepare.py imports requests to download input.txt, which is already there.
(cd "$work/nanogpt" && "$python" -c "
import runpy, sys, types
sys.modules.setdefault('requests', types.ModuleType('requests'))
runpy.run_path('data/shakespeare_char/prepare.py', run_name='__main__')" >/dev/null)
torch_flags=(--device=cpu --compile=False)
for f in "${flags[@]}"; do torch_flags+=("--$f"); done
start=$(now)
(cd "$work/nanogpt" && "$python" train.py config/train_shakespeare_char.py "${torch_flags[@]}" \
  >"$work/torch.log" 2>&1) || { cat "$work/torch.log" >&2; exit 1; }
torch_s=$(echo "$(now) - $start" | bc)

evals() { grep -E '^(\[rank 0\] )?step [0-9]+: train loss' "$1" | sed -E 's/^\[rank 0\] //'; }
echo "== dtrain ($(nproc) cores)"; evals "$work/dtrain.log"
echo "== PyTorch nanoGPT ($("$python" -c 'import torch; print(torch.__version__)'))"; evals "$work/torch.log"
dtrain_val=$(evals "$work/dtrain.log" | tail -n 1 | sed -E 's/.*val loss ([0-9.]+).*/\1/')
torch_val=$(evals "$work/torch.log" | tail -n 1 | sed -E 's/.*val loss ([0-9.]+).*/\1/')
printf 'BENCH_RESULT {"dtrain_s": %.1f, "torch_s": %.1f, "time_ratio": %.3f, "dtrain_val": %s, "torch_val": %s}\n' \
  "$dtrain_s" "$torch_s" "$(echo "$torch_s / $dtrain_s" | bc -l)" "$dtrain_val" "$torch_val"
echo "dtrain ${dtrain_s%.*} s (val $dtrain_val), PyTorch nanoGPT ${torch_s%.*} s (val $torch_val)"
