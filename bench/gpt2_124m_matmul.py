"""PyTorch's twin of bench/gpt2_124m_matmul.ts: the matrix products of one GPT-2 124M forward at
block 1024, micro-batch 1 (F.linear of [1024, in] by [out, in]), best of 3, GFLOP/s per shape."""

import json
import sys
import time

import torch
import torch.nn.functional as F

torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
SHAPES = [("c_attn", 768, 2304), ("attn.c_proj", 768, 768), ("c_fc", 768, 3072),
          ("mlp.c_proj", 3072, 768), ("lm_head", 768, 50304)]
gflops = {}
for name, in_f, out_f in SHAPES:
    x, w = torch.randn(1024, in_f), torch.randn(out_f, in_f)
    best = float("inf")
    for rep in range(4):
        start = time.perf_counter()
        F.linear(x, w)
        if rep > 0:
            best = min(best, time.perf_counter() - start)
    gflops[name] = 2 * 1024 * in_f * out_f / best / 1e9
print(json.dumps({"framework": "torch", "gflops": gflops}))
