/** Prints, as one JSON line, the core whose kernels OpenBLAS runs once dtrain has loaded it. */

import { loadDtrain } from "../../../ffi/dtrain.ts";
import { openblasCoreName } from "../../../ffi/openblas_core.ts";

const core = openblasCoreName(loadDtrain().openblas_get_corename);
console.log(JSON.stringify({ core, env: Deno.env.get("OPENBLAS_CORETYPE") ?? null }));
