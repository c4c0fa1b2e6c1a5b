// The node start-up script outside Terraform: rendered from the same template with values a test
// chooses (a local checkout, loopback addresses, a CPU device), so that it can be run directly.
import { fileURLToPath } from "node:url";
import type { Value } from "./expression.ts";
import { renderTemplate } from "./template.ts";

/** The Nebius configurations, and the templates every cloud's nodes share. */
export const NEBIUS_DIR = fileURLToPath(new URL("../../infrastructure/nebius", import.meta.url));
export const START_TRAINING_TEMPLATE = `${NEBIUS_DIR}/../templates/start-training.sh.tftpl`;

/** The variables the start-up script template reads (checked against it by the test suite). */
export interface StartTrainingVars {
  install_dir: string;
  nnodes: number;
  node_rank: number;
  nproc_per_node: number;
  master_addr: string;
  master_port: number;
  connect_attempts: number;
  connect_interval_s: number;
  max_restarts: number;
  log_dir: string;
  device: string;
  /** The train command line after the launcher flags, one argument per item. */
  train_args: string[];
  snapshot_path: string;
}

/** Renders start-training.sh as Terraform would for these values. */
export function renderStartTraining(vars: StartTrainingVars): Promise<string> {
  return renderTemplate(
    Deno.readTextFileSync(START_TRAINING_TEMPLATE),
    vars as unknown as Record<string, Value>,
    "start-training.sh.tftpl",
  );
}
