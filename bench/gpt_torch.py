"""The PyTorch side of the GPT section of `make bench` (bench/main.ts runs it; never a test
dependency): the same GPT-2 style model as dtrain's nn.GPT (nanoGPT's architecture: pre-norm
blocks, fused c_attn, causal scaled_dot_product_attention, exact GELU, tied embeddings) in PyTorch
eager, timed like bench/gpt.ts. Prints one `BENCH_RESULT {json}` line.

  step       training steps (AdamW) of the model, tokens/s
  attention  causal F.scaled_dot_product_attention forward + backward alone on its shape
"""

import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(width)
        self.c_attn = nn.Linear(width, 3 * width)
        self.c_proj = nn.Linear(width, width)
        self.ln_2 = nn.LayerNorm(width)
        self.c_fc = nn.Linear(width, 4 * width)
        self.mlp_proj = nn.Linear(4 * width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.wte = nn.Embedding(a.vocab, a.width)
        self.wpe = nn.Embedding(a.block, a.width)
        self.h = nn.ModuleList(Block(a.width, a.heads) for _ in range(a.layers))
        self.ln_f = nn.LayerNorm(a.width)
        self.lm_head = nn.Linear(a.width, a.vocab, bias=False)
        self.wte.weight = self.lm_head.weight

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def peak_rss_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return None


def step_mode(a):
    torch.manual_seed(0)
    model = GPT(a)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = torch.tensor([(i * 7919) % a.vocab for i in range(a.batch * (a.block + 1))])
    tokens = tokens.view(a.batch, a.block + 1)
    x, y = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()

    def step():
        # --dtype bf16: nanoGPT's `ctx`, CPU autocast to bfloat16 around forward and the loss.
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.dtype == "bf16"):
            loss = F.cross_entropy(model(x).view(-1, a.vocab), y.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    for _ in range(a.warmup):
        step()
    start = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    seconds = time.perf_counter() - start
    return {"tokensPerSecond": a.steps * a.batch * a.block / seconds,
            "stepMs": seconds / a.steps * 1000, "loss": loss}


def attention_mode(a):
    torch.manual_seed(0)
    shape = (a.batch, a.heads, a.block, a.width // a.heads)
    q, k, v = (torch.randn(shape, requires_grad=True) for _ in range(3))
    g = torch.randn(shape)

    def run():
        F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(g)
        for t in (q, k, v):
            t.grad = None

    for _ in range(a.warmup):
        run()
    reps = a.steps * 10
    start = time.perf_counter()
    for _ in range(reps):
        run()
    ms = (time.perf_counter() - start) / reps * 1000
    return {"attentionMs": ms, "tokensPerSecond": a.batch * a.block / (ms / 1000)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["step", "attention"])
    p.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    for name in ["threads", "layers", "heads", "width", "block", "vocab", "batch", "warmup", "steps"]:
        p.add_argument(f"--{name}", type=int, required=True)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    result = step_mode(a) if a.mode == "step" else attention_mode(a)
    result.update(framework="torch", mode=a.mode, dtype=a.dtype, threads=a.threads,
                  peakRssBytes=peak_rss_bytes())
    print("BENCH_RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
