/**
 * The methods of a tensor that read it into JavaScript memory (`toArray`, `item`, `tolist`) and
 * PyTorch's shorthands for the 2-byte floats (`bfloat16`, `half`; `float` is in tensor_indexing.ts), as a base class of `Tensor`
 * (tinygrad-style op mixins): each forwards to host.ts or to `to()`.
 * @module
 */

import * as host from "./host.ts";
import type { Tensor } from "./tensor.ts";
import { TensorMath } from "./tensor_math.ts";

/** The methods `Tensor` inherits first; each takes the tensor as `this`. */
export abstract class TensorHost extends TensorMath {
  /**
   * A copy of the elements, row-major, in host memory: bf16 and f16 as their f32 values (as
   * PyTorch's `tolist()` gives floats); their raw bits are `t.view("u16").toArray()`.
   */
  toArray(this: Tensor): Float32Array | Int32Array | Uint8Array | Uint16Array {
    return host.toArray(this);
  }

  /** The value of a one-element tensor (of a bf16 or f16 one, exactly). */
  item(this: Tensor): number {
    return host.item(this);
  }

  /** Nested arrays of the elements, like PyTorch's `tolist()`. */
  tolist(this: Tensor): number | unknown[] {
    return host.tolist(this);
  }

  /**
   * `to("bf16")` (PyTorch's `t.bfloat16()`): round to nearest even, PyTorch's bits.
   *
   * @example
   * ```ts
   * import assert from "node:assert/strict";
   * import { tensor } from "../../mod.ts";
   * assert.equal(String(tensor([1.0078, 3.1416]).bfloat16()), "tensor([1.0078, 3.1406], dtype=bf16)");
   * ```
   */
  bfloat16(this: Tensor): Tensor {
    return this.to("bf16");
  }

  /** `to("f16")` (PyTorch's `t.half()`): round to nearest even, overflow to infinity. */
  half(this: Tensor): Tensor {
    return this.to("f16");
  }
}
