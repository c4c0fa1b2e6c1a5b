/**
 * `initDeviceMesh` and `DeviceMesh`, after PyTorch's `init_device_mesh`: the world's ranks laid
 * out row-major over an n-dimensional shape (`torch.arange(world).view(shape)`), with a process
 * group along each dimension, so that parallelisms compose (HSDP: replicate × shard; TP × FSDP).
 *
 * [Note: mesh groups]
 * `newGroup` must be called by every rank, in the same order. So `initDeviceMesh` creates every
 * group it will ever hand out, on every rank, in one fixed order: the group along each dimension
 * (0 first), then the group along every set of two or more dimensions of size above 1 (by its
 * bit mask over those dimensions, see `dimSets`), every block of ranks along it (row-major in the
 * other dimensions' coordinates). A dimension of size 1 adds no rank to a set, so a set's group
 * is that of its dimensions above size 1 (the lone rank's own group when it has none), and a
 * rank set already created (the whole world, a set met before) is reused, not created again.
 * Making the sets of several dimensions up front is what lets `flatten` stay synchronous and
 * local, as PyTorch's `_flatten` looks to its callers (so torchtitan's
 * `mesh[("dp_replicate", "dp_shard")]._flatten("dp")` ports without an `await` and without every
 * rank having to flatten in lockstep). Its cost is linear in the number of dimensions: the sets
 * of several dimensions come from the k dimensions above size 1 only, 2^k − k − 1 of them, and
 * 2^k is at most the world size (each such dimension at least doubles it). Enumerating the sets
 * of all n dimensions instead cost 2^n: 78 s and 1.5 GiB per rank for 22 dimensions of size 1.
 *
 * Before any group, the ranks compare their arguments (`agreeAcrossRanks`): ranks that disagree
 * on the shape would create different groups and wait on each other's store keys until a timeout
 * that blames live ranks; instead every rank names which ranks passed what.
 * @module
 */

import { DistError } from "./errors.ts";
import { newGroup, worldGroup } from "./init.ts";
import { agreeOnMeshArguments, checkMeshArguments } from "./mesh_arguments.ts";
import {
  allBlocks,
  blockRanks,
  coordinateOf,
  dimSets,
  groupKey,
  type NestedRanks as Nested,
  nestRanks,
} from "./mesh_layout.ts";
import type { ProcessGroup } from "./process_group.ts";

import type { MeshDeviceType as DeviceType } from "./mesh_arguments.ts";

/** Ranks nested as the mesh's shape (a 1-D mesh is a flat list), as `Tensor.tolist()` has them. */
export type NestedRanks = Nested;

/** The device types a mesh is made for: the host's memory, a GPU's, an emulated device's. */
export type MeshDeviceType = DeviceType;

/** Options of {@linkcode initDeviceMesh}. */
export interface DeviceMeshOptions {
  /** One unique name per dimension (PyTorch's `mesh_dim_names`), for `get` and `getGroup`. */
  meshDimNames?: readonly string[];
}

/**
 * What every mesh sliced from one `initDeviceMesh` shares: the root's shape, this rank's place
 * in it, the groups of every set of root dimensions, and the flattened dimensions by name.
 * @ignore dtrain-internal (its module is re-exported with `export *`)
 */
export interface MeshTopology {
  /** The device family. */
  readonly deviceType: MeshDeviceType;
  /** The root mesh's shape. */
  readonly shape: readonly number[];
  /** This rank's coordinates in the root mesh. */
  readonly coordinate: readonly number[];
  /** This rank's group along each set of root dimensions, by its `groupKey`. */
  readonly groups: ReadonlyMap<string, ProcessGroup>;
  /** Meshes made by `flatten`, by name (only the root slices them by name, as in PyTorch). */
  readonly flattened: Map<string, DeviceMesh>;
  /** The root mesh (set once it exists). */
  root: DeviceMesh | null;
}

/**
 * An n-dimensional arrangement of ranks and the process groups along its dimensions (PyTorch's
 * `DeviceMesh`). Made by {@linkcode initDeviceMesh}; `get` slices the sub-mesh of some of its
 * dimensions that holds this rank, `flatten` merges a mesh's dimensions into one.
 */
export class DeviceMesh {
  /** The device family the mesh's groups communicate on. */
  readonly deviceType: MeshDeviceType;
  /** The size of each dimension. */
  readonly shape: readonly number[];
  /** The dimensions' names, or null when the mesh was made without. */
  readonly meshDimNames: readonly string[] | null;
  readonly #topology: MeshTopology;
  /** The root dimensions behind each of this mesh's dimensions (several once flattened). */
  readonly #dims: readonly (readonly number[])[];

  /**
   * Creates a `DeviceMesh` over root dimensions `dims`; use {@linkcode initDeviceMesh}.
   *
   * @param topology What the meshes of one `initDeviceMesh` share.
   * @param dims The root dimensions behind each dimension, ascending over all of them.
   * @param names The dimensions' names, or null.
   */
  constructor(
    topology: MeshTopology,
    dims: readonly (readonly number[])[],
    names: readonly string[] | null,
  ) {
    this.#topology = topology;
    this.#dims = dims;
    this.deviceType = topology.deviceType;
    this.shape = dims.map((ds) => ds.reduce((n, d) => n * topology.shape[d], 1));
    this.meshDimNames = names;
  }

  /** The number of dimensions. */
  get ndim(): number {
    return this.shape.length;
  }

  /** The global ranks of this mesh, row-major (the mesh tensor's `flatten().tolist()`). */
  get ranks(): readonly number[] {
    const { shape, coordinate } = this.#topology;
    return blockRanks(shape, this.#dims.flat(), coordinate);
  }

  /** The global ranks nested as the mesh's shape (PyTorch's `mesh.mesh.tolist()`). */
  get mesh(): NestedRanks {
    return nestRanks(this.ranks, this.shape);
  }

  /**
   * The sub-mesh of the named dimensions that holds this rank (PyTorch's `mesh["tp"]` and
   * `mesh["dp_replicate", "dp_shard"]`). The names go in mesh order; on the root mesh, names
   * made by `flatten` count too.
   *
   * @param names One dimension's name, or several.
   * @returns The sub-mesh (this mesh when `names` are all its names in order).
   * @throws DistError "invalid" for a mesh without names, an unknown, repeated or overlapping
   * name, or names out of mesh order.
   */
  get(names: string | readonly string[]): DeviceMesh {
    const list = typeof names === "string" ? [names] : [...names];
    const what = "DeviceMesh.get";
    if (this.meshDimNames === null) {
      throw new DistError("invalid", `${what}: this mesh has no meshDimNames to slice by`);
    }
    if (list.length === 0) throw new DistError("invalid", `${what}: no dimension named`);
    if (list.join("\0") === this.meshDimNames.join("\0")) return this;
    const fromRoot = this.#topology.root === this;
    const dims = list.map((name) => {
      if (typeof name !== "string") {
        throw new DistError("invalid", `${what}: a dimension name must be a string, not ${name}`);
      }
      const i = this.meshDimNames!.indexOf(name);
      if (i >= 0) return this.#dims[i];
      const flat = fromRoot ? this.#topology.flattened.get(name) : undefined;
      if (flat !== undefined) return flat.#dims[0];
      throw new DistError("invalid", `${what}: no dimension "${name}" in ${this.#known(fromRoot)}`);
    });
    const all = dims.flat();
    if (new Set(all).size !== all.length) {
      throw new DistError("invalid", `${what}: dimensions ${list.join(", ")} overlap`);
    }
    if (all.some((d, i) => i > 0 && all[i - 1] > d)) {
      throw new DistError(
        "invalid",
        `${what}: dimensions ${list.join(", ")} are not in mesh order (${this.#known(fromRoot)})`,
      );
    }
    return new DeviceMesh(this.#topology, dims, list);
  }

  /**
   * One dimension over all of this mesh's ranks (PyTorch's `_flatten`), which the root mesh
   * then slices by `name` too. Local: its groups exist since `initDeviceMesh` (see
   * [Note: mesh groups]).
   *
   * @param name The flattened dimension's name (default: the names joined by "_").
   * @returns The 1-D mesh (this one for a 1-D mesh flattened into its own name).
   * @throws DistError "invalid" for a mesh without names, or a name the root mesh has, or that
   * an earlier `flatten` gave to other dimensions.
   */
  flatten(name?: string): DeviceMesh {
    const what = "DeviceMesh.flatten";
    if (this.meshDimNames === null) {
      throw new DistError("invalid", `${what}: this mesh has no meshDimNames`);
    }
    const flatName = name ?? this.meshDimNames.join("_");
    if (typeof flatName !== "string" || flatName === "") {
      throw new DistError("invalid", `${what}: the name must be a non-empty string`);
    }
    if (this.ndim === 1 && this.meshDimNames[0] === flatName) return this;
    const root = this.#topology.root!;
    if (root.meshDimNames!.includes(flatName)) {
      throw new DistError(
        "invalid",
        `${what}: "${flatName}" is already a dimension of the root mesh (${root.meshDimNames})`,
      );
    }
    const dims = this.#dims.flat();
    const existing = this.#topology.flattened.get(flatName);
    if (existing !== undefined) {
      if (existing.#dims[0].join() === dims.join()) return existing;
      throw new DistError(
        "invalid",
        `${what}: "${flatName}" already names another flattened dimension (${existing})`,
      );
    }
    const flat = new DeviceMesh(this.#topology, [dims], [flatName]);
    this.#topology.flattened.set(flatName, flat);
    return flat;
  }

  /**
   * The process group along one dimension, which holds this rank.
   *
   * @param dim A dimension's name or index; may be left out on a 1-D mesh.
   * @throws DistError "invalid" for an unknown dimension, or none named on an N-D mesh.
   */
  getGroup(dim?: string | number): ProcessGroup {
    const dims = this.#resolve("DeviceMesh.getGroup", dim);
    return this.#groupAlong(dims);
  }

  /** The process group along each dimension, in order. */
  getAllGroups(): ProcessGroup[] {
    return this.#dims.map((ds) => this.#groupAlong(ds));
  }

  /** This rank's group along root dimensions `dims` (created by `initDeviceMesh`). */
  #groupAlong(dims: readonly number[]): ProcessGroup {
    return this.#topology.groups.get(groupKey(this.#topology.shape, dims))!;
  }

  /**
   * The number of ranks along a dimension, or in the whole mesh.
   *
   * @param dim A dimension's name or index; left out: every rank of the mesh.
   */
  size(dim?: string | number): number {
    if (dim === undefined) return this.shape.reduce((a, b) => a * b, 1);
    const dims = this.#resolve("DeviceMesh.size", dim);
    return dims.reduce((n, d) => n * this.#topology.shape[d], 1);
  }

  /** This process's global rank. */
  getRank(): number {
    return worldGroup("DeviceMesh.getRank").rank;
  }

  /**
   * This rank's index along a dimension: its rank in that dimension's group.
   *
   * @param dim A dimension's name or index; may be left out on a 1-D mesh.
   */
  getLocalRank(dim?: string | number): number {
    return this.getGroup(dim).rank;
  }

  /** This rank's coordinates in the mesh. */
  getCoordinate(): number[] {
    const { shape, coordinate } = this.#topology;
    return this.#dims.map((ds) => ds.reduce((i, d) => i * shape[d] + coordinate[d], 0));
  }

  /** As PyTorch prints it: `DeviceMesh('cpu', [[0, 1], [2, 3]], meshDimNames=('dp', 'tp'))`. */
  toString(): string {
    const names = this.meshDimNames === null
      ? ""
      : `, meshDimNames=(${this.meshDimNames.map((n) => `'${n}'`).join(", ")})`;
    const ranks = JSON.stringify(this.mesh).replaceAll(",", ", ");
    return `DeviceMesh('${this.deviceType}', ${ranks}${names})`;
  }

  /** The root dimensions of dimension `dim` (a name, a flattened name, or an index). */
  #resolve(what: string, dim: string | number | undefined): readonly number[] {
    if (dim === undefined) {
      if (this.ndim === 1) return this.#dims[0];
      throw new DistError(
        "invalid",
        `${what}: this mesh has ${this.ndim} dimensions (${this.#known(false)}); name one`,
      );
    }
    if (typeof dim === "number") {
      if (Number.isInteger(dim) && dim >= 0 && dim < this.ndim) return this.#dims[dim];
      throw new DistError(
        "invalid",
        `${what}: dimension ${dim} is outside a ${this.ndim}-D mesh (${this.#known(false)})`,
      );
    }
    const i = this.meshDimNames?.indexOf(dim) ?? -1;
    if (i >= 0) return this.#dims[i];
    // As PyTorch's get_group, a flattened dimension is found from any mesh of the root.
    const flat = this.#topology.flattened.get(dim);
    if (flat !== undefined) return flat.#dims[0];
    throw new DistError("invalid", `${what}: no dimension "${dim}" in ${this.#known(true)}`);
  }

  /** The dimensions there are, for errors. */
  #known(withFlattened: boolean): string {
    const names = this.meshDimNames === null
      ? this.shape.map((_, i) => `${i}`)
      : [...this.meshDimNames];
    const flat = withFlattened ? [...this.#topology.flattened.keys()] : [];
    return `mesh dimensions ${names.join(", ") || "(none)"}` +
      (flat.length ? `; flattened: ${flat.join(", ")}` : "");
  }
}

/**
 * Lays the world's ranks out over `meshShape`, row-major, and creates the process groups along
 * every dimension (and every set of dimensions, for `flatten`) on every rank; see
 * [Note: mesh groups]. Every rank must call it, with the same arguments, after
 * `initProcessGroup`.
 *
 * @param deviceType "cpu" (host memory), "cuda" or "emu": what the groups' collectives carry;
 * the world's backend must reach it.
 * @param meshShape The size of each dimension; their product is the world size.
 * @param options See {@linkcode DeviceMeshOptions}.
 * @returns The root mesh.
 * @throws DistError "invalid" for a bad device type, shape or names, a shape that does not
 * hold the world, or a backend that does not reach the device.
 *
 * @example A 1 × 1 mesh of one process
 * ```ts
 * import assert from "node:assert/strict";
 * import { destroyProcessGroup, initDeviceMesh, initProcessGroup } from "./mod.ts";
 * await initProcessGroup({ initMethod: "tcp://127.0.0.1:0", rank: 0, worldSize: 1 });
 * const mesh = await initDeviceMesh("cpu", [1, 1], { meshDimNames: ["dp", "tp"] });
 * assert.equal(mesh.get("tp").getGroup().size, 1);
 * assert.deepEqual(mesh.get(["dp", "tp"]).flatten().mesh, [0]);
 * await destroyProcessGroup();
 * ```
 */
export async function initDeviceMesh(
  deviceType: MeshDeviceType,
  meshShape: readonly number[],
  options: DeviceMeshOptions = {},
): Promise<DeviceMesh> {
  const what = "initDeviceMesh";
  const world = worldGroup(what);
  await agreeOnMeshArguments(world, deviceType, meshShape, options.meshDimNames);
  const names = checkMeshArguments(world, deviceType, meshShape, options.meshDimNames);
  const shape = [...meshShape];
  const coordinate = coordinateOf(world.rank, shape);
  const groups = new Map<string, ProcessGroup>();
  const byRanks = new Map<string, ProcessGroup>([[world.ranks.join(), world]]);
  for (const dims of dimSets(shape)) {
    // Every rank holds a block of every set it has met: the same skip on every rank.
    const key = groupKey(shape, dims);
    if (groups.has(key)) continue;
    for (const block of allBlocks(shape, dims)) {
      let group = byRanks.get(block.join());
      if (group === undefined) {
        group = await newGroup(block);
        byRanks.set(block.join(), group);
      }
      if (group.rank >= 0) groups.set(key, group);
    }
  }
  // A rank returns from newGroup as soon as its own groups are connected; the others may still
  // be connecting theirs through the store, which rank 0 must not close under them (as by
  // leaving the job). So every rank leaves initDeviceMesh only once all are done, as PyTorch's
  // new_group waits for the world.
  await world.barrier();
  const topology: MeshTopology = {
    deviceType,
    shape,
    coordinate,
    groups,
    flattened: new Map(),
    root: null,
  };
  topology.root = new DeviceMesh(topology, shape.map((_, d) => [d]), names);
  return topology.root;
}
