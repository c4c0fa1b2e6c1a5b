"""Point-to-point benchmark of torch.distributed over Gloo: the twin of bench/p2p.ts.

Two processes on 127.0.0.1 ping-pong f32 tensors of 4 KiB ... 16 MiB with blocking dist.send and
dist.recv (rank 0 sends then receives, rank 1 receives then sends), with the same iteration
counts and timing rule as bench/p2p.ts: the fastest of 5 trials, per round trip. Prints one JSON
line.

    "${DTRAIN_BENCH_PYTHON:-python3}" bench/p2p_torch.py [--port 29612]
"""

import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SIZES = [4 << 10, 64 << 10, 1 << 20, 16 << 20]
TRIALS = 5


def iterations(nbytes: int) -> int:
    """Same rule as bench/p2p.ts: about 64 MiB each way per trial, 10..1000 round trips."""
    return max(10, min(1000, (64 << 20) // nbytes))


def worker(rank: int, port: int, queue) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    peer = 1 - rank
    rows = []
    for nbytes in SIZES:
        out = torch.ones(nbytes // 4)
        box = torch.zeros(nbytes // 4)

        def trip():
            if rank == 0:
                dist.send(out, peer)
                dist.recv(box, peer)
            else:
                dist.recv(box, peer)
                dist.send(out, peer)

        n = iterations(nbytes)
        for _ in range(min(n, 20)):
            trip()
        trials = []
        for _ in range(TRIALS):
            dist.barrier()
            start = time.perf_counter()
            for _ in range(n):
                trip()
            trials.append((time.perf_counter() - start) / n)
        rows.append({"bytes": nbytes, "seconds": min(trials)})
    if rank == 0:
        queue.put(rows)
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=29612)
    args = parser.parse_args()
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.start_processes(worker, args=(args.port, queue), nprocs=2, start_method="spawn")
    print(json.dumps({"torch": torch.__version__, "rows": queue.get()}))


if __name__ == "__main__":
    main()
