// The loader's policy for a library named by its environment variable: that path is the only one
// tried. Falling back to build/ when it fails to load would run another library than the one asked
// for (the GPU tests would run the real CUDA library instead of the host build, or the reverse)
// and say nothing; the error names the path and why it did not load.
import assert from "node:assert/strict";
import { openLibrary } from "../../ffi/load.ts";

Deno.test("a library named by its environment variable is the only one tried", () => {
  const missing = `${Deno.makeTempDirSync()}/libdtrain_gloo.so`;
  Deno.env.set("DTRAIN_TEST_LOAD_LIB", missing);
  try {
    // build/libdtrain_gloo.so exists (make build): a fallback would open it.
    assert.throws(
      () => openLibrary("libdtrain_gloo.so", "DTRAIN_TEST_LOAD_LIB", {}),
      (err: Error) => {
        assert.match(err.message, /could not load libdtrain_gloo\.so; tried:\n {2}/);
        const tried = err.message.split("\n").filter((line) => line.startsWith("  "));
        assert.equal(tried.length, 1, err.message);
        assert.ok(tried[0].startsWith(`  ${missing}: `), err.message);
        return true;
      },
    );
  } finally {
    Deno.env.delete("DTRAIN_TEST_LOAD_LIB");
  }
});
