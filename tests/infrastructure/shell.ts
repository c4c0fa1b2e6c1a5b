// Reading the launcher's command line out of a start-up script, and running such a script with
// a stand-in `deno` that records what it was called with. The start-up scripts mark their launch
// section with `# ---- launch` and `# ---- end launch ----` so that it can be found.

/**
 * Splits shell text into words: quotes are removed, a backslash outside quotes keeps the next
 * character (`'it'\''s'` is one word), `$VAR` is kept as written.
 */
export function shellWords(text: string): string[] {
  const words: string[] = [];
  let word: string | null = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "\\" && text[i + 1] === "\n") {
      i++;
    } else if (c === "\\" && i + 1 < text.length) {
      word = (word ?? "") + text[++i];
    } else if (/\s/.test(c)) {
      if (word !== null) words.push(word);
      word = null;
    } else if (c === "'" || c === '"') {
      const end = text.indexOf(c, i + 1);
      if (end < 0) throw new Error(`unclosed ${c} in ${JSON.stringify(text)}`);
      const quoted = text.slice(i + 1, end);
      if (c === '"' && /[\\`]/.test(quoted)) {
        throw new Error(`escapes in "${quoted}" are not handled`);
      }
      word = (word ?? "") + quoted;
      i = end;
    } else {
      word = (word ?? "") + c;
    }
  }
  if (word !== null) words.push(word);
  return words;
}

/** The arguments after `task train` in a script's launch section. */
export function launchArguments(script: string): string[] {
  const section = /^# ---- launch\b[^\n]*\n(?:#[^\n]*\n)*([\s\S]*?)^# ---- end launch ----$/m.exec(
    script,
  );
  if (section === null) {
    throw new Error("no launch section (# ---- launch ... # ---- end launch ----)");
  }
  const command = /^\s*exec "\$deno" task train((?:[^\n]*\\\n)*[^\n]*)$/m.exec(section[1]);
  if (command === null) throw new Error(`no 'exec "$deno" task train' in:\n${section[1]}`);
  return shellWords(command[1]);
}

/** `--flag value` pairs as a map; a flag given twice or without a value throws. */
export function flagMap(args: string[]): Map<string, string> {
  const flags = new Map<string, string>();
  for (let i = 0; i < args.length; i += 2) {
    const [flag, value] = [args[i], args[i + 1]];
    if (!flag.startsWith("--") || value === undefined || value.startsWith("--")) {
      throw new Error(`expected --flag value at ${JSON.stringify(args.slice(i))}`);
    }
    if (flags.has(flag.slice(2))) throw new Error(`${flag} given twice`);
    flags.set(flag.slice(2), value);
  }
  return flags;
}

/** What a run of a script did. */
export interface ScriptRun {
  code: number;
  stdout: string;
  stderr: string;
  /** The stand-in deno's calls, one per process that ran it: its arguments and working dir. */
  denoCalls: { args: string[]; cwd: string; tokenSet: boolean }[];
}

/**
 * Makes `dir` look like a built dtrain checkout whose deno only records its calls, under
 * `.tools/node_modules/.bin/deno` where `make build` puts the real one.
 */
export function fakeCheckout(dir: string): void {
  Deno.mkdirSync(`${dir}/.tools/node_modules/.bin`, { recursive: true });
  const stub = `${dir}/.tools/node_modules/.bin/deno`;
  Deno.writeTextFileSync(
    stub,
    [
      "#!/usr/bin/env bash",
      "# Stand-in for deno: records one call as a file of lines (cwd, token set?, arguments).",
      'out=$(mktemp "$DENO_CALLS_DIR/call.XXXXXX")',
      '{ echo "$PWD"; if [[ -n "${DTRAIN_TOKEN:-}" ]]; then echo yes; else echo no; fi;',
      '  printf "%s\\n" "$@"; } >"$out"',
      "",
    ].join("\n"),
  );
  Deno.chmodSync(stub, 0o755);
}

/**
 * Runs a bash script with the given environment, in `cwd` when given; `calls` is where
 * fakeCheckout's deno reports.
 */
export async function runScript(
  script: string,
  args: string[],
  env: Record<string, string>,
  calls: string,
  cwd?: string,
): Promise<ScriptRun> {
  Deno.mkdirSync(calls, { recursive: true });
  const output = await new Deno.Command("bash", {
    args: [script, ...args],
    env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", DENO_CALLS_DIR: calls, ...env },
    clearEnv: true,
    cwd,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const denoCalls = [...Deno.readDirSync(calls)].map((entry) => entry.name).sort().map((name) => {
    const [cwd, token, ...rest] = Deno.readTextFileSync(`${calls}/${name}`).split("\n");
    return { cwd, tokenSet: token === "yes", args: rest.slice(0, -1) };
  });
  const decoder = new TextDecoder();
  return {
    code: output.code,
    stdout: decoder.decode(output.stdout),
    stderr: decoder.decode(output.stderr),
    denoCalls,
  };
}

/** Whether a command can be run here (e.g. shellcheck, which CI machines may lack). */
export function hasCommand(name: string): boolean {
  try {
    return new Deno.Command("bash", { args: ["-c", `command -v ${name}`], stdout: "null" })
      .outputSync().success;
  } catch {
    return false;
  }
}

/** `bash -n`: the script parses. Returns bash's complaint, or "" when it parses. */
export async function bashSyntaxErrors(script: string): Promise<string> {
  const output = await new Deno.Command("bash", { args: ["-n", "-c", script], stderr: "piped" })
    .output();
  return output.success ? "" : new TextDecoder().decode(output.stderr);
}

/**
 * Runs a SLURM batch script as a 2-node allocation, in a fresh directory holding a fake checkout
 * (with the CUDA library that the default `--device cuda` asks for) as the submit directory and
 * the shared folder: stand-in `scontrol` names two hosts, stand-in `srun` runs its command once
 * per node, as SLURM would on each, with that node's SLURM_NODEID.
 */
export async function runSbatch(
  script: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<ScriptRun & { dir: string }> {
  const dir = Deno.makeTempDirSync({ prefix: "dtrain-slurm-" });
  fakeCheckout(`${dir}/checkout`);
  Deno.mkdirSync(`${dir}/checkout/build`);
  Deno.writeTextFileSync(`${dir}/checkout/build/libdtrain_cuda.so`, "");
  Deno.mkdirSync(`${dir}/bin`);
  const stubs: Record<string, string> = {
    scontrol: '[[ "$1 $2" == "show hostnames" ]] || exit 2\necho gpu-node-01\necho gpu-node-02',
    srun: 'while [[ "$1" == -* ]]; do shift; done\n' +
      'for ((i = 0; i < SLURM_NNODES; i++)); do SLURM_NODEID=$i "$@" || exit; done',
  };
  for (const [name, body] of Object.entries(stubs)) {
    Deno.writeTextFileSync(`${dir}/bin/${name}`, `#!/usr/bin/env bash\n${body}\n`);
    Deno.chmodSync(`${dir}/bin/${name}`, 0o755);
  }
  const run = await runScript(script, args, {
    PATH: `${dir}/bin:${Deno.env.get("PATH")}`,
    SLURM_JOB_NODELIST: "gpu-node-[01-02]",
    SLURM_NNODES: "2",
    SLURM_SUBMIT_DIR: `${dir}/checkout`,
    SHARED_DIR: `${dir}/shared`,
    ...env,
  }, `${dir}/calls`);
  return { ...run, dir };
}
