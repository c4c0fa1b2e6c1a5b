// `deno task prepare` on inputs and outputs that are not what it expects: bytes that are not
// UTF-8 are refused naming the byte (nanoGPT's prepare.py raises UnicodeDecodeError; they were
// read as U+FFFD with exit 0), unless --errors replace asks for that; an input that is a
// directory or FIFO is named without reading it; a disk that fills while writing gives one line
// naming the folder and the file (was a raw stack trace), the earlier outputs left as they were.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { prepare, PrepareError } from "../../src/prepare/prepare.ts";
import { ROOT, runDeno, withTempDir } from "../_harness/processes.ts";

/** Runs `deno task prepare ARGS`. */
const task = (...args: string[]) =>
  runDeno({ args: ["prepare", ...args], task: true, timeoutMs: 60_000, cwd: ROOT });

/** Fails unless prepare(options) rejects with a PrepareError matching `message`. */
async function refuses(options: Parameters<typeof prepare>[0], message: RegExp): Promise<void> {
  await assert.rejects(() => prepare(options), (e: Error) => {
    assert.ok(e instanceof PrepareError, String(e));
    assert.match(e.message, message);
    return true;
  });
}

Deno.test("prepare refuses bytes that are not UTF-8 naming the first one, unless errors is replace", async () => {
  await withTempDir("prepare-utf8", async (dir) => {
    const out = join(dir, "out");
    const cases: [string, number[], RegExp][] = [
      [
        "latin1.txt",
        [0x61, 0x62, 0x63, 0xe9, 0x74, 0xe9],
        /not UTF-8 at byte 3 \(0xe9 0x74 0xe9\b/,
      ],
      ["cut.txt", [0x61, 0xe2, 0x82], /not UTF-8 at byte 1 \(0xe2 0x82 \.\.\.\)/],
      ["surrogate.txt", [0x61, 0x62, 0xed, 0xa0, 0x80], /not UTF-8 at byte 2 \(0xed 0xa0 0x80/],
      ["overlong.txt", [0xc0, 0xaf], /not UTF-8 at byte 0 \(0xc0 0xaf/],
      ["past.txt", [0x0a, 0xf4, 0x90, 0x80, 0x80], /not UTF-8 at byte 1 \(0xf4 0x90 0x80 0x80/],
    ];
    for (const [name, bytes, message] of cases) {
      const input = join(dir, name);
      Deno.writeFileSync(input, Uint8Array.from(bytes));
      await refuses(
        { tokenizer: "char", inputs: [input], out },
        new RegExp(`^--input .*${name}: ${message.source}.*--errors replace`),
      );
    }
    assert.ok(!existsSync(out), "nothing written on refusal");

    const input = join(dir, "mixed.txt");
    const text = new TextEncoder().encode("\ufeffna\u00efve 🤗\n");
    Deno.writeFileSync(input, Uint8Array.from([...text, 0xff, 0x0a]));
    const meta = await prepare({ tokenizer: "char", inputs: [input], out, errors: "replace" });
    const itos = (meta as { itos?: string[] }).itos!;
    assert.ok(itos.includes("\ufffd"), "the bad byte reads as U+FFFD");
    assert.ok(itos.includes("\ufeff"), "a byte-order mark stays, as Python's open() keeps it");
    await refuses(
      { tokenizer: "char", inputs: [input], out, errors: "ignore" as "strict" },
      /^--errors: unknown handler "ignore"; expected one of strict, replace$/,
    );
  });
});

Deno.test("deno task prepare: exit 2 naming the byte, exit 0 with --errors replace", async () => {
  await withTempDir("prepare-utf8-cli", async (dir) => {
    const input = join(dir, "in.txt"), out = join(dir, "out");
    Deno.writeFileSync(input, Uint8Array.from([0x68, 0x69, 0x0a, 0xff, 0xfe, 0x0a]));
    const strict = await task("--tokenizer", "char", "--input", input, "--out", out);
    assert.equal(strict.code, 2, strict.stderr);
    assert.equal(
      strict.stderr.trim().split("\n").at(-1), // after deno task's echo of the command
      `prepare: --input ${input}: not UTF-8 at byte 3 (0xff 0xfe 0x0a ...), where nanoGPT's ` +
        "prepare.py raises UnicodeDecodeError; convert the file to UTF-8, or pass --errors " +
        "replace to read such bytes as U+FFFD (--help for usage)",
    );
    const replace = await task(
      ...["--tokenizer", "char", "--input", input, "--out", out, "--errors", "replace"],
    );
    assert.equal(replace.code, 0, replace.stderr);
    assert.match(replace.stdout, /char tokenizer, vocabulary 4: /); // h, i, \n, U+FFFD
  });
});

Deno.test("prepare names an input that is a directory or a FIFO, without reading it", async () => {
  await withTempDir("prepare-kinds", async (dir) => {
    const out = join(dir, "out");
    await refuses(
      { tokenizer: "char", inputs: [dir], out },
      /^--input .*prepare-kinds\w*: is a directory, not a regular file$/,
    );
    const fifo = join(dir, "fifo");
    assert.ok((await new Deno.Command("mkfifo", { args: [fifo] }).output()).success);
    await refuses(
      { tokenizer: "char", inputs: [fifo], out },
      /^--input .*fifo: is a FIFO, not a regular file$/,
    );
  });
});

Deno.test({
  name:
    "deno task prepare on a disk that fills: one line naming the folder and file, old outputs kept",
  ignore: Deno.uid() !== 0, // mounting a tmpfs needs root
  fn: async () => {
    await withTempDir("prepare-full", async (dir) => {
      const input = join(dir, "in.txt"), disk = join(dir, "disk");
      // 40,000 characters: 80 KB of train.bin and val.bin, on a 64 KiB disk.
      Deno.writeTextFileSync(input, "to be or not to be\n".repeat(2000).slice(0, 40_000));
      Deno.mkdirSync(disk);
      const mount = await new Deno.Command("mount", {
        args: ["-t", "tmpfs", "-o", "size=64k", "tmpfs", disk],
      }).output();
      assert.ok(mount.success, new TextDecoder().decode(mount.stderr));
      try {
        const small = join(dir, "small.txt");
        Deno.writeTextFileSync(small, "to be\n");
        const first = await task("--tokenizer", "char", "--input", small, "--out", disk);
        assert.equal(first.code, 0, first.stderr);
        const before = ["train.bin", "val.bin", "meta.json"].map((f) =>
          Deno.readFileSync(join(disk, f))
        );
        const run = await task("--tokenizer", "char", "--input", input, "--out", disk, "--force");
        assert.equal(run.code, 2, run.stderr);
        assert.equal(
          run.stderr.trim().split("\n").at(-1),
          `prepare: --out ${disk}: writing train.bin failed: No space left on device ` +
            "(os error 28); free space on that disk or choose another --out, and the outputs " +
            "there were left as they were (--help for usage)",
        );
        const after = ["train.bin", "val.bin", "meta.json"].map((f) =>
          Deno.readFileSync(join(disk, f))
        );
        assert.deepEqual(after, before, "the earlier outputs are as they were");
        const names = [...Deno.readDirSync(disk)].map((e) => e.name).sort();
        assert.deepEqual(names, ["meta.json", "train.bin", "val.bin"], "no partial file left");
      } finally {
        await new Deno.Command("umount", { args: [disk] }).output();
      }
    });
  },
});
