"""The PyTorch twin of bench/gpt2_124m_worker.ts (issue 39's GPT-2 124M benchmark; bench/gpt2_124m.ts
runs both): one rank (or the one process) of nanoGPT's `model.py` GPT (vendored unchanged as
bench/gpt2_124m_nanogpt.py) at the given shape, f32, dropout 0, biases on, random tokens, and the
AdamW of nanoGPT's `configure_optimizers` (lr 6e-4, betas (0.9, 0.95), weight decay 0.1).
`--strategy` single (one process, `--threads` threads), ddp, or fsdp (FSDP2's `fully_shard` on each
block, then the root) over Gloo. Every rank prints one `BENCH_RESULT {json}` line with its own
peak RSS (VmHWM).
"""

import argparse
import json
import time

import torch
import torch.distributed as dist
import torch.nn as nn

from gpt2_124m_nanogpt import GPT, GPTConfig


def peak_rss_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return None


def main():
    p = argparse.ArgumentParser()
    for name in ["rank", "world-size", "port", "vocab", "block", "n-layer", "n-head", "n-embd",
                 "batch", "steps", "warmup", "threads"]:
        p.add_argument(f"--{name}", type=int, default=0)
    p.add_argument("--strategy", choices=["single", "fsdp", "ddp"], default="single")
    c = p.parse_args()
    torch.set_num_threads(max(c.threads, 1))
    world = 1
    if c.strategy != "single":
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{c.port}", rank=c.rank,
                                world_size=c.world_size)
        world = c.world_size
    torch.manual_seed(0)
    gpt = GPT(GPTConfig(block_size=c.block, vocab_size=c.vocab, n_layer=c.n_layer,
                        n_head=c.n_head, n_embd=c.n_embd, dropout=0.0, bias=True))
    model = gpt
    if c.strategy == "fsdp":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        mesh = init_device_mesh("cpu", (world,))
        for block in gpt.transformer.h:
            fully_shard(block, mesh=mesh)
        fully_shard(gpt, mesh=mesh)
    elif c.strategy == "ddp":
        model = nn.parallel.DistributedDataParallel(gpt)
    opt = gpt.configure_optimizers(weight_decay=0.1, learning_rate=6e-4, betas=(0.9, 0.95),
                                   device_type="cpu")
    g = torch.Generator().manual_seed(1 + c.rank)
    step_ms = []
    phase_ms = []  # forward, backward (with its communication), optimizer of each timed step
    for step in range(c.warmup + c.steps):
        idx = torch.randint(0, c.vocab, (c.batch, c.block + 1), generator=g)
        start = time.perf_counter()
        x, y = idx[:, :-1].contiguous(), idx[:, 1:].contiguous()  # as nanoGPT's get_batch
        _, loss = model(x, y)
        loss_value = loss.item()
        forward_end = time.perf_counter()
        loss.backward()
        backward_end = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        end = time.perf_counter()
        if step >= c.warmup:
            step_ms.append(1000 * (end - start))
            phase_ms.append([1000 * (forward_end - start), 1000 * (backward_end - forward_end),
                             1000 * (end - backward_end)])
    if world > 1:
        dist.barrier()
    print("BENCH_RESULT " + json.dumps({
        "framework": "torch",
        "strategy": c.strategy,
        "rank": c.rank,
        "worldSize": world,
        "tokensPerSecond": c.steps * c.batch * c.block * world / (sum(step_ms) / 1000),
        "stepMs": step_ms,
        "phaseMs": phase_ms,
        "peakRssBytes": peak_rss_bytes(),
        "loss": loss_value,
    }), flush=True)
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
