// Hooks on the file calls a sharded save makes that SIGKILL the process at one point of its
// commit protocol, for the crash tests: installed on the calling thread's globals (a synchronous
// save) or, through _writer_crash_hooks.ts, on a background writer's.
// - "shard-write": half-way through writing its safetensors file (still the temporary one);
// - "pieces": its piece list renamed into place, before it writes its safetensors file;
// - "index-rename": (rank 0) the new index written and synced, just before its rename;
// - "cleanup": (rank 0) the new index renamed into place, before generation 1 is removed.
// It prints "crash: POINT" first; the test then kills the other ranks, as a launcher would. One
// point fails instead of crashing:
// - "shard-write-fails": writing its safetensors file throws, as a full disk would.

/** Prints the crash line and SIGKILLs this process (all its threads). */
function crash(point: string): never {
  console.log(`crash: ${point}`);
  Deno.kill(Deno.pid, "SIGKILL");
  throw new Error("unreachable: SIGKILL did not end the process");
}

/** Arms the hook for `point` on this thread's `Deno` functions. */
export function arm(point: string): void {
  const { openSync, renameSync, removeSync } = Deno;
  const writeSync = Deno.FsFile.prototype.writeSync;
  if (point === "shard-write" || point === "shard-write-fails") {
    const shardFiles = new WeakSet<Deno.FsFile>();
    Object.assign(Deno, {
      openSync(path: string | URL, options?: Deno.OpenOptions) {
        const file = openSync(path, options);
        if (/\/\.rank-\d+\.safetensors\.[^/]+\.tmp$/.test(String(path))) shardFiles.add(file);
        return file;
      },
    });
    Deno.FsFile.prototype.writeSync = function (bytes) {
      if (!shardFiles.has(this)) return writeSync.call(this, bytes);
      writeSync.call(this, bytes.subarray(0, Math.max(1, bytes.length >> 1)));
      if (point === "shard-write-fails") throw new Error("No space left on device (injected)");
      crash(point);
    };
  } else if (point === "pieces" || point === "index-rename") {
    const target = point === "pieces" ? /\/rank-\d+\.json$/ : /\/index\.json$/;
    Object.assign(Deno, {
      renameSync(from: string | URL, to: string | URL) {
        if (!target.test(String(to))) return renameSync(from, to);
        if (point === "pieces") renameSync(from, to);
        crash(point);
      },
    });
  } else if (point === "cleanup") {
    Object.assign(Deno, {
      removeSync(path: string | URL, options?: Deno.RemoveOptions) {
        if (String(path).endsWith("/gen-1")) crash(point); // the previous generation
        return removeSync(path, options);
      },
    });
  } else {
    throw new Error(`unknown CRASH_POINT "${point}"`);
  }
}
