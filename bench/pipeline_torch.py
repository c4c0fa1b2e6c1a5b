"""The PyTorch side of the pipeline section of `make bench` (never a test dependency): one rank of
GPT training with `torch.distributed.pipelining` on CPU over Gloo. The model is bench/gpt_torch.py's
GPT (nanoGPT's architecture), split torchtitan's way: each stage is a copy of the model with the
other stages' blocks removed, the first keeping wte/wpe, the last ln_f/lm_head (untied: the tied
weight would live on two stages). Each rank holds `--stages-per-rank` stages (2 for
Interleaved1F1B), looped: rank r holds stages r, r + world, ...

Memory, as bench/pipeline_worker.ts samples it: malloc'd bytes in use (mallinfo2, as
bench/activation_checkpoint_torch.py) after a collection, over those before the stages were made,
once before an untimed step (the model state) and before each backward of that step (plus the
activations in flight); the largest is `peak_bytes`. Peak RSS too, each rank's.

Besides tokens/s and memory it measures the bubble: each stage's forward_one_chunk and
backward_one_chunk calls are timed, and a rank's bubble is 1 - (its busy time) / (step time), the
share of the step it spends waiting on its neighbours.

Prints one `BENCH_RESULT {json}` line on rank 0, with every rank's busy time gathered.
"""

import argparse
import copy
import gc
import json
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from activation_checkpoint_torch import malloc_in_use
from fsdp_torch import make_gpt
from torch_side import peak_rss_bytes


class Stage(nn.Module):
    """Blocks [first, last) of a GPT, with the embeddings on stage 0 and the head on the last."""

    def __init__(self, model, first, last, is_first, is_last):
        super().__init__()
        self.wte = model.wte if is_first else None
        self.wpe = model.wpe if is_first else None
        self.h = nn.ModuleList(model.h[first:last])
        self.ln_f = model.ln_f if is_last else None
        self.lm_head = model.lm_head if is_last else None

    def forward(self, x):
        if self.wte is not None:
            x = self.wte(x) + self.wpe(torch.arange(x.shape[1]))
        for block in self.h:
            x = block(x)
        if self.lm_head is not None:
            x = self.lm_head(self.ln_f(x))
        return x


def make_stage(c, index, n_stages):
    torch.manual_seed(0)
    model = make_gpt(c)
    model = copy.deepcopy(model)
    model.lm_head.weight = nn.Parameter(model.wte.weight.detach().clone())  # untied
    per = c.n_layer // n_stages
    return Stage(model, index * per, (index + 1) * per, index == 0, index == n_stages - 1)


def main():
    p = argparse.ArgumentParser()
    for name in ["rank", "world-size", "port", "vocab", "block", "n-layer", "n-head", "n-embd",
                 "batch", "microbatches", "steps", "warmup"]:
        p.add_argument(f"--{name}", type=int, required=True)
    p.add_argument("--schedule", choices=["gpipe", "1f1b", "interleaved"], required=True)
    c = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{c.port}", rank=c.rank,
                            world_size=c.world_size)
    from torch.distributed.pipelining import (PipelineStage, Schedule1F1B, ScheduleGPipe,
                                              ScheduleInterleaved1F1B)
    per_rank = 2 if c.schedule == "interleaved" else 1
    n_stages = c.world_size * per_rank
    indices = [c.rank + k * c.world_size for k in range(per_rank)]
    baseline = malloc_in_use()
    modules = [make_stage(c, i, n_stages) for i in indices]
    stages = [PipelineStage(m, i, n_stages, torch.device("cpu")) for m, i in zip(modules, indices)]

    busy = [0.0]
    before_backward = [None]

    def timed(fn):
        def run(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                busy[0] += time.perf_counter() - start
        return run

    def sampled(fn):
        def run(*args, **kwargs):
            if before_backward[0] is not None:
                before_backward[0]()
            return fn(*args, **kwargs)
        return run

    for s in stages:
        s.forward_one_chunk = timed(s.forward_one_chunk)
        s.backward_one_chunk = sampled(timed(s.backward_one_chunk))

    def loss_fn(logits, targets):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    kind = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}.get(c.schedule)
    if kind is not None:
        schedule = kind(stages[0], n_microbatches=c.microbatches, loss_fn=loss_fn)
    else:
        schedule = ScheduleInterleaved1F1B(stages, n_microbatches=c.microbatches, loss_fn=loss_fn)
    params = [q for m in modules for q in m.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-3, foreach=False)  # as bench/nd_torch.py
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, c.vocab, (c.batch, c.block), generator=g)
    y = torch.randint(0, c.vocab, (c.batch, c.block), generator=g)
    holds_first = 0 in indices
    holds_last = n_stages - 1 in indices

    def step():
        opt.zero_grad()
        kwargs = {}
        if holds_last:
            kwargs["target"] = y
        if holds_first:
            schedule.step(x, **kwargs)
        else:
            schedule.step(**kwargs)
        opt.step()

    for _ in range(c.warmup):
        step()

    def settled_bytes():
        gc.collect()
        return malloc_in_use() - baseline

    model_bytes = settled_bytes()
    peak = [model_bytes]
    before_backward[0] = lambda: peak.__setitem__(0, max(peak[0], settled_bytes()))
    step()
    before_backward[0] = None
    times, busies = [], []
    for _ in range(c.steps):
        dist.barrier()
        busy[0] = 0.0
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
        busies.append(busy[0])
    # Each rank's bubble in each step, gathered on rank 0, then its memory.
    mine = torch.tensor([b / t for b, t in zip(busies, times)], dtype=torch.float64)
    every = [torch.zeros_like(mine) for _ in range(c.world_size)]
    dist.all_gather(every, mine)
    memory = torch.tensor([model_bytes, peak[0], peak_rss_bytes()], dtype=torch.float64)
    memories = [torch.zeros_like(memory) for _ in range(c.world_size)]
    dist.all_gather(memories, memory)
    if c.rank == 0:
        med = sorted(times)[len(times) // 2]
        bubbles = [1 - sorted(r.tolist())[len(times) // 2] for r in every]
        print("BENCH_RESULT " + json.dumps({
            "framework": "torch",
            "schedule": c.schedule,
            "stages": n_stages,
            "microbatches": c.microbatches,
            "step_ms": med * 1e3,
            "tokens_per_second": c.batch * c.block / med,
            "bubble_per_rank": bubbles,
            "bubble": sum(bubbles) / len(bubbles),
            "model_bytes_per_rank": [m[0].item() for m in memories],
            "peak_bytes_per_rank": [m[1].item() for m in memories],
            "peak_rss_bytes_per_rank": [m[2].item() for m in memories],
            "torch": torch.__version__,
        }))
    dist.barrier()  # no rank tears Gloo down under a peer's last messages
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
