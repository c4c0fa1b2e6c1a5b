// The store's table on its own: a get whose key another connection deletes between the get's
// wait and its answer is answered as missing (it used to throw, which closed the getter's
// connection: fault-tolerant replicas delete old rounds' keys while others read them).
import assert from "node:assert/strict";
import { ByteReader, ByteWriter, Op, Status, utf8 } from "../../src/distributed/store/protocol.ts";
import { StoreTable } from "../../src/distributed/store/table.ts";

function request(build: (w: ByteWriter) => void): ByteReader {
  const w = new ByteWriter();
  build(w);
  return new ByteReader(w.done());
}

/** The status byte of a response frame (after its u32 length). */
const status = (frame: Uint8Array) => frame[4];

for (const timeoutMs of [0, 1_000]) {
  Deno.test(`StoreTable: a get (timeout ${timeoutMs} ms) of a key deleted before it answers reports it missing`, async () => {
    const table = new StoreTable(1024, () => []);
    const key = utf8("round/quorum");
    const set = () => table.execute(request((w) => w.u8(Op.set).bytes(key).bytes(utf8("q"))));
    if (timeoutMs === 0) await set();
    const got = table.execute(request((w) => w.u8(Op.get).bytes(key).u32(timeoutMs)));
    // Set (waking the get) and delete run to their answers at once, with no await inside:
    // both before the get's continuation.
    const setting = timeoutMs > 0 ? set() : null;
    const deleted = table.execute(request((w) => w.u8(Op.delete).bytes(key)));
    assert.equal(status(await got), Status.timeout);
    if (setting !== null) assert.equal(status(await setting), Status.ok);
    assert.equal(status(await deleted), Status.ok);
    table.close();
  });
}
