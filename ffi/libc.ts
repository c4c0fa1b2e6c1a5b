/**
 * The few libc calls dtrain needs for process hygiene (Linux): a parent-death signal for launched
 * processes and the file-descriptor limit of the store host. Opened lazily, since only launched
 * workers, launchers and store hosts use it.
 * @module
 */

const symbols = {
  prctl: {
    parameters: [
      "i32", // int option
      "u64", // unsigned long arg2
      "u64", // unsigned long arg3
      "u64", // unsigned long arg4
      "u64", // unsigned long arg5
    ],
    result: "i32",
  },
  getppid: { parameters: [], result: "i32" }, // pid_t getppid(void)
  getrlimit: {
    parameters: [
      "i32", // int resource
      "buffer", // struct rlimit *rlim (two u64: soft, hard)
    ],
    result: "i32",
  },
  setrlimit: {
    parameters: [
      "i32", // int resource
      "buffer", // const struct rlimit *rlim
    ],
    result: "i32",
  },
} as const satisfies Deno.ForeignLibraryInterface;

/** prctl option that asks for a signal when the parent thread dies (linux/prctl.h). */
export const PR_SET_PDEATHSIG = 1;
/** getrlimit/setrlimit resource of open file descriptors (x86-64 and aarch64 Linux). */
export const RLIMIT_NOFILE = 7;

let lib: Deno.DynamicLibrary<typeof symbols> | null = null;

/**
 * The libc symbol table, or null where it cannot be opened (not Linux, or no FFI permission):
 * callers then fall back to what works without it.
 */
export function libc(): Deno.DynamicLibrary<typeof symbols>["symbols"] | null {
  if (lib === null) {
    if (Deno.build.os !== "linux") return null;
    try {
      lib = Deno.dlopen("libc.so.6", symbols);
    } catch {
      return null;
    }
  }
  return lib.symbols;
}
