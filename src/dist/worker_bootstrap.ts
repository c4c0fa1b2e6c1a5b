/**
 * Preloaded by the launcher (`deno run --preload`) before every worker's own script, so that the
 * worker dies with its launcher whatever the script does, even if it never touches dtrain.
 * @module
 */

import { guardLaunchedWorker } from "./lifetime.ts";

guardLaunchedWorker();
