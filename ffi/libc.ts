/**
 * The few libc calls dtrain needs for process hygiene (Linux): a parent-death signal for launched
 * processes, the file-descriptor limit of the store host, and the launcher's hold on SIGUSR1 (a
 * blocked signal taken with sigtimedwait, and the re-exec that blocks it in every thread), and the
 * lowest priority for a checkpoint's background writer thread. Opened
 * lazily, since only launched workers, launchers and store hosts use it.
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
  gettid: { parameters: [], result: "i32" }, // pid_t gettid(void) (glibc 2.30+)
  setpriority: {
    parameters: [
      "i32", // int which (PRIO_PROCESS: with a thread id, that thread alone on Linux)
      "u32", // id_t who
      "i32", // int prio (nice value, -20..19)
    ],
    result: "i32",
  },
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
  pthread_sigmask: {
    parameters: [
      "i32", // int how
      "buffer", // const sigset_t *set (NULL: only read the mask)
      "buffer", // sigset_t *oldset (NULL: not wanted)
    ],
    result: "i32",
  },
  sigtimedwait: {
    parameters: [
      "buffer", // const sigset_t *set
      "buffer", // siginfo_t *info
      "buffer", // const struct timespec *timeout (two i64: seconds, nanoseconds)
    ],
    result: "i32",
  },
  signal: {
    parameters: [
      "i32", // int signum
      "pointer", // sighandler_t handler (SIG_IGN is 1)
    ],
    result: "pointer", // sighandler_t: the previous handler
  },
  execv: {
    parameters: [
      "buffer", // const char *path
      "buffer", // char *const argv[] (NULL-terminated array of pointers)
    ],
    result: "i32",
  },
} as const satisfies Deno.ForeignLibraryInterface;

/** prctl option that asks for a signal when the parent thread dies (linux/prctl.h). */
export const PR_SET_PDEATHSIG = 1;
/** setpriority's `which` for a process, or on Linux a thread given by its id. */
export const PRIO_PROCESS = 0;
/** getrlimit/setrlimit resource of open file descriptors (x86-64 and aarch64 Linux). */
export const RLIMIT_NOFILE = 7;

/** pthread_sigmask's `how` that adds the set to the mask (Linux, every architecture dtrain runs on). */
export const SIG_BLOCK = 0;
/** The signal number of SIGUSR1 (x86-64 and aarch64 Linux). */
export const SIGUSR1 = 10;
/** Bytes of glibc's sigset_t (1024 bits) and of a siginfo_t. */
export const SIGSET_BYTES = 128;

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
