// What a checkpoint folder holds, for tests that check nothing else was left there.

/** Every file and folder under `dir`, as paths relative to it, sorted. */
export function listing(dir: string, under = ""): string[] {
  return [...Deno.readDirSync(`${dir}/${under}`)].flatMap((e) => {
    const path = under ? `${under}/${e.name}` : e.name;
    return e.isDirectory ? [path, ...listing(dir, path)] : [path];
  }).sort();
}
