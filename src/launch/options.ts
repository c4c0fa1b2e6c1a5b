/**
 * The launcher's command line, spelled like torchrun's: launcher flags, then the script and its
 * own arguments.
 * @module
 */

import { parseArgs } from "node:util";
import { z } from "zod";
import { userPath } from "../io/user_cwd.ts";

/** How to launch a job on this node. */
export interface LaunchOptions {
  /** Worker processes on this node. */
  nprocPerNode: number;
  /** Nodes in the job; for an elastic job (`--nnodes MIN:MAX`) the most nodes. */
  nnodes: number;
  /** The fewest nodes an elastic job runs on; equal to `nnodes` for a static job. */
  minNodes: number;
  /** This node's index in [0, nnodes). */
  nodeRank: number;
  /** Address of node 0, where the rendezvous store listens. */
  masterAddr: string;
  /** Port of the rendezvous store; 0 on a single node: a free port, taken when the store starts. */
  masterPort: number;
  /** torchrun's `--standalone`: one node, its store on a free port of 127.0.0.1. */
  standalone?: boolean;
  /** How many times the whole group is restarted after a failure. */
  maxRestarts: number;
  /** Folder for one log file per rank (a fresh temporary folder when empty). */
  logDir: string;
  /** The worker script. */
  script: string;
  /** The script's arguments. */
  scriptArgs: string[];
  /** Milliseconds between SIGTERM and SIGKILL when stopping workers. */
  killGraceMs?: number;
  /**
   * Elastic rendezvous: once `minNodes` have joined a round, how long it stays open for more
   * (torchrun's last call). Default 3 s.
   */
  lastCallMs?: number;
}

/** The launcher's flags as fields (the train job's config embeds them). */
export const LauncherFieldsSchema = z.object({
  nprocPerNode: z.number().int().positive(),
  nnodes: z.number().int().positive(),
  /** The fewest nodes of an elastic job (`--nnodes MIN:MAX`); unset for a static job. */
  minNodes: z.number().int().min(1, "MIN must be at least 1 in --nnodes MIN:MAX").optional(),
  nodeRank: z.number().int().nonnegative(),
  masterAddr: z.string().min(1),
  /** 0: a free port, which only a single node can take (several nodes must agree on one). */
  masterPort: z.number().int().min(0).max(65535),
  maxRestarts: z.number().int().nonnegative(),
  logDir: z.string(),
  standalone: z.boolean(),
});

/** The launcher's flags, validated. */
export const LauncherFlagsSchema = LauncherFieldsSchema.strict().refine(
  (o) => o.nodeRank < o.nnodes,
  { message: "must be below --nnodes", path: ["nodeRank"] },
).refine((o) => o.minNodes === undefined || o.minNodes <= o.nnodes, {
  message: "MIN must not exceed MAX in --nnodes MIN:MAX",
  path: ["nnodes"],
});

/**
 * The port every node of a multi-node job meets on when `--master-port` is not given
 * (torchrun's). A single node needs no agreed port: it takes a free one.
 */
export const MULTI_NODE_PORT = 29500;

/**
 * The launcher's defaults (torchrun's: one process, one node, 127.0.0.1). `masterPort` 0 is a
 * free port; {@linkcode settleMasterPort} makes it {@linkcode MULTI_NODE_PORT} for several nodes.
 */
export const LAUNCHER_DEFAULTS: z.infer<typeof LauncherFieldsSchema> = {
  nprocPerNode: 1,
  nnodes: 1,
  nodeRank: 0,
  masterAddr: "127.0.0.1",
  masterPort: 0,
  maxRestarts: 0,
  logDir: "",
  standalone: false,
};

/** The launcher's fields that the port rule reads and settles. */
export interface PortFields {
  nnodes: number;
  nodeRank: number;
  masterAddr: string;
  masterPort: number;
  standalone?: boolean;
}

/** The flag of each field the port rule names. */
const PORT_RULE_FLAGS: Record<string, string> = {
  nnodes: "--nnodes",
  nodeRank: "--node-rank",
  masterAddr: "--master-addr",
  masterPort: "--master-port",
};

/**
 * Applies the port rule to parsed flags, as torchrun users expect: `--standalone` is one node
 * whose store takes a free port of 127.0.0.1, and it refuses the flags that would place the job
 * elsewhere; without it, one node takes a free port unless `--master-port` is given, and several
 * nodes meet on `--master-port` (default 29500), never on port 0, which each node would pick
 * differently.
 *
 * @param fields The parsed fields; `masterAddr` and `masterPort` are settled in place.
 * @param given The fields the user set (by flag or config file).
 * @returns What is wrong: the flag to blame and why, or null.
 */
export function settleMasterPort(
  fields: PortFields,
  given: ReadonlySet<string>,
): { flag: string; message: string } | null {
  if (fields.standalone) {
    const clash = Object.keys(PORT_RULE_FLAGS).find((field) =>
      given.has(field) &&
      !(field === "nnodes" && fields.nnodes === 1) &&
      !(field === "nodeRank" && fields.nodeRank === 0)
    );
    if (clash !== undefined) {
      return {
        flag: "--standalone",
        message: `runs one node with its store on a free port of 127.0.0.1: leave out ` +
          `${PORT_RULE_FLAGS[clash]} (or drop --standalone to place the store yourself)`,
      };
    }
    fields.masterAddr = "127.0.0.1";
    fields.masterPort = 0;
    return null;
  }
  if (fields.nnodes === 1) return null;
  if (!given.has("masterPort")) {
    fields.masterPort = MULTI_NODE_PORT;
    return null;
  }
  if (fields.masterPort === 0) {
    return {
      flag: "--master-port",
      message: `a multi-node job's nodes must meet on one port; 0 (a free port) works on one ` +
        `node only, got 0`,
    };
  }
  return null;
}

/** What to add to the error of a store that cannot be hosted on a busy port. */
export const BUSY_PORT_HINT = "pick another with --master-port P, or, on one node, leave " +
  "--master-port out (or give --standalone) to take a free port";

/** Command-line flag names of the launcher's fields, spelled like torchrun's. */
export const LAUNCHER_FLAGS = {
  "nproc-per-node": "nprocPerNode",
  nnodes: "nnodes",
  "node-rank": "nodeRank",
  "master-addr": "masterAddr",
  "master-port": "masterPort",
  "max-restarts": "maxRestarts",
  "log-dir": "logDir",
} as const;

/** Usage of `deno task launch`. */
export const LAUNCH_USAGE = `usage: deno task launch [options] SCRIPT [SCRIPT_ARGS...]

  --nproc-per-node N   worker processes on this node (default 1)
  --nnodes M|MIN:MAX   nodes in the job (default 1); MIN:MAX makes it elastic: when a node is
                       lost the others restart their workers at the new world size, up to
                       --max-restarts times per job; a node that arrives is admitted (the others
                       stop at a step boundary with a snapshot) up to MAX, beyond which it exits 0
  --node-rank R        this node's index (default 0); in an elastic job node 0 only hosts the
                       store, and ranks follow the order in which nodes join each round
  --master-addr A      address of node 0's rendezvous store (default 127.0.0.1)
  --master-port P      its port (default: a free port on one node, 29500 for several nodes,
                       which must all give the same)
  --standalone         one node, its store on a free port of 127.0.0.1 (torchrun's flag; it
                       refuses --nnodes above 1, --node-rank, --master-addr and --master-port)
  --max-restarts K     restart the whole group up to K times after a failure (default 0;
                       counted per job, not per node)
  --log-dir D          one log file per rank (default: a temporary folder, removed on success)

Workers get RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT,
DTRAIN_TOKEN and a BLAS thread count. Multi-node jobs need the same DTRAIN_TOKEN on every node.
`;

/** An invalid launcher command line, naming the flag. */
export class LaunchArgsError extends Error {
  /** @param message What is wrong. */
  constructor(message: string) {
    super(message);
    this.name = "LaunchArgsError";
  }
}

/**
 * Splits `args` into launcher flags (before the script) and the script with its arguments.
 *
 * @throws LaunchArgsError naming the bad flag.
 */
export function parseLaunchArgs(args: string[]): LaunchOptions | "help" {
  const scriptIndex = findScript(args);
  const own = scriptIndex < 0 ? args : args.slice(0, scriptIndex);
  const options: Record<string, { type: "string" | "boolean" }> = {
    help: { type: "boolean" },
    standalone: { type: "boolean" },
  };
  for (const flag of Object.keys(LAUNCHER_FLAGS)) options[flag] = { type: "string" };
  let parsed;
  try {
    parsed = parseArgs({ args: own, options, strict: true, allowPositionals: false });
  } catch (error) {
    throw new LaunchArgsError((error as Error).message);
  }
  if (parsed.values.help) return "help";
  if (scriptIndex < 0) {
    throw new LaunchArgsError(
      "no script given; usage: deno task launch [options] SCRIPT [ARGS...]",
    );
  }
  const values: Record<string, unknown> = {
    ...LAUNCHER_DEFAULTS,
    standalone: parsed.values.standalone === true,
  };
  const given = new Set<string>();
  for (const [flag, field] of Object.entries(LAUNCHER_FLAGS)) {
    const raw = parsed.values[flag];
    if (typeof raw !== "string") continue;
    given.add(field);
    const range = field === "nnodes" ? splitNodes(raw) : null;
    if (range !== null) {
      Object.assign(values, range);
    } else if (field === "masterAddr") {
      values[field] = raw;
    } else if (field === "logDir") {
      values[field] = userPath(raw);
    } else {
      const n = decimalNumber(raw);
      if (typeof n === "string") throw new LaunchArgsError(`--${flag}: ${n}`);
      values[field] = n;
    }
  }
  const result = LauncherFlagsSchema.safeParse(values);
  if (!result.success) {
    const issue = result.error.issues[0];
    const field = String(issue.path[0] ?? "");
    const flag = field === "minNodes"
      ? "nnodes"
      : Object.entries(LAUNCHER_FLAGS).find(([, f]) => f === field)?.[0] ?? field;
    throw new LaunchArgsError(`--${flag}: ${issue.message}`);
  }
  const problem = settleMasterPort(result.data, given);
  if (problem !== null) throw new LaunchArgsError(`${problem.flag}: ${problem.message}`);
  const { minNodes, ...rest } = result.data;
  return {
    ...rest,
    minNodes: minNodes ?? rest.nnodes,
    // The user's script, from the folder they typed it in (`deno task` runs in the repository).
    script: userPath(args[scriptIndex]),
    scriptArgs: args.slice(scriptIndex + 1),
  };
}

/**
 * `--nnodes MIN:MAX` as the two fields, or null when `raw` is not of that form.
 *
 * @example
 * ```ts
 * import { deepEqual as assertEquals } from "node:assert/strict";
 * import { splitNodes } from "./options.ts";
 * assertEquals(splitNodes("1:2"), { minNodes: 1, nnodes: 2 });
 * assertEquals(splitNodes("2"), null);
 * ```
 */
export function splitNodes(raw: string): { minNodes: number; nnodes: number } | null {
  const m = raw.trim().match(/^(\d+):(\d+)$/);
  return m ? { minNodes: Number(m[1]), nnodes: Number(m[2]) } : null;
}

/**
 * `raw` as a number written in decimal (`12`, `0.5`, `1e-3`), or what is wrong with it: other
 * bases (`0x10`, `0o7`, `0b1`), which `Number()` would take, are refused like any non-number.
 *
 * @example
 * ```ts
 * import { equal as assertEquals } from "node:assert/strict";
 * import { decimalNumber } from "./options.ts";
 * assertEquals(decimalNumber("1e3"), 1000);
 * assertEquals(decimalNumber("0x10"), 'expected a number, got "0x10" (numbers are read in decimal only)');
 * assertEquals(decimalNumber("abc"), 'expected a number, got "abc"');
 * ```
 */
export function decimalNumber(raw: string): number | string {
  const text = raw.trim();
  if (/^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i.test(text) && Number.isFinite(Number(text))) {
    return Number(text);
  }
  const otherBase = text !== "" && Number.isFinite(Number(text));
  return `expected a number, got "${raw}"${otherBase ? " (numbers are read in decimal only)" : ""}`;
}

/**
 * What is wrong with `value` as the value of a flag, or null: a flag needs a value, and one that
 * looks like another flag means the value was forgotten (it would swallow the next flag).
 *
 * @example
 * ```ts
 * import { equal as assertEquals } from "node:assert/strict";
 * import { badFlagValue } from "./options.ts";
 * assertEquals(badFlagValue("--epochs"), "needs a value, but is followed by --epochs");
 * assertEquals(badFlagValue("-1"), null);
 * ```
 */
export function badFlagValue(value: string | undefined): string | null {
  if (value === undefined) return "needs a value, but nothing follows it";
  if (value.startsWith("--")) return `needs a value, but is followed by ${value}`;
  return null;
}

/**
 * The index of the first argument that is neither a flag nor a flag's value. A short flag
 * (`-n`) counts as a flag, for parseArgs to refuse by name, never as the script.
 */
function findScript(args: string[]): number {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (!arg.startsWith("-") || arg === "-") return i;
    if (arg === "--help" || arg === "--standalone") continue;
    const eq = arg.indexOf("=");
    const flag = eq < 0 ? arg : arg.slice(0, eq);
    if (flag.slice(2) in LAUNCHER_FLAGS) {
      const problem = badFlagValue(eq < 0 ? args[i + 1] : arg.slice(eq + 1));
      if (problem !== null) throw new LaunchArgsError(`${flag}: ${problem}`);
    }
    if (eq < 0) i++;
  }
  return -1;
}
