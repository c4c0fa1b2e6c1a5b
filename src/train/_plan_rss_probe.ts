/**
 * Prints the resident bytes of a process that loaded the train job's modules and native
 * libraries, less its tensors' bytes (plan_machine.ts's baseline).
 * @module
 */

import "./trainer.ts";
import { ones } from "../tensor/creation.ts";
import { allocatedBytes } from "../tensor/storage.ts";

const t = ones([1024]);
t.matmul(ones([1024, 1])).dispose();
console.log(Deno.memoryUsage().rss - allocatedBytes());
