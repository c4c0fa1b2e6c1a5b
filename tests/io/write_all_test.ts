// The one synchronous "write every byte" loop that checkpoints, the launcher and the trainer use.
import assert from "node:assert/strict";
import { writeAll } from "../../src/io/write_all.ts";

Deno.test("writeAll() loops over short writes until every byte is written, in order", () => {
  const received: number[] = [];
  const calls: number[] = [];
  const trickle = {
    writeSync(p: Uint8Array): number {
      const n = Math.min(3, p.length);
      calls.push(p.length);
      received.push(...p.subarray(0, n));
      return n;
    },
  };
  const bytes = Uint8Array.from({ length: 10 }, (_, i) => i);
  writeAll(trickle, bytes);
  assert.deepEqual(received, [...bytes]);
  assert.deepEqual(calls, [10, 7, 4, 1], "each call gets what is left");
  writeAll(trickle, new Uint8Array());
  assert.equal(calls.length, 4, "nothing to write, no call");
});
