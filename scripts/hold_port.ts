// Holds a TCP port on every address until killed, as another job on the machine would: the test
// suite runs beside it so that no test can depend on torchrun's fixed port 29500 being free.
// Prints one line saying whether it holds the port or something else already does.
const port = Number(Deno.args[0]);
if (!Number.isInteger(port) || port <= 0 || port > 65535) {
  console.error(`hold_port: expected a port number (1-65535), got ${JSON.stringify(Deno.args[0])}`);
  Deno.exit(2);
}
try {
  const listener = Deno.listen({ hostname: "0.0.0.0", port });
  console.log(`== port ${port} is held for the whole run (scripts/hold_port.ts)`);
  for await (const conn of listener) conn.close();
} catch (error) {
  if (!(error instanceof Deno.errors.AddrInUse)) throw error;
  console.log(`== port ${port} is already held by another process, as the run wants`);
}
