// A tied parameter's optimizer state is saved under each of its names, so a layout that holds
// only one of them (a pipeline's last stage: lm_head without wte) resumes with the trained state
// instead of a fresh one (which would let the two copies of the tie drift apart).
import assert from "node:assert/strict";
import { checkpoint, manualSeed, nn, optim, parallel, type Tensor, tensor } from "../../mod.ts";
import { withTempDir } from "../_harness/processes.ts";

const config = { vocabSize: 16, blockSize: 4, nLayer: 2, nHead: 2, nEmbd: 8, dropout: 0 };

Deno.test("a whole GPT's checkpoint gives a last pipeline stage lm_head's AdamW state, equal to wte's", async () => {
  await withTempDir("dtrain_tied_", async (dir) => {
    manualSeed(3);
    const whole = new nn.GPT(config);
    const opt = new optim.AdamW(whole.parameters(), { lr: 1e-2 });
    const x = tensor([1, 2, 3, 4, 5, 6, 7, 8], [2, 4], { dtype: "i32" });
    const y = tensor([2, 3, 4, 5, 6, 7, 8, 9], [2, 4], { dtype: "i32" });
    for (let i = 0; i < 2; i++) {
      whole.forward(x, y).loss!.backward();
      opt.step();
      opt.zeroGrad();
    }
    await checkpoint.saveSharded(dir, { model: whole, optimizer: opt });
    const saved = opt.state.get(whole.transformer.wte.weight)!;

    manualSeed(9); // other weights: everything must come from the checkpoint
    const last = parallel.splitGPT(new nn.GPT(config), 1, 2);
    const lastOpt = new optim.AdamW(last.parameters(), { lr: 1e-2 });
    checkpoint.loadSharded(dir, { model: last, optimizer: lastOpt });
    const head = new Map(last.namedParameters()).get("lm_head.weight")!;
    const loaded = lastOpt.state.get(head)!;
    assert.ok(loaded, "lm_head.weight has optimizer state after the load");
    assert.equal(loaded.step, saved.step);
    for (const field of ["expAvg", "expAvgSq"]) {
      const [got, want] = [loaded[field] as Tensor, saved[field] as Tensor];
      assert.deepEqual(got.toArray(), want.toArray(), field);
    }
    assert.deepEqual(head.toArray(), whole.lm_head.weight.toArray());
  });
});
