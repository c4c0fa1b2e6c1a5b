/**
 * Preloaded by the launcher (`deno run --preload`) before every worker's own script, so that the
 * worker dies with its launcher whatever the script does, even if it never touches dtrain, and
 * writes its ledger when the launcher asks (ledger_files.ts).
 * @module
 */

import { guardLaunchedWorker } from "./lifetime.ts";
import { writeLedgerOnRequest } from "./ledger_files.ts";

guardLaunchedWorker();
writeLedgerOnRequest();
