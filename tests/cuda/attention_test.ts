// Attention forward and backward on the GPU against csrc/core's (the reference layout: q, k, v,
// the saved log-sum-exp), called through both libraries' C ABI: causal, with a mask broadcast
// over the batch, and with dropout (the same counter RNG gives the same kept probabilities).
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { attentionSymbols, loadCuda } from "../../ffi/cuda.ts";
import type { Symbols } from "../../ffi/load.ts";
import { manualSeed, randn, type Tensor, tensor } from "../../mod.ts";
import { gpuTest, relativeError } from "./_gpu.ts";

const CPU_LIBRARY = fileURLToPath(new URL("../../build/libdtrain.so", import.meta.url));

interface Case {
  name: string;
  causal: boolean;
  masked: boolean;
  dropout: number;
}

const CASES: Case[] = [
  { name: "plain", causal: false, masked: false, dropout: 0 },
  { name: "causal", causal: true, masked: false, dropout: 0 },
  { name: "masked (broadcast over batch)", causal: false, masked: true, dropout: 0 },
  { name: "causal with dropout", causal: true, masked: false, dropout: 0.2 },
];

const [B, H, TQ, TK, D, DV] = [2, 3, 70, 70, 16, 8];

type Attention = Symbols<typeof attentionSymbols>;

/** Forward then backward on `dev`'s tensors; returns out, lse and the three gradients. */
function run(lib: Attention, device: string, inputs: Tensor[], c: Case): Float32Array[] {
  const [q, k, v, mask, gout] = inputs.map((t) => t.to(device));
  const empty = (n: number) => tensor(new Float32Array(n)).to(device);
  const out = empty(B * H * TQ * DV), lse = empty(B * H * TQ);
  const gq = empty(B * H * TQ * D), gk = empty(B * H * TK * D), gv = empty(B * H * TK * DV);
  // mask [H, TQ, TK]: batch stride 0, head stride TQ * TK
  const maskArgs = [c.masked ? mask.ptr : null, 0, TQ * TK] as const;
  const shape = [B * H, H, TQ, TK, D, DV, 0.25, c.causal ? 1 : 0, c.dropout, 42n, 1000n] as const;
  assert.equal(
    lib.dt_attention_forward(q.ptr, k.ptr, v.ptr, ...maskArgs, out.ptr, lse.ptr, ...shape),
    0,
  );
  assert.equal(
    lib.dt_attention_backward(
      q.ptr,
      k.ptr,
      v.ptr,
      ...maskArgs,
      out.ptr,
      lse.ptr,
      gout.ptr,
      gq.ptr,
      gk.ptr,
      gv.ptr,
      ...shape,
    ),
    0,
  );
  return [out, lse, gq, gk, gv].map((t) => t.toArray() as Float32Array);
}

for (const c of CASES) {
  gpuTest(`attention forward and backward on cuda match cpu: ${c.name} (rel err <= 1e-4)`, () => {
    manualSeed(13);
    const inputs = [
      randn([B * H * TQ * D]),
      randn([B * H * TK * D]),
      randn([B * H * TK * DV]),
      randn([H * TQ * TK]),
      randn([B * H * TQ * DV]),
    ];
    const cpu = Deno.dlopen(CPU_LIBRARY, attentionSymbols);
    try {
      const expected = run(cpu.symbols as Attention, "cpu", inputs, c);
      const actual = run(loadCuda(), "cuda", inputs, c);
      ["out", "lse", "gq", "gk", "gv"].forEach((name, i) => {
        const err = relativeError(actual[i], expected[i]);
        assert.ok(err <= 1e-4, `${c.name}: ${name} rel err ${err}`);
      });
    } finally {
      cpu.close();
    }
  });
}
