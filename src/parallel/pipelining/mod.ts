/**
 * Pipeline parallelism (PyTorch's `torch.distributed.pipelining`): a model split into stages
 * that run on different ranks, microbatches passed between them by point-to-point sends, under
 * the GPipe, 1F1B and Interleaved 1F1B schedules.
 * @module
 */

export * from "./actions.ts";
export * from "./orders.ts";
export * from "./split_gpt.ts";
export * from "./stage.ts";
export * from "./schedule.ts";
export * from "./schedules.ts";
export * from "./clip.ts";
export * from "./parallelize_3d.ts";
