/**
 * Serves the package as JSR would: exactly the files `deno publish --dry-run` lists, over HTTP on
 * 127.0.0.1, with JSR's media types and its one rewrite at publish time (bare specifiers mapped in
 * deno.json's "imports", such as "zod", become the full `npm:` specifiers they map to).
 * @module
 */

import { ROOT } from "../_harness/processes.ts";

/** The files `deno publish --dry-run` would upload, relative to the repository root. */
export async function publishedFiles(): Promise<string[]> {
  const out = await new Deno.Command(Deno.execPath(), {
    // The file list does not depend on type checking, which `deno check` does elsewhere.
    args: ["publish", "--dry-run", "--allow-dirty", "--no-check"],
    cwd: ROOT,
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  if (!out.success) throw new Error(`deno publish --dry-run failed:\n${text}`);
  const root = new URL(`file://${ROOT}`).href;
  return [...text.matchAll(/^\s+(file:\/\/\S+) \(/gm)].map((m) => m[1].slice(root.length));
}

const MEDIA_TYPES: Record<string, string> = {
  ts: "application/typescript",
  js: "application/javascript",
  json: "application/json",
  md: "text/markdown",
};

/** Rewrites `from "zod"`-style specifiers through the import map, as JSR does on publish. */
function rewriteImports(source: string, imports: Record<string, string>): string {
  return source.replace(
    /((?:from|import)\s*\(?\s*)"([^"./][^"]*)"/g,
    (whole, head: string, specifier: string) =>
      imports[specifier] ? `${head}"${imports[specifier]}"` : whole,
  );
}

/** A running server of the package; `url` ends with a slash. */
export interface PackageServer extends AsyncDisposable {
  url: string;
  files: string[];
}

/** Starts serving the published files on a free port of 127.0.0.1. */
export async function servePackage(): Promise<PackageServer> {
  const files = await publishedFiles();
  const imports = JSON.parse(await Deno.readTextFile(`${ROOT}deno.json`)).imports ?? {};
  const served = new Set(files);
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const path = decodeURIComponent(new URL(req.url).pathname.slice(1));
    if (!served.has(path)) return new Response("not published", { status: 404 });
    const ext = path.slice(path.lastIndexOf(".") + 1);
    const bytes = await Deno.readFile(`${ROOT}${path}`);
    const body = ext === "ts" ? rewriteImports(new TextDecoder().decode(bytes), imports) : bytes;
    return new Response(body, {
      headers: { "content-type": MEDIA_TYPES[ext] ?? "text/plain; charset=utf-8" },
    });
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}/`,
    files,
    [Symbol.asyncDispose]: () => server.shutdown(),
  };
}
