"""The PyTorch side of the FSDP section of `make bench`: one rank of nanoGPT-style GPT training
with FSDP2's `fully_shard` (each block, then the root) or DDP, on CPU over Gloo, with the numbers
bench/main.ts passes (bench/fsdp.ts is dtrain's twin). Prints one `BENCH_RESULT {json}` line on
rank 0: tokens/s, step time, per-rank bytes of parameters + gradients + AdamW state, peak RSS.
"""

import argparse
import json
import math
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from types import SimpleNamespace

from gpt_torch import GPT


def make_gpt(c):
    """bench/gpt_torch.py's GPT (nanoGPT's architecture) in this bench's shape, N(0, 0.02) init."""
    model = GPT(SimpleNamespace(vocab=c.vocab, block=c.block, width=c.n_embd, heads=c.n_head,
                                layers=c.n_layer))
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
    return model


def peak_rss_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return None


def main():
    p = argparse.ArgumentParser()
    for name in ["rank", "world-size", "port", "vocab", "block", "n-layer", "n-head", "n-embd",
                 "batch", "steps", "warmup"]:
        p.add_argument(f"--{name}", type=int, required=True)
    p.add_argument("--strategy", choices=["fsdp", "ddp"], default="fsdp")
    # bf16: FSDP2's MixedPrecisionPolicy(param_dtype=torch.bfloat16): bf16 all-gathers, and
    # reduce-scatters in bf16 too (reduce_dtype defaults to param_dtype), as dtrain's mpPolicy.
    p.add_argument("--param-dtype", choices=["f32", "bf16"], default="f32")
    c = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{c.port}", rank=c.rank,
                            world_size=c.world_size)
    torch.manual_seed(0)
    model = make_gpt(c)
    if c.strategy == "fsdp":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        mesh = init_device_mesh("cpu", (c.world_size,))
        policy = MixedPrecisionPolicy(
            param_dtype=torch.bfloat16 if c.param_dtype == "bf16" else None)
        for block in model.h:
            fully_shard(block, mesh=mesh, mp_policy=policy)
        fully_shard(model, mesh=mesh, mp_policy=policy)
        local = sum(p.to_local().numel() for p in model.parameters())
    else:
        model = nn.parallel.DistributedDataParallel(model)
        local = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    g = torch.Generator().manual_seed(1 + c.rank)
    step_times = []
    for step in range(c.warmup + c.steps):
        idx = torch.randint(0, c.vocab, (c.batch, c.block + 1), generator=g)
        start = time.perf_counter()
        logits = model(idx[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, c.vocab), idx[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step >= c.warmup:
            step_times.append(time.perf_counter() - start)
    dist.barrier()
    seconds = sum(step_times)
    if c.rank == 0:
        tokens = c.steps * c.batch * c.block * c.world_size
        print("BENCH_RESULT " + json.dumps({
            "framework": "torch",
            "strategy": c.strategy,
            "paramDtype": c.param_dtype,
            "worldSize": c.world_size,
            "tokensPerSecond": tokens / seconds,
            "stepMs": 1000 * seconds / c.steps,
            "localParams": local,
            "stateBytes": local * 4 * 4,
            "peakRssBytes": peak_rss_bytes(),
            "loss": loss.item(),
        }), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
