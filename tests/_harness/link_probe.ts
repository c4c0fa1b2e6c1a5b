/**
 * Measures a link between two hosts over TCP, for tests/_harness/throttled_link.ts: run
 * `serve PORT` on one host, then `rtt HOST PORT SAMPLES` or `bandwidth HOST PORT BYTES` on the
 * other. The client prints one JSON line: `{ rttMs: [...] }` (each one-byte round trip, in order)
 * or `{ bytes, seconds, mbit }` (the receiver's rate after the first quarter of the transfer, so
 * that TCP's slow start does not count against the link).
 * @module
 */

const [mode, ...rest] = Deno.args;

/** The tag a client's first byte carries. */
const ECHO = 1;
const SINK = 2;

async function readExactly(conn: Deno.Conn, into: Uint8Array): Promise<void> {
  for (let got = 0; got < into.length;) {
    const n = await conn.read(into.subarray(got));
    if (n === null) throw new Error("link_probe: the peer closed the connection early");
    got += n;
  }
}

/** Echoes bytes one at a time, as a ping responder would. */
async function echo(conn: Deno.Conn): Promise<void> {
  const byte = new Uint8Array(1);
  while (await conn.read(byte) !== null) await conn.write(byte);
}

/** Reads `total` bytes, then answers with the rate after the first quarter of them. */
async function sink(conn: Deno.Conn): Promise<void> {
  const header = new Uint8Array(8);
  await readExactly(conn, header);
  const total = Number(new DataView(header.buffer).getBigUint64(0));
  const warm = Math.floor(total / 4);
  const buffer = new Uint8Array(1 << 20);
  let got = 0;
  let warmAt = 0;
  while (got < total) {
    const n = await conn.read(buffer);
    if (n === null) throw new Error(`link_probe: the sender stopped after ${got} bytes`);
    got += n;
    if (warmAt === 0 && got >= warm) warmAt = performance.now();
  }
  const seconds = (performance.now() - warmAt) / 1000;
  const bytes = total - warm;
  const reply = JSON.stringify({ bytes, seconds, mbit: (bytes * 8) / seconds / 1e6 });
  await conn.write(new TextEncoder().encode(reply + "\n"));
}

async function serve(port: number): Promise<void> {
  const listener = Deno.listen({ hostname: "0.0.0.0", port });
  console.log("listening");
  for await (const conn of listener) {
    conn.setNoDelay(true);
    (async () => {
      const tag = new Uint8Array(1);
      await readExactly(conn, tag);
      await (tag[0] === ECHO ? echo(conn) : sink(conn));
    })().catch((error) => console.error(String(error))).finally(() => conn.close());
  }
}

async function rtt(hostname: string, port: number, samples: number): Promise<void> {
  const conn = await Deno.connect({ hostname, port });
  conn.setNoDelay(true);
  await conn.write(Uint8Array.of(ECHO));
  const byte = new Uint8Array(1);
  const rttMs: number[] = [];
  for (let i = 0; i < samples; i++) {
    const start = performance.now();
    await conn.write(byte);
    await readExactly(conn, byte);
    rttMs.push(performance.now() - start);
  }
  conn.close();
  console.log(JSON.stringify({ rttMs }));
}

async function bandwidth(hostname: string, port: number, total: number): Promise<void> {
  const conn = await Deno.connect({ hostname, port });
  const header = new Uint8Array(9);
  header[0] = SINK;
  new DataView(header.buffer).setBigUint64(1, BigInt(total));
  await conn.write(header);
  const chunk = new Uint8Array(1 << 16);
  for (let sent = 0; sent < total;) {
    sent += await conn.write(chunk.subarray(0, Math.min(chunk.length, total - sent)));
  }
  const reply = new Uint8Array(256);
  let text = "";
  while (!text.endsWith("\n")) {
    const n = await conn.read(reply);
    if (n === null) throw new Error("link_probe: the receiver closed before reporting");
    text += new TextDecoder().decode(reply.subarray(0, n));
  }
  conn.close();
  console.log(text.trim());
}

if (mode === "serve") await serve(Number(rest[0]));
else if (mode === "rtt") await rtt(rest[0], Number(rest[1]), Number(rest[2]));
else if (mode === "bandwidth") await bandwidth(rest[0], Number(rest[1]), Number(rest[2]));
else throw new Error(`link_probe: unknown mode ${mode} (serve, rtt or bandwidth)`);
