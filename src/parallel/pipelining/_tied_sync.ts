/**
 * The gradient of a parameter that two stages on different ranks hold as one (see [Note: the
 * tied embedding across stages] in split_gpt.ts), summed after a step: each side sends its
 * gradient to the other and adds what it receives, so both hold the same sum (float addition of
 * two terms is commutative, so the two sums are equal to the bit) and take the same optimizer
 * step.
 * @module
 */

import { irecv, isend } from "../../distributed/p2p.ts";
import { noGrad } from "../../tensor/autograd.ts";
import { zeros } from "../../tensor/creation.ts";
import type { PipelineStage } from "./stage.ts";
import { tiedParameter, tiedParameters } from "./tied.ts";

/** Above every tag a step's activations and gradients use (see _exchange.ts). */
const TIED_TAG = 1 << 30;

/**
 * Sums each tied parameter's gradient with its copies on the stages of other ranks.
 *
 * @param stages This rank's stages.
 */
export async function syncTiedGradients(stages: PipelineStage[]): Promise<void> {
  const here = new Set(stages.map((s) => s.stageIndex));
  for (const stage of stages) {
    for (const tie of tiedParameters(stage.submod)) {
      const param = tiedParameter(stage.submod, tie);
      for (const other of tie.stages) {
        if (other === stage.stageIndex || here.has(other)) continue;
        const peer = stage.rankOf(other);
        const on = { dtype: param.dtype, device: param.device };
        const mine = param.grad ?? zeros(param.shape, on);
        const theirs = zeros(param.shape, on);
        const sent = Promise.resolve(
          isend(mine, peer, { group: stage.group, tag: TIED_TAG + other }),
        );
        sent.catch(() => {}); // a failed receive below is the error to report
        await irecv(theirs, peer, { group: stage.group, tag: TIED_TAG + stage.stageIndex });
        await sent;
        noGrad(() => mine.add_(theirs));
        theirs.dispose();
        if (param.grad === null) {
          mine.persistent = true;
          param.grad = mine;
        }
      }
    }
  }
}
