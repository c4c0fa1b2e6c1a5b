// A fresh folder per test, removed afterwards whatever the test did.

/** Runs `fn` with a new temporary folder and removes the folder afterwards. */
export function withTempDir(fn: (dir: string) => void): () => void {
  return () => {
    const dir = Deno.makeTempDirSync({ prefix: "dtrain_checkpoint_" });
    try {
      fn(dir);
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  };
}
