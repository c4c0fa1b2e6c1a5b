"""All-reduce benchmark of torch.distributed over Gloo: the twin of bench/allreduce.ts.

Two processes on 127.0.0.1 all-reduce (sum, in place) f32 tensors of 4 KiB ... 64 MiB with the
same iteration counts and timing rule as the dtrain benchmark (fastest of 5 trials). Prints a table, or one JSON
line with --json (read by bench/allreduce.ts for its side-by-side table).

    "${DTRAIN_BENCH_PYTHON:-python3}" bench/allreduce_torch.py [--json] [--port 29611]
"""

import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SIZES = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]
TRIALS = 5


def iterations(nbytes: int) -> int:
    """Same rule as bench/allreduce.ts: about 256 MiB moved per trial, 5..1000 iterations."""
    return max(5, min(1000, (256 << 20) // nbytes))


def worker(rank: int, world: int, port: int, queue) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    rows = []
    for nbytes in SIZES:
        x = torch.ones(nbytes // 4, dtype=torch.float32)
        n = iterations(nbytes)
        for _ in range(min(n, 20)):
            dist.all_reduce(x)
        trials = []
        for _ in range(TRIALS):
            dist.barrier()
            start = time.perf_counter()
            for _ in range(n):
                dist.all_reduce(x)
            trials.append((time.perf_counter() - start) / n)
        rows.append({"bytes": nbytes, "seconds": min(trials)})
    if rank == 0:
        queue.put(rows)
    dist.destroy_process_group()


def busbw(nbytes: int, seconds: float, world: int) -> float:
    return 2 * (world - 1) / world * nbytes / seconds / 1e9


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--port", type=int, default=29611)
    args = parser.parse_args()
    world = 2
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.start_processes(worker, args=(world, args.port, queue), nprocs=world, start_method="spawn")
    rows = queue.get()
    if args.json:
        print(json.dumps({"torch": torch.__version__, "rows": rows}))
        return
    print(f"torch {torch.__version__} gloo all-reduce, {world} processes")
    print(f"{'size':>10} {'time (us)':>12} {'busbw (GB/s)':>13}")
    for r in rows:
        print(f"{r['bytes']:>10} {r['seconds'] * 1e6:>12.1f} {busbw(r['bytes'], r['seconds'], world):>13.3f}")


if __name__ == "__main__":
    main()
