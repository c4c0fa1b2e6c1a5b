"""The PyTorch side of the N-D parallelism section of `make bench` (bench/nd_section.ts runs it;
never a test dependency): one rank of bench/fsdp_torch.py's GPT (nanoGPT's architecture) trained
with AdamW on CPU over Gloo, one intra-op thread, laid out by --layout as bench/nd_worker.ts does:

  one      one process, no wrapper (the activation-memory reference)
  tp       parallelize_module over all ranks with the plan of dtrain's parallelizeGPT: c_attn and
           c_fc ColwiseParallel, both c_proj RowwiseParallel, wte RowwiseParallel and lm_head
           ColwiseParallel (gathered logits) on the vocabulary, their weight tied again after
  ddp      DistributedDataParallel, each rank --batch / world rows
  hsdp     fully_shard (each block, then the root) on a (dp_replicate, dp_shard) mesh
  tp_fsdp  a (dp, tp) mesh: the TP plan on tp, then fully_shard on dp

PyTorch's ColwiseParallel splits c_attn's 3·C output rows into contiguous halves; its rows are
reordered before (q, k, v of each rank's heads side by side, what dtrain's `chunks: 3` holds), and
each block runs attention over the heads its rank holds. Memory: malloc'd bytes in use (mallinfo2,
as bench/activation_checkpoint_torch.py) after a collection, over those before the model was made,
at the points bench/nd_worker.ts samples `allocatedBytes()`. Prints one `BENCH_RESULT` line on
rank 0.
"""

import argparse
import gc
import json
import time
import types

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import Replicate
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

from activation_checkpoint_torch import malloc_in_use
from fsdp_torch import make_gpt, peak_rss_bytes


def local_heads_forward(self, x):
    """gpt_torch's Block.forward over the heads whose q, k, v this rank's c_attn computes."""
    b, t, width = x.shape
    qkv = self.c_attn(self.ln_1(x))
    c = qkv.shape[-1] // 3
    heads = self.heads * c // width
    q, k, v = (z.view(b, t, heads, c // heads).transpose(1, 2) for z in qkv.split(c, dim=2))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    x = x + self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))
    return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


def tensor_parallel(model, mesh):
    """dtrain's gptTensorParallelPlan (no sequence parallelism, gathered logits) on `mesh`."""
    tp = mesh.size()
    with torch.no_grad():
        for block in model.h:
            c = block.c_attn.weight.shape[1]
            order = torch.arange(3 * c).view(3, tp, c // tp).transpose(0, 1).reshape(-1)
            block.c_attn.weight.copy_(block.c_attn.weight[order])
            block.c_attn.bias.copy_(block.c_attn.bias[order])
            block.forward = types.MethodType(local_heads_forward, block)
    parallelize_module(model, mesh, {
        "wte": RowwiseParallel(input_layouts=Replicate(), output_layouts=Replicate()),
        "lm_head": ColwiseParallel(output_layouts=Replicate()),
        "h.*.c_attn": ColwiseParallel(),
        "h.*.c_proj": RowwiseParallel(),
        "h.*.c_fc": ColwiseParallel(),
        "h.*.mlp_proj": RowwiseParallel(),
    })
    # parallelize_module distributes wte's and lm_head's weight separately (both Shard(0)).
    model.lm_head.weight = model.wte.weight


def shard_blocks(model, mesh):
    for block in model.h:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)


def lay(c, model):
    """Applies the layout; returns (the module to call, data-parallel rank, size, rows)."""
    world = c.world_size
    if c.layout == "one":
        return model, 0, 1, c.batch
    if c.layout == "tp":
        tensor_parallel(model, init_device_mesh("cpu", (world,), mesh_dim_names=("tp",)))
        return model, 0, 1, c.batch
    if c.layout == "ddp":
        return torch.nn.parallel.DistributedDataParallel(model), c.rank, world, c.batch // world
    if c.layout == "hsdp":
        mesh = init_device_mesh("cpu", (2, world // 2), mesh_dim_names=("dp_replicate", "dp_shard"))
        shard_blocks(model, mesh)
        return model, c.rank, world, c.batch
    mesh = init_device_mesh("cpu", (world // 2, 2), mesh_dim_names=("dp", "tp"))
    tensor_parallel(model, mesh["tp"])
    shard_blocks(model, mesh["dp"])
    return model, mesh.get_coordinate()[0], world // 2, c.batch


def main():
    p = argparse.ArgumentParser()
    for name in ["rank", "world-size", "port", "vocab", "block", "n-layer", "n-head", "n-embd",
                 "batch", "steps", "warmup"]:
        p.add_argument(f"--{name}", type=int, required=True)
    p.add_argument("--layout", choices=["one", "tp", "ddp", "hsdp", "tp_fsdp"], required=True)
    c = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{c.port}", rank=c.rank,
                            world_size=c.world_size)
    gc.collect()
    baseline = malloc_in_use()
    torch.manual_seed(0)
    model = make_gpt(c)
    run, dp_rank, dp_size, rows = lay(c, model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    # The ranks of one data-parallel replica (the TP ranks) read the same tokens.
    g = torch.Generator().manual_seed(1 + dp_rank)

    def step(memory=None):
        def note():
            if memory is not None:
                gc.collect()
                memory.append(malloc_in_use() - baseline)
        idx = torch.randint(0, c.vocab, (rows, c.block + 1), generator=g)
        note()
        logits = run(idx[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, c.vocab), idx[:, 1:].reshape(-1))
        note()
        loss.backward()
        note()
        opt.step()
        note()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    for _ in range(c.warmup):
        step()
    memory = []
    step(memory)
    dist.barrier()
    times = []
    for _ in range(c.steps):
        start = time.perf_counter()
        loss = step()
        times.append(time.perf_counter() - start)
    dist.barrier()
    times.sort()
    step_ms = times[len(times) // 2] * 1000
    if c.rank == 0:
        print("BENCH_RESULT " + json.dumps({
            "framework": "torch",
            "layout": c.layout,
            "worldSize": c.world_size,
            "tokensPerSecond": dp_size * rows * c.block / (step_ms / 1000),
            "stepMs": step_ms,
            "stepBytes": max(memory),
            "memoryByPhase": memory,
            "peakRssBytes": peak_rss_bytes(),
            "loss": loss,
        }), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
