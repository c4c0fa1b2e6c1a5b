/**
 * Worker for device_mesh_test.ts: builds each mesh of the PyTorch fixture (device_mesh.json) on
 * this rank, reports what it gives (the mesh, coordinates, each group's ranks and local ranks,
 * for the root, every slice and every flattened dimension the fixture has) and the sum of an
 * all-reduce of 2^rank over each of those groups (which names exactly the ranks that took part),
 * then tries every bad input and reports the errors.
 * @module
 */

import {
  destroyProcessGroup,
  type DeviceMesh,
  DistError,
  initDeviceMesh,
  initProcessGroup,
  type MeshDeviceType,
} from "../../../src/distributed/mod.ts";
import { runWorker, tensorOf } from "../../_harness/worker.ts";

interface Case {
  shape: number[];
  names: string[];
  ranks: {
    slices: Record<string, unknown>;
    flattens: Record<string, unknown>;
    flatSlices: Record<string, unknown>;
  }[];
}

const fixture = JSON.parse(
  Deno.readTextFileSync(new URL("../../fixtures/device_mesh.json", import.meta.url)),
) as { cases: Case[] };

/** The sum over `mesh`'s group along `dim` of 2^rank: a bit per rank that took part. */
async function sumOf(mesh: DeviceMesh, dim?: number): Promise<number> {
  const x = new Float32Array([2 ** mesh.getRank()]);
  await mesh.getGroup(dim).allReduce(tensorOf(x), "sum");
  return x[0];
}

async function describe(mesh: DeviceMesh) {
  const sums = [];
  for (let d = 0; d < mesh.ndim; d++) sums.push(await sumOf(mesh, d));
  return {
    mesh: mesh.mesh,
    coordinate: mesh.getCoordinate(),
    groups: mesh.getAllGroups().map((g) => [...g.ranks]),
    localRanks: mesh.shape.map((_, d) => mesh.getLocalRank(d)),
    shape: mesh.shape,
    sizes: mesh.shape.map((_, d) => mesh.size(d)),
    size: mesh.size(),
    names: mesh.meshDimNames,
    sums,
  };
}

/** The message of what `fn` throws (a DistError "invalid"), or "no error". */
async function errorOf(fn: () => unknown): Promise<string> {
  try {
    await fn();
  } catch (err) {
    if (err instanceof DistError && err.code === "invalid") return err.message;
    return `not an invalid DistError: ${err}`;
  }
  return "no error";
}

await runWorker(async () => {
  const beforeInit = await errorOf(() => initDeviceMesh("cpu", [1]));
  const world = await initProcessGroup({ timeoutMs: 20_000 });
  try {
    const layouts = [];
    for (const { shape, names, ranks } of fixture.cases) {
      const mesh = await initDeviceMesh("cpu", shape, { meshDimNames: names });
      const slices: Record<string, unknown> = {};
      for (const key of Object.keys(ranks[0].slices)) {
        slices[key] = await describe(mesh.get(key.split(",")));
      }
      const flattens: Record<string, unknown> = {};
      for (const [name, value] of Object.entries(ranks[0].flattens)) {
        const from = (value as { from: string[] }).from;
        const flat = mesh.get(from).flatten(name);
        flattens[name] = {
          ...(await describe(flat)),
          again: mesh.get(from).flatten(name) === flat,
          fromRoot: mesh.get(name).mesh,
          rootGroup: [...mesh.getGroup(name).ranks],
          defaultName: mesh.get(from).flatten().meshDimNames,
        };
      }
      // Slices of the root that take flattened dimensions too (once flattened, above).
      const flatSlices: Record<string, unknown> = {};
      for (const key of Object.keys(ranks[0].flatSlices)) {
        flatSlices[key] = await describe(mesh.get(key.split(",")));
      }
      layouts.push({
        ...(await describe(mesh)),
        string: mesh.toString(),
        sameRoot: mesh.get(names) === mesh,
        slices,
        flattens,
        flatSlices,
      });
    }
    const errors = await errorCases();
    const unnamed = await initDeviceMesh("cpu", [2, world.size / 2]);
    const noNames = {
      string: unnamed.toString(),
      groups: unnamed.getAllGroups().map((g) => [...g.ranks]),
      get: await errorOf(() => unnamed.get("dp")),
      flatten: await errorOf(() => unnamed.flatten()),
    };
    return { beforeInit, layouts, errors, noNames };
  } finally {
    await destroyProcessGroup();
  }
});

/** Every bad input, on a 4-rank world. */
async function errorCases(): Promise<Record<string, string>> {
  const mesh = await initDeviceMesh("cpu", [2, 2], { meshDimNames: ["dp", "tp"] });
  const cube = await initDeviceMesh("cpu", [2, 1, 2], { meshDimNames: ["a", "b", "c"] });
  cube.get(["a", "c"]).flatten("ac");
  const init = (type: string, shape: unknown, names?: unknown) => () =>
    initDeviceMesh(type as MeshDeviceType, shape as number[], {
      meshDimNames: names as string[] | undefined,
    });
  return {
    product: await errorOf(init("cpu", [3])),
    productLarge: await errorOf(init("cpu", [2, 4])),
    deviceType: await errorOf(init("gpu", [4])),
    deviceIndex: await errorOf(init("cuda:0", [4])),
    cudaOnHost: await errorOf(init("cuda", [4])),
    emptyShape: await errorOf(init("cpu", [])),
    notArray: await errorOf(init("cpu", 4)),
    zeroSize: await errorOf(init("cpu", [4, 0])),
    fraction: await errorOf(init("cpu", [2.5, 2])),
    nameCount: await errorOf(init("cpu", [2, 2], ["dp"])),
    nameRepeat: await errorOf(init("cpu", [2, 2], ["dp", "dp"])),
    nameEmpty: await errorOf(init("cpu", [2, 2], ["dp", ""])),
    nameNotString: await errorOf(init("cpu", [2, 2], ["dp", 3])),
    getUnknown: await errorOf(() => mesh.get("pp")),
    getOrder: await errorOf(() => mesh.get(["tp", "dp"])),
    getRepeat: await errorOf(() => mesh.get(["dp", "dp"])),
    getNone: await errorOf(() => mesh.get([])),
    getFromSub: await errorOf(() => cube.get(["a", "b"]).get("ac")),
    getOverlap: await errorOf(() => cube.get(["ac", "a"])),
    getFlatOrder: await errorOf(() => cube.get(["ac", "b"])),
    groupNoDim: await errorOf(() => mesh.getGroup()),
    groupIndex: await errorOf(() => mesh.getGroup(2)),
    groupNegative: await errorOf(() => mesh.getGroup(-1)),
    groupName: await errorOf(() => mesh.getGroup("pp")),
    localRankNoDim: await errorOf(() => mesh.getLocalRank()),
    sizeName: await errorOf(() => mesh.size("pp")),
    flattenClash: await errorOf(() => mesh.get("tp").flatten("dp")),
    flattenTaken: await errorOf(() => cube.get(["a", "b"]).flatten("ac")),
    flattenEmpty: await errorOf(() => mesh.flatten("")),
  };
}
