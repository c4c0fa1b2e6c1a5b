/// <reference no-default-lib="true" />
/// <reference lib="deno.worker" />
/**
 * A stranger on the host, run as a Web Worker by shm_setup_test.ts: it watches /dev/shm in a
 * tight loop for any name of the job's processes (`dtrain-<pid>-...`, whose process ids the
 * test writes into the shared array) and takes the 64 names a shared buffer would get next
 * (`<name>-0` to `<name>-63`), owned by `nobody`, as an attacker who wants to turn the in-place
 * all-reduce off would. It counts the names it saw, stops when the test sets `stop`, and hands
 * back the names it took, for the test to remove.
 * @module
 */

/** Layout of the shared Int32Array: [stop, seen, pid 0, pid 1, ...]. */
self.onmessage = (e: MessageEvent<SharedArrayBuffer>) => {
  const shared = new Int32Array(e.data);
  const seen = new Set<string>();
  const squatted: string[] = [];
  while (Atomics.load(shared, 0) === 0) {
    const prefixes = [...shared.subarray(2)].filter((p) => p > 0).map((p) => `dtrain-${p}-`);
    for (const entry of Deno.readDirSync("/dev/shm")) {
      const name = entry.name;
      if (!prefixes.some((p) => name.startsWith(p)) || seen.has(name)) continue;
      seen.add(name);
      Atomics.add(shared, 1, 1);
      for (let i = 0; i < 64; i++) {
        const path = `/dev/shm/${name}-${i}`;
        try {
          Deno.writeFileSync(path, new Uint8Array(0), { createNew: true, mode: 0o600 });
          squatted.push(`${name}-${i}`);
          seen.add(`${name}-${i}`);
          Deno.chownSync(path, 65534, 65534);
        } catch {
          // taken already: by the job, or it is gone
        }
      }
    }
  }
  self.postMessage(squatted);
};
