// initDeviceMesh on 4 real rank processes against PyTorch's own layouts (device_mesh.json, from
// gen_device_mesh.py): the mesh, coordinates, each dimension's, slice's and flattened dimension's
// group and local rank on every rank, an all-reduce over each group summing exactly its ranks,
// and every bad input's error.
import assert from "node:assert/strict";
import { assertAllOk, runRanks } from "../_harness/ranks.ts";
import { describe, markedProcesses, markerEnv } from "../_harness/processes.ts";

const worker = new URL("./workers/device_mesh.ts", import.meta.url);

interface Layout {
  mesh: unknown;
  coordinate: number[];
  groups: number[][];
  localRanks: number[];
}
interface Expected extends Layout {
  slices: Record<string, Layout>;
  flatSlices: Record<string, Layout>;
  flattens: Record<
    string,
    { from: string[]; mesh: number[]; group: number[]; localRank: number; fromRoot: number[] }
  >;
}
interface Got extends Layout {
  shape: number[];
  sizes: number[];
  size: number;
  names: string[] | null;
  sums: number[];
}

const fixture = JSON.parse(
  Deno.readTextFileSync(new URL("../fixtures/device_mesh.json", import.meta.url)),
) as { cases: { shape: number[]; names: string[]; ranks: Expected[] }[] };

/** `got` is PyTorch's layout `want`, and each group's all-reduce summed 2^r over its ranks. */
function assertLayout(got: Got, want: Layout, names: string[], what: string): void {
  assert.deepEqual(got.mesh, want.mesh, `${what}: mesh`);
  assert.deepEqual(got.coordinate, want.coordinate, `${what}: coordinate`);
  assert.deepEqual(got.groups, want.groups, `${what}: group ranks`);
  assert.deepEqual(got.localRanks, want.localRanks, `${what}: local ranks`);
  assert.deepEqual(got.localRanks, got.coordinate, `${what}: local ranks are the coordinate`);
  assert.deepEqual(got.names, names, `${what}: names`);
  assert.deepEqual(got.sizes, want.groups.map((g) => g.length), `${what}: sizes`);
  assert.deepEqual(got.shape, got.sizes, `${what}: shape`);
  assert.equal(got.size, got.sizes.reduce((a, b) => a * b, 1), `${what}: size()`);
  const sums = want.groups.map((g) => g.reduce((s, r) => s + 2 ** r, 0));
  assert.deepEqual(got.sums, sums, `${what}: all-reduce sums over each group`);
}

Deno.test("initDeviceMesh on 4 ranks lays ranks out as PyTorch does ([2, 2], [2, 1, 2], [4]: groups, local ranks, slices, flatten), each group's all-reduce sums exactly its ranks, and every bad input is named", async (t) => {
  const marker = crypto.randomUUID();
  const runs = await runRanks({
    worker,
    worldSize: 4,
    timeoutMs: 60_000,
    env: () => markerEnv(marker),
  });
  const left = markedProcesses(marker);
  assert.deepEqual(left, [], `left behind: ${describe(left)}`);
  assertAllOk(runs);

  await t.step("layouts, slices and flattened dimensions equal PyTorch's", () => {
    for (const run of runs) {
      const layouts = run.result!.layouts as (Got & {
        string: string;
        sameRoot: boolean;
        slices: Record<string, Got>;
        flatSlices: Record<string, Got>;
        flattens: Record<
          string,
          Got & { again: boolean; fromRoot: number[]; rootGroup: number[]; defaultName: string[] }
        >;
      })[];
      for (const [c, { shape, names, ranks }] of fixture.cases.entries()) {
        const got = layouts[c], want = ranks[run.rank];
        const what = `[${shape}] rank ${run.rank}`;
        assertLayout(got, want, names, what);
        assert.ok(got.sameRoot, `${what}: get(all names) is the root`);
        const nested = JSON.stringify(want.mesh).replaceAll(",", ", ");
        const quoted = names.map((n) => `'${n}'`).join(", ");
        assert.equal(got.string, `DeviceMesh('cpu', ${nested}, meshDimNames=(${quoted}))`);
        assert.deepEqual(Object.keys(got.slices), Object.keys(want.slices), `${what}: slices`);
        for (const [key, slice] of Object.entries(want.slices)) {
          assertLayout(got.slices[key], slice, key.split(","), `${what} get(${key})`);
        }
        assert.deepEqual(Object.keys(got.flatSlices), Object.keys(want.flatSlices));
        for (const [key, slice] of Object.entries(want.flatSlices)) {
          assertLayout(got.flatSlices[key], slice, key.split(","), `${what} get(${key}) flattened`);
        }
        assert.deepEqual(Object.keys(got.flattens), Object.keys(want.flattens));
        for (const [name, flat] of Object.entries(want.flattens)) {
          const g = got.flattens[name];
          const layout = {
            mesh: flat.mesh,
            coordinate: [flat.localRank],
            groups: [flat.group],
            localRanks: [flat.localRank],
          };
          assertLayout(g, layout, [name], `${what} flatten ${name}`);
          assert.deepEqual(g.fromRoot, flat.fromRoot, `${what}: root.get("${name}")`);
          assert.deepEqual(g.rootGroup, flat.group, `${what}: root.getGroup("${name}")`);
          assert.ok(g.again, `${what}: flattening again gives the same mesh`);
          assert.deepEqual(g.defaultName, [flat.from.join("_")], `${what}: default name`);
        }
      }
    }
  });

  await t.step("a mesh without names", () => {
    for (const run of runs) {
      const noNames = run.result!.noNames as Record<string, unknown>;
      assert.equal(noNames.string, "DeviceMesh('cpu', [[0, 1], [2, 3]])");
      const mine = [[run.rank % 2, run.rank % 2 + 2], [run.rank - run.rank % 2, run.rank | 1]];
      assert.deepEqual(noNames.groups, mine);
      assert.match(noNames.get as string, /DeviceMesh\.get: this mesh has no meshDimNames/);
      assert.match(noNames.flatten as string, /DeviceMesh\.flatten: this mesh has no meshDimNames/);
    }
  });

  await t.step("every bad input gets an error naming it", () => {
    const expected: Record<string, RegExp> = {
      product: /meshShape \[3\] holds 3 ranks, but the world size is 4/,
      productLarge: /meshShape \[2, 4\] holds 8 ranks, but the world size is 4/,
      deviceType: /deviceType "gpu" is not one of "cpu", "cuda", "emu"/,
      deviceIndex: /deviceType "cuda:0" is not one of .* without a device index/,
      cudaOnHost: /backend \(.*\) does not reach cuda:\d tensors for a "cuda" mesh/,
      emptyShape: /meshShape must be a non-empty array/,
      notArray: /meshShape must be a non-empty array/,
      zeroSize: /meshShape\[1\] is 0; sizes are integers ≥ 1/,
      fraction: /meshShape\[0\] is 2\.5/,
      nameCount: /1 meshDimNames \(dp\) for a 2-D meshShape \[2, 2\]/,
      nameRepeat: /meshDimNames repeats "dp"/,
      nameEmpty: /meshDimNames\[1\] is ""/,
      nameNotString: /meshDimNames\[1\] is 3/,
      getUnknown: /DeviceMesh\.get: no dimension "pp" in mesh dimensions dp, tp/,
      getOrder: /dimensions tp, dp are not in mesh order/,
      getRepeat: /dimensions dp, dp overlap/,
      getNone: /DeviceMesh\.get: no dimension named/,
      getFromSub: /no dimension "ac" in mesh dimensions a, b$/,
      getOverlap: /dimensions ac, a overlap/,
      getFlatOrder: /dimensions ac, b are not in mesh order/,
      groupNoDim: /DeviceMesh\.getGroup: this mesh has 2 dimensions \(mesh dimensions dp, tp\)/,
      groupIndex: /getGroup: dimension 2 is outside a 2-D mesh/,
      groupNegative: /getGroup: dimension -1 is outside a 2-D mesh/,
      groupName: /getGroup: no dimension "pp"/,
      localRankNoDim: /this mesh has 2 dimensions/,
      sizeName: /DeviceMesh\.size: no dimension "pp"/,
      flattenClash: /"dp" is already a dimension of the root mesh/,
      flattenTaken: /"ac" already names another flattened dimension/,
      flattenEmpty: /the name must be a non-empty string/,
    };
    for (const run of runs) {
      assert.match(
        run.result!.beforeInit as string,
        /initDeviceMesh: the process group is not initialized/,
      );
      const errors = run.result!.errors as Record<string, string>;
      assert.deepEqual(Object.keys(errors), Object.keys(expected));
      for (const [key, pattern] of Object.entries(expected)) {
        assert.match(errors[key], pattern, `rank ${run.rank}: ${key}`);
      }
    }
  });
});
