/**
 * The checks of `initDeviceMesh`'s arguments, each bad one named: the same on every rank, the
 * device type, the shape (which must hold the world), the names, and a backend that reaches the
 * device.
 * @module
 */

import {
  deviceName,
  FAMILIES,
  FAMILY_NAMES,
  type FamilyName,
  OWN_MEMORY_FAMILIES,
} from "../tensor/device/mod.ts";
import { agreeAcrossRanks } from "./_agree.ts";
import { DistError } from "./errors.ts";
import { getLocalRank } from "./init.ts";
import type { ProcessGroup } from "./process_group.ts";

/** The device families a mesh can be over: every family of src/tensor/device/family.ts. */
export type MeshDeviceType = FamilyName;

/**
 * Verifies that every rank of `world` passed `initDeviceMesh` the same arguments, whatever they
 * are (so a bad one is compared before it is refused, and every rank then refuses it alike).
 * @throws DistError "mismatch" naming which ranks passed which device type, shape or names.
 */
export async function agreeOnMeshArguments(
  world: ProcessGroup,
  deviceType: unknown,
  meshShape: unknown,
  meshDimNames: unknown,
): Promise<void> {
  const what = "initDeviceMesh";
  const shown = (v: unknown): string =>
    Array.isArray(v) ? `[${v.map(shown).join(", ")}]` : JSON.stringify(v) ?? String(v);
  const fields = {
    "device type": shown(deviceType),
    meshShape: shown(meshShape),
    meshDimNames: meshDimNames === undefined ? "none" : shown(meshDimNames),
  };
  // Host memory when the world reaches it, else this rank's device (an NCCL-only world).
  const local = getLocalRank();
  const hostFirst = [
    ...FAMILY_NAMES.filter((family) => FAMILIES[family].hostMemory),
    ...OWN_MEMORY_FAMILIES,
  ];
  const device = hostFirst.map((f) => deviceName(f, local)).find((d) => world.reaches(d));
  await agreeAcrossRanks(world, what, fields, {
    device,
    fix: `every rank must call ${what} with the same device type, meshShape and meshDimNames`,
  });
}

/**
 * Checks `initDeviceMesh`'s arguments against the `world` group.
 * @returns The names, copied (null when none were given).
 * @throws DistError "invalid" naming the first bad argument.
 */
export function checkMeshArguments(
  world: ProcessGroup,
  deviceType: MeshDeviceType,
  meshShape: readonly number[],
  meshDimNames: readonly string[] | undefined,
): string[] | null {
  const what = "initDeviceMesh";
  if (!FAMILY_NAMES.includes(deviceType)) {
    throw new DistError(
      "invalid",
      `${what}: deviceType ${JSON.stringify(deviceType)} is not one of ` +
        `${FAMILY_NAMES.map((t) => `"${t}"`).join(", ")} (a family, without a device index)`,
    );
  }
  if (!Array.isArray(meshShape) || meshShape.length === 0) {
    throw new DistError("invalid", `${what}: meshShape must be a non-empty array of sizes`);
  }
  for (const [d, n] of meshShape.entries()) {
    if (!Number.isInteger(n) || n < 1) {
      throw new DistError("invalid", `${what}: meshShape[${d}] is ${n}; sizes are integers ≥ 1`);
    }
  }
  const count = meshShape.reduce((a, b) => a * b, 1);
  if (count !== world.size) {
    throw new DistError(
      "invalid",
      `${what}: meshShape [${meshShape.join(", ")}] holds ${count} ranks, but the world size ` +
        `is ${world.size}`,
    );
  }
  const names = meshDimNames === undefined ? null : [...meshDimNames];
  if (names !== null) checkNames(names, meshShape);
  const device = deviceName(deviceType, getLocalRank());
  if (!world.reaches(device)) {
    throw new DistError(
      "invalid",
      `${what}: the world's backend (${world.backendName}) does not reach ${device} tensors ` +
        `for a "${deviceType}" mesh`,
    );
  }
  return names;
}

function checkNames(names: unknown[], shape: readonly number[]): void {
  const what = "initDeviceMesh";
  if (names.length !== shape.length) {
    throw new DistError(
      "invalid",
      `${what}: ${names.length} meshDimNames (${names.join(", ")}) for a ${shape.length}-D ` +
        `meshShape [${shape.join(", ")}]; give one name per dimension`,
    );
  }
  names.forEach((name, d) => {
    if (typeof name !== "string" || name === "") {
      throw new DistError(
        "invalid",
        `${what}: meshDimNames[${d}] is ${JSON.stringify(name)}; names are non-empty strings`,
      );
    }
    if (names.indexOf(name) !== d) {
      throw new DistError("invalid", `${what}: meshDimNames repeats "${name}"; names are unique`);
    }
  });
}
