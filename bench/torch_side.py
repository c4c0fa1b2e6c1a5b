"""The PyTorch side of `make bench` (bench/main.ts runs it; never a test dependency).

Runs the same workloads as dtrain's workers, with the numbers bench/main.ts passes on the
command line (bench/workload.ts is their one source), and prints one `BENCH_RESULT {json}` line:

  single     one epoch of Fashion-MNIST on the MLP, batches indexed from preloaded tensors
  peak       the best of --reps N^3 torch.mm products, in GFLOP/s
  ddp        one rank of a DDP epoch (torch.distributed, Gloo, init_method tcp://)

(The all-reduce section of bench/main.ts runs bench/allreduce.ts and bench/allreduce_torch.py.)

Fashion-MNIST is read from the same IDX files as dtrain's FashionMNIST, without torchvision.
"""

import argparse
import gzip
import json
import math
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F


def since_spawn_ms():
    """Milliseconds since the parent spawned us (it passes its clock in DTRAIN_BENCH_T0)."""
    t0 = float(os.environ.get("DTRAIN_BENCH_T0", "0"))
    return time.time() * 1000 - t0 if t0 > 0 else None


def peak_rss_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return None


def report(result):
    print("BENCH_RESULT " + json.dumps(result), flush=True)


def read_idx(path):
    data = gzip.open(path).read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    flat = torch.frombuffer(bytearray(data), dtype=torch.uint8, offset=4 + 4 * ndim)
    return flat.reshape(dims)


def load_fashion_mnist(args):
    """Images as one normalised float tensor [60000, 784], labels as int64 [60000]."""
    images = read_idx(os.path.join(args.root, "train-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(args.root, "train-labels-idx1-ubyte.gz"))
    x = images.reshape(images.shape[0], -1).float().div_(255).sub_(args.mean).div_(args.std)
    return x, labels.long()


def mlp(sizes):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i + 2 < len(sizes):
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def flops_per_step(batch, sizes):
    forward = sum(2 * batch * sizes[i] * sizes[i + 1] for i in range(len(sizes) - 1))
    return 3 * forward - 2 * batch * sizes[0] * sizes[1]


def single(args):
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    x_all, y_all = load_fashion_mnist(args)
    model = mlp(args.sizes)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    n = x_all.shape[0]
    steps = samples = 0
    loss_sum = last_losses = 0.0
    first_step_ms = None
    total_steps = math.ceil(n / args.batch)
    start = time.perf_counter()
    order = torch.randperm(n, generator=torch.Generator().manual_seed(args.seed))
    for i in range(0, n, args.batch):
        idx = order[i : i + args.batch]
        x, y = x_all[idx], y_all[idx]
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        value = loss.item()
        if steps == 0:
            first_step_ms = since_spawn_ms()
        samples += x.shape[0]
        loss_sum += value
        steps += 1
        if steps > total_steps - 100:
            last_losses += value
    seconds = time.perf_counter() - start
    return {
        "samples": samples,
        "steps": steps,
        "seconds": seconds,
        "samplesPerSecond": samples / seconds,
        "gflops": flops_per_step(args.batch, args.sizes) * steps / seconds / 1e9,
        "firstStepMs": first_step_ms,
        "peakRssBytes": peak_rss_bytes(),
        "meanLoss": loss_sum / steps,
        "lastLoss": last_losses / min(100, steps),
    }


def peak(args):
    torch.set_num_threads(args.threads)
    a, b = torch.randn(args.n, args.n), torch.randn(args.n, args.n)
    torch.mm(a, b)
    best = math.inf
    for _ in range(args.reps):
        t0 = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - t0)
    return {"n": args.n, "seconds": best, "gflops": 2 * args.n**3 / best / 1e9}


def init_group(args):
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{args.port}",
        rank=args.rank,
        world_size=args.world_size,
    )


def ddp(args):
    torch.set_num_threads(args.threads)
    init_group(args)
    torch.manual_seed(args.seed)
    x_all, y_all = load_fashion_mnist(args)
    model = torch.nn.parallel.DistributedDataParallel(mlp(args.sizes))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    # torch.utils.data.DistributedSampler's arithmetic: pad to a multiple, take every ws-th.
    n, ws = x_all.shape[0], args.world_size
    total = math.ceil(n / ws) * ws
    order = torch.randperm(n, generator=torch.Generator().manual_seed(args.seed))
    order = torch.cat([order, order[: total - n]])[args.rank : total : ws]
    steps, loss_sum = 0, 0.0
    dist.barrier()
    start = time.perf_counter()
    for i in range(0, order.shape[0], args.batch):
        idx = order[i : i + args.batch]
        loss = F.cross_entropy(model(x_all[idx]), y_all[idx])
        loss.backward()
        opt.step()
        opt.zero_grad()
        loss_sum += loss.item()
        steps += 1
    dist.barrier()
    seconds = time.perf_counter() - start
    result = {
        "worldSize": ws,
        "samples": total,
        "steps": steps,
        "seconds": seconds,
        "samplesPerSecond": total / seconds,
        "meanLoss": loss_sum / steps,
    }
    dist.destroy_process_group()
    return result if args.rank == 0 else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["single", "peak", "ddp"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--sizes", type=lambda s: [int(v) for v in s.split(",")])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--mean", type=float, default=0.0)
    parser.add_argument("--std", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--root", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--n", type=int, default=2048)
    parser.add_argument("--reps", type=int, default=8)
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--world-size", type=int, default=1)
    parser.add_argument("--port", type=int, default=29500)
    args = parser.parse_args()
    result = {"single": single, "peak": peak, "ddp": ddp}[args.mode](args)
    if result is not None:
        report({"framework": "torch", "mode": args.mode, "threads": args.threads, **result})


if __name__ == "__main__":
    main()
