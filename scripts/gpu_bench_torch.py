"""The GPU benchmark's PyTorch side (scripts/gpu_check.sh runs it): GPT-2 small (124M, block 1024)
training steps in eager mode with bf16 autocast and f32 master weights, AdamW, on cuda:0; the same
model shape, batch and step counts as scripts/gpu_bench.ts. Prints one JSON line (tokens/s, MFU).
The model is a compact nanoGPT (model.py) with its initialisation; no dropout, fused attention, and
exact (erf) GELU, as dtrain's nn.GPT has (src/nn/gpt.ts), not nanoGPT's tanh approximation, so the
two sides run the same arithmetic."""
import argparse
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.c_fc, self.mlp_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.h, C // self.h).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        # Exact GELU (approximate="none", F.gelu's default), like dtrain's nn.GPT.
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="none"))


class GPT(nn.Module):
    def __init__(self, vocab, block, layers, heads, d):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(block, d)
        self.h = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.wte.weight = self.lm_head.weight
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                torch.nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                torch.nn.init.zeros_(m.bias)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print(json.dumps({"framework": "pytorch", "skipped": "torch.cuda.is_available() is False"}))
        return
    torch.manual_seed(0)
    vocab, T, L, H, D = 50304, 1024, 12, 12, 768
    model = GPT(vocab, T, L, H, D).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1)

    def step():
        x = torch.randint(0, vocab, (args.batch, T), device="cuda")
        y = torch.randint(0, vocab, (args.batch, T), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    for _ in range(2):
        step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    params = sum(p.numel() for p in model.parameters())
    tokens_per_second = args.batch * T * args.steps / seconds
    flops_per_token = 6 * params + 12 * L * H * (D // H) * T
    name = torch.cuda.get_device_name(0)
    peak = 989e12 if any(g in name for g in ("H100", "H200")) else 312e12 if "A100" in name else None
    print(json.dumps({
        "framework": "pytorch", "torch": torch.__version__, "device": name, "params": params,
        "batch": args.batch, "block": T, "steps": args.steps, "loss": loss,
        "tokensPerSecond": round(tokens_per_second),
        "mfu": None if peak is None else flops_per_token * tokens_per_second / peak,
    }))


if __name__ == "__main__":
    main()
