// `train --config FILE` on hostile files: keys that name Object.prototype's members (`__proto__`,
// `constructor`, `toString`) are unknown keys, not "ignored (function ...)"; numbers beyond a
// float64 (`1e400`) are named out of range, not "got float null"; every bad value and line is
// echoed escaped and cut short, so no control byte from the file reaches the terminal.
import assert from "node:assert/strict";
import { join } from "node:path";
import { withTempDir as withTempDirAsync } from "../_harness/processes.ts";
import { withTempDir } from "../checkpoint/_temp_dir.ts";
import { parseTrainArgs } from "../../src/train/config.ts";
import { train } from "./_train.ts";

/** C0 and C1 controls and DEL: what must never be printed raw. */
// deno-lint-ignore no-control-regex -- the control characters are what it finds
const RAW_CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;

/** The message parseTrainArgs refuses `text` (written to `dir/name`) with. */
function refusal(dir: string, name: string, text: string): string {
  const path = join(dir, name);
  Deno.writeTextFileSync(path, text);
  try {
    parseTrainArgs(["--config", path]);
  } catch (error) {
    const message = (error as Error).message;
    assert.doesNotMatch(message, RAW_CONTROL, `${name}: a control byte printed raw`);
    return message.replaceAll(path, "FILE");
  }
  throw new Error(`${name}: ${JSON.stringify(text)} was accepted`);
}

Deno.test(
  "a nanoGPT config's keys are its own: __proto__, constructor and toString are unknown keys",
  withTempDir((dir) => {
    for (const key of ["__proto__", "constructor", "toString", "hasOwnProperty"]) {
      assert.match(
        refusal(dir, "c.py", `${key} = 1\n`),
        new RegExp(`^config: FILE:1: unknown nanoGPT config key "${key}" \\(known: out_dir, `),
      );
    }
    // The keys nanoGPT's files do set still read.
    const path = join(dir, "ok.py");
    Deno.writeTextFileSync(path, "compile = False\nn_layer = 2\n");
    const notes: string[] = [];
    const config = parseTrainArgs(["--config", path, "--model", "gpt"], notes);
    assert.ok(config !== "help" && config.nLayer === 2);
    assert.deepEqual(notes, [`${path}:1: compile ignored (dtrain has no torch.compile)`]);
  }),
);

Deno.test(
  "numbers beyond a float64 or a safe int are named out of range, in .py and JSON configs",
  withTempDir((dir) => {
    const cases: [string, string, RegExp][] = [
      [
        "c.py",
        "n_layer = 1e400\n",
        /^config: FILE:1: "1e400" is out of range .*: n_layer = 1e400$/,
      ],
      ["c.py", "learning_rate = -1e400\n", /^config: FILE:1: "-1e400" is out of range/],
      [
        "c.py",
        `max_iters = 1${"0".repeat(400)}\n`,
        /^config: FILE:1: "10+\.\.\. \(\d+ more characters\) is out of range/,
      ],
      ["c.py", "n_layer = 9007199254740993\n", /"9007199254740993" is out of range/],
      ["c.json", '{"lr": 1e400}', /^lr in FILE: 1e400 is out of range \(numbers up to 1\.8e308\)$/],
      ["c.json", '{"hidden": [16, -1e999]}', /^hidden\.1 in FILE: -1e999 is out of range/],
      ["c.json", "1e400", /^config: FILE: 1e400 is out of range/],
    ];
    for (const [name, text, message] of cases) assert.match(refusal(dir, name, text), message);
  }),
);

Deno.test(
  "bad values, lines and keys from a config file are echoed escaped, never raw",
  withTempDir((dir) => {
    const cases: [string, string, RegExp][] = [
      [
        "c.py",
        "\u001b[2J\u0007 = 1\n",
        /^config: FILE:1: expected `key = literal` .*: \\u001b\[2J\\u0007 = 1$/,
      ],
      ["c.py", "out_dir = 5\u009b31m\n", /"5\\u009b31m" is not a literal/],
      ["c.py", "dtype = '\u001b]0;pwned\u0007'\n", /dtype "\\u001b\]0;pwned\\u0007" is not supp/],
      ["c.py", "out_dir = 'a\\\u001b'\n", /the escape \\\\u001b is not read/],
      ["c.py", "out_dir = 'a' \u202e+ 'b'\n", /unexpected "\\u202e\+ 'b'" after the value/],
      [
        "c.json",
        '{"model": "\\u001b[31mgpt"}',
        /^model in FILE: Invalid option: .* \(got "\\u001b\[31mgpt"\)$/,
      ],
      ["c.json", '{"epochs": "\\u0007"}', /^epochs in FILE: Invalid input: .* \(got "\\u0007"\)$/],
      ["c.json", '{"a\\u001b": 1}', /^config: Unrecognized key: "a\\u001b"$/],
      ["c.json", "\u001b[31m", /^config: FILE is not valid JSON: Unexpected token '\\u001b'/],
      [
        "c.json",
        `{"model": "${"\\u0000".repeat(300)}"}`,
        /\.\.\. \(\d+ more characters\)/,
      ],
    ];
    for (const [name, text, message] of cases) assert.match(refusal(dir, name, text), message);
  }),
);

Deno.test("train --config with binary garbage exits 2 with one escaped line on the terminal", async () => {
  await withTempDirAsync("dtrain_config_garbage_", async (dir) => {
    const path = join(dir, "garbage.py");
    const garbage = new Uint8Array(256).map((_, i) => i);
    Deno.writeFileSync(path, new Uint8Array([...new TextEncoder().encode("x = "), ...garbage]));
    const run = await train(["--config", path]);
    assert.equal(run.code, 2, run.stderr);
    assert.doesNotMatch(run.stderr, RAW_CONTROL);
    assert.match(run.stderr, /^train: config: .*garbage\.py:1: .*\\u0000\\u0001\\u0002/);
  });
});

Deno.test(
  "a --config path that is a directory or a FIFO is named, never read",
  withTempDir((dir) => {
    const fifo = join(dir, "c.py");
    assert.ok(new Deno.Command("mkfifo", { args: [fifo] }).outputSync().success);
    assert.throws(
      () => parseTrainArgs(["--config", fifo]),
      /: config: cannot read .*c\.py: it is a FIFO, expected a JSON or nanoGPT \.py file$/,
    );
    assert.throws(
      () => parseTrainArgs(["--config", dir]),
      /: config: cannot read .*: it is a directory, expected a JSON or nanoGPT \.py file$/,
    );
  }),
);
