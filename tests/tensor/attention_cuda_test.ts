// Attention forward and backward on each accelerator (the GPU through libdtrain_cuda's C ABI, the
// emulated one through its queued kernel table) against csrc/core's, called through the C ABI (the strided-layout prototype of main b086002): contiguous heads, heads packed in one
// [B, T, 3C] projection read in place, causal, a mask broadcast over the batch, and dropout (the
// same counter RNG gives the same kept probabilities).
import assert from "node:assert/strict";
import { attentionSymbols, loadCuda } from "../../ffi/cuda.ts";
import { openLibrary, type Symbols } from "../../ffi/load.ts";
import { getDevice, manualSeed, randn, type Tensor, tensor } from "../../mod.ts";
import { type Accelerator, deviceTest } from "../_harness/devices.ts";
import { maxRelativeError } from "../_harness/close.ts";

interface Case {
  name: string;
  causal: boolean;
  masked: boolean;
  dropout: number;
  /** q, k, v as column blocks of one [B, T, 3C] tensor (C = H * D), as GPT's c_attn makes them. */
  packed: boolean;
}

const CASES: Case[] = [
  { name: "plain", causal: false, masked: false, dropout: 0, packed: false },
  {
    name: "causal, heads packed in [B, T, 3C]",
    causal: true,
    masked: false,
    dropout: 0,
    packed: true,
  },
  { name: "masked (broadcast over batch)", causal: false, masked: true, dropout: 0, packed: false },
  { name: "causal with dropout", causal: true, masked: false, dropout: 0.2, packed: false },
];

const [B, H, TQ, TK, D] = [2, 3, 70, 70, 16];
const DV = D;

/** The layout array: (batch, head, row) strides of q, k, v, out, gout, gq, gk, gv, then the mask's. */
function layoutOf(c: Case): BigInt64Array {
  const contiguous = (t: number, width: number) => [H * t * width, t * width, width];
  const packed = [TQ * 3 * H * D, D, 3 * H * D];
  const qkv = c.packed ? [packed, packed, packed] : [
    contiguous(TQ, D),
    contiguous(TK, D),
    contiguous(TK, DV),
  ];
  const rest = [
    contiguous(TQ, DV),
    contiguous(TQ, DV),
    contiguous(TQ, D),
    contiguous(TK, D),
    contiguous(TK, DV),
  ];
  // mask [H, TQ, TK]: batch stride 0, head stride TQ * TK
  return BigInt64Array.from([...qkv, ...rest].flat().concat([0, TQ * TK]).map(BigInt));
}

type Attention = Symbols<typeof attentionSymbols>;

/**
 * The CPU library's attention, found as ffi/dtrain.ts finds it (DTRAIN_LIB, else build/): a GPU
 * image without OpenBLAS gets the carried library through DTRAIN_LIB (scripts/gpu_check.sh).
 */
let cpuAttention: Attention | undefined;
const loadCpuAttention = () =>
  cpuAttention ??= openLibrary("libdtrain.so", "DTRAIN_LIB", attentionSymbols);

/** The attention kernels of an accelerator: libdtrain_cuda's, or the emulated device's table. */
function attentionOf(device: Accelerator): Attention {
  if (device.startsWith("cuda")) return loadCuda();
  const { kernels } = getDevice(device);
  return {
    dt_attention_forward: kernels.attentionForward,
    dt_attention_backward: kernels.attentionBackward,
  } as unknown as Attention;
}

/** Forward then backward on `device`; returns out, lse and the three gradients. */
function run(lib: Attention, device: string, inputs: Tensor[], c: Case): Float32Array[] {
  const [qkv, q, k, v, mask, gout] = inputs.map((t) => t.to(device));
  const empty = (n: number) => tensor(new Float32Array(n)).to(device);
  const out = empty(B * H * TQ * DV), lse = empty(B * H * TQ);
  const gq = empty(B * H * TQ * D), gk = empty(B * H * TK * D), gv = empty(B * H * TK * DV);
  // Packed: q, k, v start D * H floats apart inside one [B, T, 3C] tensor (T = TQ = TK here).
  const ptrs = c.packed
    ? [0, 1, 2].map((i) => Deno.UnsafePointer.offset(qkv.ptr!, i * H * D * 4))
    : [q.ptr, k.ptr, v.ptr];
  const layout = layoutOf(c);
  const shape = [B * H, H, TQ, TK, D, DV, 0.25, c.causal ? 1 : 0, c.dropout, 42n, 1000n] as const;
  const m = c.masked ? mask.ptr : null;
  assert.equal(
    lib.dt_attention_forward(ptrs[0], ptrs[1], ptrs[2], m, out.ptr, lse.ptr, layout, ...shape),
    0,
  );
  assert.equal(
    lib.dt_attention_backward(
      ptrs[0],
      ptrs[1],
      ptrs[2],
      m,
      out.ptr,
      lse.ptr,
      gout.ptr,
      gq.ptr,
      gk.ptr,
      gv.ptr,
      layout,
      ...shape,
    ),
    0,
  );
  return [out, lse, gq, gk, gv].map((t) => t.toArray() as Float32Array);
}

for (const c of CASES) {
  deviceTest(`attention forward and backward match cpu: ${c.name} (rel err <= 1e-5)`, (device) => {
    manualSeed(13);
    const inputs = [
      randn([B * TQ * 3 * H * D]),
      randn([B * H * TQ * D]),
      randn([B * H * TK * D]),
      randn([B * H * TK * DV]),
      randn([H * TQ * TK]),
      randn([B * H * TQ * DV]),
    ];
    const expected = run(loadCpuAttention(), "cpu", inputs, c);
    const actual = run(attentionOf(device), device, inputs, c);
    ["out", "lse", "gq", "gk", "gv"].forEach((name, i) => {
      const err = maxRelativeError(actual[i], expected[i]);
      assert.ok(err <= 1e-5, `${c.name}: ${name} rel err ${err}`);
    });
  });
}
