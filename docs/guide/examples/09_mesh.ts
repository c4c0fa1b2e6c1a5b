// run: deno task launch --nproc-per-node 4 docs/guide/examples/09_mesh.ts
// expect: [rank 0] DeviceMesh('cpu', [[0, 1], [2, 3]], meshDimNames=('dp', 'tp'))
// expect: [rank 1] rank 1 at (dp 0, tp 1): its tp group is ranks 0,1, its dp group ranks 1,3
// expect: [rank 2] rank 2 at (dp 1, tp 0): its tp group is ranks 2,3, its dp group ranks 0,2
// expect: [rank 3] tp sum 5 = 2 + 3, dp sum 4 = 1 + 3
import assert from "node:assert/strict";
import { dist, tensor } from "../../../mod.ts";

await dist.initProcessGroup({ backend: "gloo" });
const rank = dist.getRank();
// Four ranks as a 2 × 2 grid, row-major: the ranks of one row (one TP group) are neighbours,
// on one node when the launcher fills a node with consecutive ranks.
const mesh = await dist.initDeviceMesh("cpu", [2, 2], { meshDimNames: ["dp", "tp"] });
if (rank === 0) console.log(String(mesh));
const tp = mesh.get("tp"), dp = mesh.get("dp");
const [row, column] = mesh.getCoordinate();
assert.equal(tp.getLocalRank(), column);
assert.equal(dp.getLocalRank(), row);
console.log(
  `rank ${rank} at (dp ${row}, tp ${column}): its tp group is ranks ${tp.ranks}, ` +
    `its dp group ranks ${dp.ranks}`,
);
// A collective on a sub-mesh's group involves only that row or column.
const alongTp = tensor([rank]), alongDp = tensor([rank]);
await dist.allReduce(alongTp, "sum", tp.getGroup());
await dist.allReduce(alongDp, "sum", dp.getGroup());
assert.equal(alongTp.item(), tp.ranks[0] + tp.ranks[1]);
assert.equal(alongDp.item(), dp.ranks[0] + dp.ranks[1]);
if (rank === 3) {
  console.log(
    `tp sum ${alongTp.item()} = ${tp.ranks.join(" + ")}, dp sum ${alongDp.item()} = ${
      dp.ranks.join(" + ")
    }`,
  );
}
await dist.destroyProcessGroup();
