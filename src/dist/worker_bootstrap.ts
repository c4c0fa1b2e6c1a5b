/**
 * Preloaded by the launcher (`deno run --preload`) before every worker's own script, so that the
 * worker dies with its launcher whatever the script does, even if it never touches dtrain, and
 * SIGUSR1 makes it write its ledger (ledger_files.ts) rather than kill it.
 * @module
 */

import { guardLaunchedWorker } from "./lifetime.ts";
import { writeLedgerOnSignal } from "./ledger_files.ts";

guardLaunchedWorker();
writeLedgerOnSignal();
