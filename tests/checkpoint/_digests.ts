/** What a sharded checkpoint holds, byte for byte: for the crash tests. @module */

/** SHA-256 (hex) of every file of the checkpoint in `dir`: its index and what the index names. */
export async function digests(dir: string): Promise<Record<string, string>> {
  const { files } = JSON.parse(Deno.readTextFileSync(`${dir}/index.json`)) as { files: string[] };
  const pieceLists = files.map((f) => f.replace(/\.safetensors$/, ".json"));
  const out: Record<string, string> = {};
  for (const name of ["index.json", ...files, ...pieceLists]) {
    const hash = await crypto.subtle.digest("SHA-256", Deno.readFileSync(`${dir}/${name}`));
    out[name] = Array.from(new Uint8Array(hash), (b) => b.toString(16).padStart(2, "0")).join("");
  }
  return out;
}
