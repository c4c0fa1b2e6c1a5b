// libdtrain_cuda's NCCL shim through its C ABI, on a group of one: a dtype or reduce-op code that
// its tables do not hold is refused with a message before anything reaches NCCL (the codes once
// indexed the tables unchecked, so bool or an unknown code handed NCCL whatever followed them).
// Runs where NCCL is available: a GPU, or the host build with the NCCL stand-in (make test).
import assert from "node:assert/strict";
import { probeCuda } from "../../src/tensor/device/cuda_runtime.ts";
import { CollectiveStatus } from "../../ffi/collective_codes.ts";
import { gpuTest } from "../_harness/devices.ts";

gpuTest(
  "the NCCL shim refuses dtype and op codes its tables do not hold, naming them",
  async () => {
    const lib = probeCuda().lib!;
    const id = new Uint8Array(128);
    assert.equal(lib.dt_nccl_unique_id(id), 0);
    const out = new BigUint64Array(1);
    assert.equal(lib.dt_nccl_ctx_new(0, 0, 1, Int32Array.of(0), 10_000, out), 0);
    const ctx = Deno.UnsafePointer.create(out[0]);
    try {
      assert.equal(await lib.dt_nccl_connect(ctx, id), 0);
      const message = () => {
        const buf = new Uint8Array(256);
        const n = lib.dt_nccl_last_error(ctx, buf, buf.length);
        return new TextDecoder().decode(buf.subarray(0, Math.min(n, buf.length - 1)));
      };
      const buffer = Deno.UnsafePointer.of(new Float32Array(4));
      // 2 is bool, which takes no collective; 9 is past the table; op 7 is past the ops.
      for (
        const [dtype, op, expected] of [
          [2, 0, "nccl: dtype code 2 takes no collective"],
          [9, 0, "nccl: dtype code 9 takes no collective"],
          [0, 7, "nccl: reduce op code 7 is unknown"],
        ] as const
      ) {
        assert.equal(
          await lib.dt_nccl_allreduce(ctx, buffer, 4, dtype, op),
          CollectiveStatus.EINVAL,
        );
        assert.equal(message(), expected);
      }
      assert.equal(await lib.dt_nccl_broadcast(ctx, buffer, 4, -1, 0), CollectiveStatus.EINVAL);
      assert.equal(message(), "nccl: dtype code -1 takes no collective");
    } finally {
      lib.dt_nccl_ctx_free(ctx);
    }
  },
);
