/**
 * `deno task plan FLAGS`: the train job's plan for FLAGS (the train job's own flags), printed
 * before anything is allocated or started; the same as `deno task train FLAGS --dry-run`.
 * @module
 */

import { main } from "./main.ts";

if (import.meta.main) {
  Deno.exit(await main([...Deno.args, "--dry-run"]));
}
