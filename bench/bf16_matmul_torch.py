"""The PyTorch side of bench/bf16_matmul.ts: the same bf16 products, timed the same way.

Reads the products as JSON from argv[1] (bench/bf16_matmul.ts passes its table, so the shapes have
one source) and prints one `BENCH_RESULT {json}` line with each product's median milliseconds of
`torch.matmul` on bf16 operands (f32 accumulation inside; the result rounded to bf16, as PyTorch's
CPU bf16 matmul returns it), after 3 warm-up calls, over --reps calls.
"""

import json
import sys
import time

import torch


def main():
    products = json.loads(sys.argv[1])
    reps = int(sys.argv[2])
    torch.set_num_threads(int(sys.argv[3]))
    torch.manual_seed(22)
    rows = []
    for p in products:
        b, m, n, k = p["batch"], p["m"], p["n"], p["k"]
        a = torch.randn(b, k, m) if p["transA"] else torch.randn(b, m, k)
        w = torch.randn(b, n, k) if p["transB"] else torch.randn(b, k, n)
        a, w = a.bfloat16(), w.bfloat16()
        a = a.transpose(1, 2) if p["transA"] else a
        w = w.transpose(1, 2) if p["transB"] else w
        if b == 1:
            a, w = a[0], w[0]
        times = []
        for i in range(3 + reps):
            start = time.perf_counter()
            torch.matmul(a, w)
            if i >= 3:
                times.append((time.perf_counter() - start) * 1000)
        times.sort()
        rows.append({"name": p["name"], "torchMs": times[len(times) // 2]})
    print("BENCH_RESULT " + json.dumps({"torch": torch.__version__, "rows": rows}))


if __name__ == "__main__":
    main()
