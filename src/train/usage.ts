/** The train job's `--help` text. @module */

import { FAMILIES, FAMILY_NAMES } from "../tensor/device/mod.ts";
import { DEFAULTS, FSDP_SNAPSHOTS, GPT_DEFAULTS, TOKENS_DEFAULTS } from "./_schema.ts";

const T = { ...DEFAULTS, ...GPT_DEFAULTS, ...TOKENS_DEFAULTS };

/** The help column's indent. */
const INDENT = " ".repeat(27);

/** `--device`: the families of src/tensor/device/family.ts, each with its record's summary. */
const DEVICE = [
  `  --device ${FAMILY_NAMES.join("|")}`.padEnd(26) + ` (default ${DEFAULTS.device})`,
  ...FAMILY_NAMES.map((name) => `${INDENT}${name}: ${FAMILIES[name].summary}`),
].join("\n");

const EPOCHS = `usage: deno task train [EPOCHS SAVE_EVERY] [options]

  EPOCHS SAVE_EVERY        the original project's positional form (same as --epochs, --save-every)
  --epochs N               epochs to train (default ${DEFAULTS.epochs})
  --save-every N           write a snapshot every N epochs (default ${DEFAULTS.saveEvery})
  --save-every-steps N     also every N steps within an epoch (default 0: off); a job restarted
                           from one goes on from that sample, at any world size
  --batch-size N|auto      samples per batch and process (default ${DEFAULTS.batchSize}); auto: the largest
                           that the planner fits in this node's memory, at most the default
  --lr X                   learning rate (default ${DEFAULTS.lr})
  --optimizer sgd|adamw    (default ${DEFAULTS.optimizer}); --momentum X, --weight-decay X
  --lr-schedule constant|cosine (default ${DEFAULTS.lrSchedule}); cosine: linear warmup over
                           --warmup-steps N, then a cosine decay to lr/10 at the last step
  --model mlp|linear|gpt   (default ${DEFAULTS.model}); --hidden 512,512 for the MLP's hidden sizes
  --dataset fashion-mnist|synthetic|text|tokens (default ${DEFAULTS.dataset}; text and tokens
                           with gpt; tokens trains by iterations, as nanoGPT: see below)
  --data-root DIR          the data set's folder (default: its Debian package's)
  --block-size N --n-layer N --n-head N --n-embd N --dropout X
                           the GPT's shape (defaults ${DEFAULTS.blockSize}, ${DEFAULTS.nLayer}, ${DEFAULTS.nHead}, ${DEFAULTS.nEmbd}, ${DEFAULTS.dropout}); --model gpt
                           also defaults to --dataset text --optimizer adamw --lr ${GPT_DEFAULTS.lr}
                           --lr-schedule cosine --warmup-steps ${GPT_DEFAULTS.warmupSteps} --weight-decay ${GPT_DEFAULTS.weightDecay} --batch-size ${GPT_DEFAULTS.batchSize} --epochs ${GPT_DEFAULTS.epochs} --snapshot ${GPT_DEFAULTS.snapshot}
  --snapshot PATH          snapshot file; an existing one is resumed (default ${DEFAULTS.snapshot});
                           metrics.jsonl, report.html and logs/ (one per rank) go beside it
  --async-snapshots true|false  write sharded snapshots in the background while training goes
                           on (DCP's async_save; default ${DEFAULTS.asyncSnapshots}): a copy of the state is held meanwhile
  --config FILE.json|FILE.py settings as JSON (camelCase keys), or a nanoGPT config file as it
                           is (its key = literal lines, snake_case names; see below); flags
                           override it
  --seed N, --threads N (BLAS threads per process, 0 = automatic)
  --max-steps N            stop after N optimizer steps over the whole run, resumed ones included
                           (default 0: no limit); the snapshot then resumes mid-epoch
  --grad-clip X            clip the total gradient norm at X, 0 = off (default ${DEFAULTS.gradClip};
                           --dataset tokens: ${T.gradClip}), as clip_grad_norm_, over every rank's shards
  --log-every N            log the loss, learning rate, throughput and gradient norm every N steps
                           (default 0: about 10 times an epoch), to the console and metrics.jsonl
  --nproc-per-node N       worker processes on this machine (default ${DEFAULTS.nprocPerNode}; 1 = no launcher)
  --nnodes N|MIN:MAX --node-rank R --master-addr A --master-port P --max-restarts K --log-dir D
                           multi-node launch, spelled like torchrun (--log-dir: default logs/
                           beside the snapshot); --master-port: default a free port on one node,
                           29500 for several nodes, which must all give the same
  --standalone             one node, its store on a free port of 127.0.0.1 (torchrun's flag)
${DEVICE}
  --dtype f32|bf16         (default f32) bf16: forward and backward under autocast to bf16 (as
                           nanoGPT's dtype = 'bfloat16'), DDP all-reduces and FSDP all-gathers and
                           reduce-scatters in bf16, half the bytes; the weights and the optimizer
                           stay f32
  --strategy ddp|fsdp      (default ${DEFAULTS.strategy}) ddp: every process keeps the whole model; fsdp: the
                           parameters, gradients and optimizer state are sharded over the processes
                           (each GPT block, each MLP layer, then the rest), the snapshot is a
                           sharded folder (default ${FSDP_SNAPSHOTS.other}, with gpt ${FSDP_SNAPSHOTS.gpt})
                           that resumes on any --nproc-per-node, and the final model goes to
                           model.safetensors beside it
  --tp N --dp-replicate N --dp-shard N  torchtitan's N-D layout: the mesh dp_replicate × dp_shard
                           × tp (row-major, a TP group on neighbouring ranks); the product must be
                           the world size; -1 (the default of the dp ones) is the rest: dp-shard
                           under fsdp (HSDP when dp-replicate > 1), dp-replicate under ddp
                           (dp-shard must be 1); --tp (default 1, --model gpt): the GPT plan, heads
                           split (must divide --n-head and the vocabulary), DDP over the dp ranks;
                           a TP group reads the same batches, --batch-size is per dp rank;
                           with --strategy fsdp, 2-D (TP within, FSDP across; 3-D with
                           --dp-replicate: HSDP × TP); TP's snapshot is a sharded folder
  --pp N --pp-schedule gpipe|1f1b|interleaved --microbatches M  pipeline parallelism (--model gpt,
                           outermost on the mesh pp × dp_replicate × dp_shard × tp): N stages of
                           whole blocks (2 per rank interleaved; --n-layer a multiple of them),
                           each step in M microbatches (default N; --batch-size a multiple of M;
                           1f1b, the default, needs M >= N, interleaved M a multiple of N); the
                           snapshot is a sharded folder that resumes on another --pp; with --tp,
                           --strategy fsdp, --ac (--tp: --sequence-parallel false and
                           --loss-parallel false); not yet with --dtype bf16 or --dataset tokens
  --sequence-parallel true|false  with --tp: norms and dropout on 1/tp of the sequence (default
                           ${DEFAULTS.sequenceParallel}, as torchtitan; --tp must divide --block-size)
  --loss-parallel true|false  with --tp: the loss from vocabulary-sharded logits (default ${DEFAULTS.lossParallel},
                           as torchtitan's disable_loss_parallel = false)
  --ac none|full|selective activation checkpointing per GPT block (default ${DEFAULTS.ac}): full, every
                           block; selective, every --ac-every N-th (default ${DEFAULTS.acEvery}; torchtitan's
                           selective_ac_option "N")
  --profile PATH           write a Chrome trace (Perfetto, chrome://tracing) of every rank to PATH
  --straggler-ms MS        at each log step, name the rank that arrives last at collectives when
                           its mean lag over the recent ones passes MS (default 0: off)
  --peak-flops X           the FLOP/s that MFU is a fraction of (default 0: on cuda an A100's bf16
                           312e12, as nanoGPT; on a CPU its matmul rate, measured at the start)
  --dry-run                print the plan (deno task plan): each rank's peak tensor memory and
                           RSS, and its step time, from the shapes and this machine's measured
                           rates; start nothing. A plan whose ranks do not fit this node's
                           MemAvailable (or env DTRAIN_MEM_AVAILABLE, bytes) is refused
`;

const ITERATIONS = `
--dataset tokens: nanoGPT's train.py, iteration by iteration (defaults: nanoGPT's, except the
model's shape, which stays the job's small one unless a config file sets it)
  --data-dir DIR           train.bin and val.bin (uint16 tokens) and meta.json (vocabSize, and a
                           char table to decode the sample), as deno task prepare writes them; a
                           nanoGPT config's dataset = 'NAME' reads data/NAME
  --out-dir DIR            the snapshot's folder (default ${T.outDir}: ${T.outDir}/snapshot.safetensors,
                           under fsdp ${T.outDir}/snapshot); --snapshot PATH overrides it
  --max-iters N            train iterations 0..N (default ${T.maxIters})
  --eval-interval N        every N iterations (and at 0) estimate the train and val loss, each
                           the mean over --eval-iters N random batches (defaults ${T.evalInterval}, ${T.evalIters}),
                           then save the snapshot if the val loss improved
  --always-save-checkpoint true|false  save at every evaluation (default ${T.alwaysSaveCheckpoint})
  --eval-only true|false   stop after the first evaluation (default ${T.evalOnly})
  --log-interval N         log the loss every N iterations (default ${T.logInterval})
  --init-from scratch|resume|DIR  (default ${T.initFrom}) resume: from the snapshot; DIR: GPT-2
                           weights (GPT.fromPretrained); a restarted worker resumes its snapshot
  --gradient-accumulation-steps N  micro-steps per iteration over all ranks (nanoGPT's global
                           count: each data-parallel rank runs N / their number), the loss divided
                           by it, gradients synchronised at the last; a multiple of the
                           data-parallel size (world size / --tp), which is the default
  --batch-size N|auto      micro-batch size (default ${T.batchSize}; auto: the largest that fits, dividing
                           it, the accumulation steps raised to keep the global batch); --lr X (default ${T.lr})
  --beta1 X --beta2 X      AdamW's betas (defaults ${T.beta1}, ${T.beta2}); --weight-decay X (default ${T.weightDecay})
  --grad-clip X            clip the gradient norm at X, 0 = off (default ${T.gradClip})
  --decay-lr true|false    nanoGPT's get_lr (default ${T.decayLr}): linear warmup over --warmup-iters N,
                           then a cosine decay to --min-lr X at --lr-decay-iters N (defaults
                           ${T.warmupIters}, ${T.minLr}, ${T.lrDecayIters})
  --bias true|false        biases in the Linear and LayerNorm layers (default ${T.bias}; ${DEFAULTS.bias} for text)
  --seed N (default ${T.seed}; rank r draws batches from seed + r), --nproc-per-node N (default ${T.nprocPerNode})

A nanoGPT config file (--config config/train_shakespeare_char.py) sets out_dir, eval_interval,
eval_iters, eval_only, log_interval, always_save_checkpoint, init_from, dataset,
gradient_accumulation_steps, batch_size, block_size, n_layer, n_head, n_embd, dropout, bias,
learning_rate, max_iters, weight_decay, beta1, beta2, grad_clip, decay_lr, warmup_iters,
lr_decay_iters, min_lr, device and dtype ('float32' or 'bfloat16'; 'float16', which needs
nanoGPT's GradScaler, is refused); wandb_*, compile and backend are read and ignored.
`;

const PATHS = `
Relative paths (--config, --data-root, --data-dir, --out-dir, --snapshot, --init-from, --profile,
--log-dir, a nanoGPT config's dataset) are read from the folder deno task was run in (INIT_CWD).
Errors name a setting as it was given: its flag, or its key in the config file.
`;

/** The usage text printed by `--help`. */
export const USAGE: string = EPOCHS + ITERATIONS + PATHS;
