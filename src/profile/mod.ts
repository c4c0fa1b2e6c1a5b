/**
 * `profile`: a per-rank timeline of a job in the Chrome trace format (Perfetto, chrome://tracing):
 * start it with `DTRAIN_PROFILE=PATH` or `--profile PATH` (train), mark work with `span`, draw it
 * with `renderSvg`.
 * @module
 */

export {
  nowUs,
  profiling,
  record,
  ROWS,
  span,
  startProfile,
  stopProfile,
  type TraceEvent,
} from "./tracer.ts";
export { mergeRankTraces } from "./merge.ts";
export { type RenderOptions, renderSvg } from "./svg.ts";
