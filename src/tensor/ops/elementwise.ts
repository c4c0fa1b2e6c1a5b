/** Elementwise arithmetic with PyTorch broadcasting, and the unary maps. @module */

import { BinaryOp, type DeviceBackend, UnaryOp } from "../device/device.ts";
import { record } from "../autograd.ts";
import { broadcastShapes, isSuffix, sameShape } from "../layout.ts";
import type { Tensor } from "../tensor.ts";
import { emptyOn, expectF32, expectSameDevice, temporaries } from "./_util.ts";
import { integerArith, isIntegerOperation, staysInteger } from "./integer.ts";
import { contiguous, expand, sumToShape, to } from "./shape.ts";
import { roundToHalf, viaF32 } from "./_half.ts";
import { isHalf } from "../dtype.ts";
import { scalarOn } from "./compare.ts";

type BinaryName = keyof typeof BinaryOp;

function binary(op: BinaryName, a: Tensor, b: Tensor): Tensor {
  expectF32(op, a, b);
  expectSameDevice(op, a, b);
  const shape = broadcastShapes(op, a.shape, b.shape);
  // The kernel broadcasts an operand whose shape is a suffix of the output's; anything else is
  // first expanded, and the expand's backward sums the gradient back.
  const fit = (t: Tensor) =>
    contiguous(sameShape(t.shape, shape) || isSuffix(t.shape, shape) ? t : expand(t, shape));
  const x = fit(a), y = fit(b);
  const out = emptyOn(x, shape);
  const dev = out.storage.backend;
  const n = out.numel(), na = x.numel(), nb = y.numel();
  dev.check(dev.kernels.binary(BinaryOp[op], x.ptr, na, y.ptr, nb, out.ptr, n));
  return record(
    out,
    `${op[0].toUpperCase()}${op.slice(1)}Backward`,
    [x, y],
    (gy) => {
      // An add's gradient is gy itself for an addend of the output's shape (a view, as PyTorch's
      // AddBackward passes it; backward copies before it accumulates into shared memory), and gy
      // summed back to a broadcast addend's shape: no kernel call for the pass-through.
      if (op === "add") {
        return [x, y].map((t) => t.requiresGrad ? sumToShape(gy, t.shape) : null);
      }
      const ga = x.requiresGrad ? emptyOn(x, x.shape) : null;
      const gb = y.requiresGrad ? emptyOn(y, y.shape) : null;
      dev.check(
        dev.kernels.binaryBackward(
          BinaryOp[op],
          x.ptr,
          na,
          y.ptr,
          nb,
          gy.ptr,
          n,
          ga?.ptr ?? null,
          gb?.ptr ?? null,
        ),
      );
      return [ga, gb];
    },
    temporaries([x, a], [y, b]),
    op === "mul" || op === "div" ? [x, y] : [],
  );
}

type UnaryName = keyof typeof UnaryOp;
/**
 * Which saved value each op's derivative reads (its input, its output, or neither), as the native
 * math says it (`dt_unary_reads`, from csrc/core/scalar_math.h): asked once per op, then kept.
 */
const reads: ("x" | "y" | "none")[] = [];
function readsOf(dev: DeviceBackend, op: UnaryName): "x" | "y" | "none" {
  const code = UnaryOp[op];
  const known = reads[code];
  if (known !== undefined) return known;
  const answer = dev.kernels.unaryReads(code);
  if (answer < 0 || answer > 2) throw new Error(`${op}: libdtrain does not know unary op ${code}`);
  return (reads[code] = answer === 1 ? "x" : answer === 2 ? "y" : "none");
}

function unary(op: UnaryName, t: Tensor, p = 0): Tensor {
  if (isHalf(t.dtype)) {
    // pow's exponent is an operand of the tensor's dtype in PyTorch (rounded); scale's stays float.
    const q = op === "pow" ? roundToHalf(p, t.dtype) : p;
    const savesY = readsOf(t.storage.backend, op) === "y";
    return viaF32(op, [t], (x) => unary(op, x, q), undefined, savesY)!;
  }
  expectF32(op, t);
  const x = contiguous(t);
  const y = emptyOn(x, x.shape);
  const dev = y.storage.backend;
  const n = y.numel();
  dev.check(dev.kernels.unary(UnaryOp[op], x.ptr, y.ptr, n, p));
  const saved = readsOf(dev, op);
  return record(
    y,
    `${op[0].toUpperCase()}${op.slice(1)}Backward`,
    [x],
    (gy) => {
      const gx = emptyOn(x, x.shape);
      dev.check(
        dev.kernels.unaryBackward(
          UnaryOp[op],
          saved === "x" ? x.ptr : null,
          saved === "y" ? y.ptr : null,
          gy.ptr,
          gx.ptr,
          n,
          p,
        ),
      );
      return [gx];
    },
    temporaries([x, t]),
    saved === "x" ? [x] : saved === "y" ? [y] : [],
  );
}

/**
 * `a op b` where an operand is i32 or bool, with PyTorch's type promotion (see integer.ts): in
 * i32 when both are integers (and `op` is not true division), else both converted to f32, where
 * gradients flow to the f32 operand.
 */
function promoted(op: BinaryName, a: Tensor, b: Tensor | number): Tensor {
  if (staysInteger(op, a, b)) return integerArith(op, a, b);
  const x = to(a, "f32"), y = typeof b === "number" ? b : to(b, "f32");
  const out = { add, sub, mul, div }[op](x, y);
  // A converted operand that a recorded backward reads stays alive (freed by tidy or the GC).
  if (out.gradFn === null) {
    if (x !== a) x.dispose();
    if (typeof y !== "number" && y !== b) y.dispose();
  }
  return out;
}

/**
 * `a op b` when an operand is bf16 or f16: in f32, rounded to PyTorch's result dtype; null for
 * the other dtypes. A number next to a half tensor keeps the half dtype; as in PyTorch's CPU
 * kernels, an addend rounds to that dtype first (unary() does it), a factor stays in float, and
 * a divisor divides in float (not a multiply by its reciprocal).
 */
function half(op: BinaryName, a: Tensor, b: Tensor | number): Tensor | null {
  const f = { add, sub, mul, div }[op];
  if (typeof b !== "number") return viaF32(op, [a, b], (x, y) => f(x, y));
  if (op === "add" || op === "sub") {
    const addend = isHalf(a.dtype) ? roundToHalf(b, a.dtype) : b;
    return viaF32(op, [a], (x) => f(x, addend));
  }
  if (op === "mul") return viaF32(op, [a], (x) => f(x, b));
  if (op === "div") {
    return viaF32(op, [a], (x) => {
      const divisor = scalarOn(x, b, "f32");
      const out = binary("div", x, divisor);
      if (out.gradFn === null) divisor.dispose();
      return out;
    });
  }
  // Every op is named above: a new binary op fails to compile here until it has its half form.
  const unknown: never = op;
  throw new Error(`no half-precision form for binary op ${unknown}`);
}

/** a + b (b a tensor or a number), broadcasting. */
export function add(a: Tensor, b: Tensor | number): Tensor {
  const h = half("add", a, b);
  if (h) return h;
  if (isIntegerOperation(a, b)) return promoted("add", a, b);
  return typeof b === "number" ? unary("addScalar", a, b) : binary("add", a, b);
}

/** a - b (b a tensor or a number), broadcasting. */
export function sub(a: Tensor, b: Tensor | number): Tensor {
  const h = half("sub", a, b);
  if (h) return h;
  if (isIntegerOperation(a, b)) return promoted("sub", a, b);
  return typeof b === "number" ? unary("addScalar", a, -b) : binary("sub", a, b);
}

/** a * b (b a tensor or a number), broadcasting. */
export function mul(a: Tensor, b: Tensor | number): Tensor {
  const h = half("mul", a, b);
  if (h) return h;
  if (isIntegerOperation(a, b)) return promoted("mul", a, b);
  return typeof b === "number" ? unary("scale", a, b) : binary("mul", a, b);
}

/** a / b (b a tensor or a number), broadcasting; true division (f32) for i32 operands. */
export function div(a: Tensor, b: Tensor | number): Tensor {
  const h = half("div", a, b);
  if (h) return h;
  if (isIntegerOperation(a, b)) return promoted("div", a, b);
  return typeof b === "number" ? unary("scale", a, 1 / b) : binary("div", a, b);
}

/** max(x, 0). */
export function relu(t: Tensor): Tensor {
  return unary("relu", t);
}

/** GELU, exact (`"none"`, erf form) or PyTorch's `approximate="tanh"` form. */
export function gelu(t: Tensor, approximate: "none" | "tanh" = "none"): Tensor {
  if (approximate !== "none" && approximate !== "tanh") {
    throw new RangeError(
      `gelu: approximate must be "none" or "tanh", got ${JSON.stringify(approximate)}`,
    );
  }
  return unary(approximate === "tanh" ? "geluTanh" : "geluErf", t);
}

/** e^x. */
export function exp(t: Tensor): Tensor {
  return unary("exp", t);
}

/** Natural logarithm. */
export function log(t: Tensor): Tensor {
  return unary("log", t);
}

/** Hyperbolic tangent. */
export function tanh(t: Tensor): Tensor {
  return unary("tanh", t);
}

/** 1 / (1 + e^-x). */
export function sigmoid(t: Tensor): Tensor {
  return unary("sigmoid", t);
}

/** -x. */
export function neg(t: Tensor): Tensor {
  return unary("neg", t);
}

/** Square root. */
export function sqrt(t: Tensor): Tensor {
  return unary("sqrt", t);
}

/** x ** exponent (a number). */
export function pow(t: Tensor, exponent: number): Tensor {
  return unary("pow", t, exponent);
}
