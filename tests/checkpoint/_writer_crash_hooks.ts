// Imported by a background checkpoint writer (setWriterHooks) in async_save_worker.ts: arms
// CRASH_POINT (see _crash_hooks.ts) on the writer's thread when this process is rank CRASH_RANK.
import { arm } from "./_crash_hooks.ts";

if (Deno.env.get("RANK") === Deno.env.get("CRASH_RANK")) arm(Deno.env.get("CRASH_POINT")!);
