/**
 * Hugging Face GPT-2 folders for the tests of hostile `--init-from` inputs: a copy of the fixture
 * with config.json edited, and a folder whose model.safetensors declares any shapes, its data a
 * sparse file (terabytes on disk cost nothing until read).
 * @module
 */

import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** The fixture: 2 layers, 32 wide, 16 positions, 101 tokens. */
export const HF_DIR = fileURLToPath(new URL("../fixtures/gpt2_hf", import.meta.url));

/** The fixture's config.json. */
export function fixtureConfig(): Record<string, unknown> {
  return JSON.parse(Deno.readTextFileSync(join(HF_DIR, "config.json")));
}

/**
 * Makes `dir` a GPT-2 folder: the fixture's weights and its config.json with `text` (or the
 * fixture's fields and `config`'s) in place of its own.
 */
export function copyWithConfig(dir: string, config: Record<string, unknown> | string): string {
  Deno.mkdirSync(dir, { recursive: true });
  Deno.copyFileSync(join(HF_DIR, "model.safetensors"), join(dir, "model.safetensors"));
  const text = typeof config === "string"
    ? config
    : JSON.stringify({ ...fixtureConfig(), ...config });
  Deno.writeTextFileSync(join(dir, "config.json"), text);
  return dir;
}

/**
 * The tensors of a GPT-2 of `nLayer` blocks `c` wide (biases on, no attention masks), as the
 * Hugging Face file names and stores them (Conv1D weights [in, out]).
 */
export function gpt2Shapes(
  nLayer: number,
  c: number,
  vocab: number,
  positions: number,
): Record<string, number[]> {
  const shapes: Record<string, number[]> = {
    "wte.weight": [vocab, c],
    "wpe.weight": [positions, c],
  };
  for (let i = 0; i < nLayer; i++) {
    const h = `h.${i}`;
    Object.assign(shapes, {
      [`${h}.ln_1.weight`]: [c],
      [`${h}.ln_1.bias`]: [c],
      [`${h}.attn.c_attn.weight`]: [c, 3 * c],
      [`${h}.attn.c_attn.bias`]: [3 * c],
      [`${h}.attn.c_proj.weight`]: [c, c],
      [`${h}.attn.c_proj.bias`]: [c],
      [`${h}.ln_2.weight`]: [c],
      [`${h}.ln_2.bias`]: [c],
      [`${h}.mlp.c_fc.weight`]: [c, 4 * c],
      [`${h}.mlp.c_fc.bias`]: [4 * c],
      [`${h}.mlp.c_proj.weight`]: [4 * c, c],
      [`${h}.mlp.c_proj.bias`]: [c],
    });
  }
  shapes["ln_f.weight"] = shapes["ln_f.bias"] = [c];
  return shapes;
}

/**
 * Writes a valid BF16 safetensors file at `path` with these shapes, its data zeros that take no
 * disk space (the file is extended, not written).
 *
 * @returns The size of the file in bytes.
 */
export function writeSparseSafetensors(path: string, shapes: Record<string, number[]>): number {
  const header: Record<string, unknown> = {};
  let offset = 0;
  for (const [name, shape] of Object.entries(shapes)) {
    const bytes = 2 * shape.reduce((a, b) => a * b, 1);
    header[name] = { dtype: "BF16", shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  let json = JSON.stringify(header);
  json += " ".repeat((8 - (json.length % 8)) % 8); // the reference pads the header to 8 bytes
  const encoded = new TextEncoder().encode(json);
  const prefix = new Uint8Array(8 + encoded.length);
  new DataView(prefix.buffer).setBigUint64(0, BigInt(encoded.length), true);
  prefix.set(encoded, 8);
  Deno.writeFileSync(path, prefix);
  Deno.truncateSync(path, prefix.length + offset);
  return prefix.length + offset;
}
