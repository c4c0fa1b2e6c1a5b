/**
 * `deno task debug LOG_DIR`: the diagnosis of a finished (or killed) job from the ledger files
 * its ranks left in their log folder, the same the ranks and the launcher printed.
 * @module
 */

import { formatDiagnosis } from "../distributed/ledger_exchange.ts";
import { diagnoseLedgerDir } from "../distributed/ledger_read.ts";

if (import.meta.main) {
  const [dir, ...rest] = Deno.args;
  if (dir === undefined || rest.length > 0 || dir === "--help") {
    console.error(
      "usage: deno task debug LOG_DIR   (the launcher's --log-dir, or the folder it named)",
    );
    Deno.exit(2);
  }
  let lines;
  try {
    lines = diagnoseLedgerDir(dir);
  } catch (error) {
    console.error(`debug: cannot read ${dir}: ${(error as Error).message}`);
    Deno.exit(1);
  }
  if (lines === null) {
    console.error(`debug: ${dir} holds no ledger (rank_<N>.ledger.json); was DTRAIN_LEDGER=0?`);
    Deno.exit(1);
  }
  console.log(formatDiagnosis("debug", lines));
}
