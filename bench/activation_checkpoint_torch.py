"""The PyTorch side of the activation-checkpointing section of `make bench` (bench/main.ts runs
it; never a test dependency): bench/gpt_torch.py's GPT at block size 256, each block wrapped in
torch.distributed's `checkpoint_wrapper` (non-reentrant `torch.utils.checkpoint`, what
torchtitan's full AC does) or not, timed like bench/activation_checkpoint.ts. Activation memory is
the malloc'd bytes in use after forward over those before it (glibc's mallinfo2: PyTorch's CPU
allocator mallocs every tensor). Prints one `BENCH_RESULT {json}` line.
"""

import argparse
import ctypes
import gc
import json
import time

import torch
import torch.nn.functional as F
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

from gpt_torch import GPT

_libc = ctypes.CDLL("libc.so.6")


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


_libc.mallinfo2.restype = _Mallinfo2


def malloc_in_use():
    info = _libc.mallinfo2()
    return info.uordblks + info.hblkhd


def measure(a, ac):
    torch.manual_seed(0)
    model = GPT(a)
    if ac == "full":
        for i, block in enumerate(model.h):
            model.h[i] = checkpoint_wrapper(block)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = torch.tensor([(i * 7919) % a.vocab for i in range(a.batch * (a.block + 1))])
    tokens = tokens.view(a.batch, a.block + 1)
    x, y = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()

    def step(record=None):
        if record is not None:
            gc.collect()
            before = malloc_in_use()
        loss = F.cross_entropy(model(x).view(-1, a.vocab), y.view(-1))
        if record is not None:
            gc.collect()
            record.append(malloc_in_use() - before)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(a.warmup):
        step()
    held = []
    step(held)
    times = []
    for _ in range(a.steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    times.sort()
    return {"activationBytes": held[0], "stepMs": times[len(times) // 2] * 1000}


def main():
    p = argparse.ArgumentParser()
    for name in ["threads", "layers", "heads", "width", "block", "vocab", "batch", "warmup", "steps"]:
        p.add_argument(f"--{name}", type=int, required=True)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    none, full = measure(a, "none"), measure(a, "full")
    result = {"framework": "torch", "noneActivationBytes": none["activationBytes"],
              "fullActivationBytes": full["activationBytes"], "noneStepMs": none["stepMs"],
              "fullStepMs": full["stepMs"]}
    print("BENCH_RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
