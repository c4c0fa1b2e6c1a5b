// The collective libraries' C ABIs (csrc/gloo/dtrain_gloo.h, csrc/shm/dtrain_shm.h, both built into
// libdtrain_gloo.so) against their Deno FFI tables (ffi/gloo.ts, ffi/shm.ts), symbol by symbol and
// type by type, as abi_test.ts checks libdtrain's.
import assert from "node:assert/strict";
import { glooSymbols } from "../../ffi/gloo.ts";
import { shmSymbols } from "../../ffi/shm.ts";
import { abiMismatches, callable, type FfiEntry, parseHeader } from "./_c_header.ts";

const root = new URL("../../", import.meta.url);

for (
  const [header, table, prefix] of [
    ["csrc/gloo/dtrain_gloo.h", glooSymbols, "dt_gloo_"],
    ["csrc/shm/dtrain_shm.h", shmSymbols, "dt_shm_"],
  ] as const
) {
  Deno.test(`${header} declares each FFI symbol of its table with the table's types`, () => {
    const declared = parseHeader(Deno.readTextFileSync(new URL(header, root)))
      .filter((f) => f.name.startsWith(prefix));
    assert.ok(declared.length > 10, `only ${declared.length} ${prefix} prototypes parsed`);
    const entries = table as unknown as Record<string, FfiEntry>;
    assert.deepEqual(abiMismatches(declared, entries, prefix), []);
    const bound = new Set(Object.entries(entries).map(([key, entry]) => entry.name ?? key));
    const missing = declared.filter((f) => callable(f) && !bound.has(f.name)).map((f) => f.name);
    assert.deepEqual(missing, [], "declared, not in the FFI table");
  });
}
