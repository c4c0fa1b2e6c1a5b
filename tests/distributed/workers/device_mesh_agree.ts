/**
 * Worker for device_mesh_agree_test.ts. CASE picks the scenario:
 * - "shape": rank ODD_RANK passes meshShape [4, 1] where the others pass [2, 2];
 * - "names": rank ODD_RANK names the dimensions ["tp", "dp"] where the others name ["dp", "tp"];
 * - "emu": as "shape", for an "emu" mesh over a world on the emu backend, which does not reach
 *   host memory (as an NCCL world does not);
 * - "wide": every rank passes a 22-D shape: 20 dimensions of size 1 and two of size 2.
 * After a barrier, every rank calls initDeviceMesh and reports its error (or the groups it got)
 * and how long the call took; then, in the mismatch cases, that a mesh all agree on still works.
 * @module
 */

import {
  barrier,
  destroyProcessGroup,
  type DeviceMesh,
  getRank,
  initDeviceMesh,
  initProcessGroup,
} from "../../../src/distributed/mod.ts";
import { tensor } from "../../../src/tensor/creation.ts";
import { runWorker } from "../../_harness/worker.ts";

/** Dimensions d0 ... d21: size 2 at d10 and d21, else 1. */
const WIDE = Array.from({ length: 22 }, (_, d) => d === 10 || d === 21 ? 2 : 1);
const NAMES = WIDE.map((_, d) => `d${d}`);

/** A group's ranks and the sum over it of an all-reduce of 2^rank (a bit per rank that took part). */
async function groupOf(mesh: DeviceMesh, dim?: string | number) {
  const group = mesh.getGroup(dim);
  const device = mesh.deviceType === "cpu" ? "cpu" : `${mesh.deviceType}:${getRank()}`;
  const x = tensor([2 ** getRank()], [1], { device });
  await group.allReduce(x, "sum");
  return { ranks: [...group.ranks], sum: x.item() };
}

async function wide(): Promise<Record<string, unknown>> {
  await barrier().wait();
  const started = performance.now();
  const mesh = await initDeviceMesh("cpu", WIDE, { meshDimNames: NAMES });
  const ms = performance.now() - started;
  const dims = [];
  for (const name of NAMES) dims.push(await groupOf(mesh, name));
  const flattened = {
    mixed: await groupOf(mesh.get(["d0", "d10", "d15"]).flatten("mixed")),
    ones: await groupOf(mesh.get(["d1", "d2"]).flatten("ones")),
    both: await groupOf(mesh.get(["d3", "d10", "d21"]).flatten("both")),
  };
  return { ms, dims, flattened, coordinate: mesh.getCoordinate() };
}

async function mismatch(kase: string): Promise<Record<string, unknown>> {
  const odd = getRank() === Number(Deno.env.get("ODD_RANK"));
  const shape = kase !== "names" && odd ? [4, 1] : [2, 2];
  const names = kase === "names" && odd ? ["tp", "dp"] : ["dp", "tp"];
  const type = kase === "emu" ? "emu" : "cpu";
  await barrier().wait();
  const started = performance.now();
  let failed: string | null = null, code: string | undefined;
  try {
    await initDeviceMesh(type, shape, { meshDimNames: names });
  } catch (err) {
    failed = (err as Error).message;
    code = (err as { code?: string }).code;
  }
  const ms = performance.now() - started;
  const after = await initDeviceMesh(type, [2, 2], { meshDimNames: ["dp", "tp"] });
  return { failed, code, ms, afterwards: await groupOf(after, "tp") };
}

await runWorker(async () => {
  const kase = Deno.env.get("CASE")!;
  await initProcessGroup({
    backend: kase === "emu" ? "emu" : undefined,
    timeoutMs: Number(Deno.env.get("TEST_TIMEOUT_MS") ?? 20_000),
  });
  try {
    return kase === "wide" ? await wide() : await mismatch(kase);
  } finally {
    await destroyProcessGroup();
  }
});
