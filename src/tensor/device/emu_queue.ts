/**
 * The work queue of one emulated accelerator (emu.ts): kernels and copies run later than they are
 * issued, in issue order, as on a GPU stream.
 *
 * [Note: emulated stream]
 * A GPU runs a kernel after the call that launched it has returned, and reports what went wrong
 * on the device at the next copy to the host or synchronisation. The emulator keeps that contract
 * on the JavaScript thread: a launch records the call (with its host-memory arguments copied, as
 * a launch copies its parameters) and returns OK; the queue runs when something must see its
 * results (a copy to the host, `emu.synchronize`, a collective, which orders itself after the
 * compute queued so far), when {@linkcode MAX_QUEUED} calls wait, or at the end of the current
 * task (a microtask). So code that reads device memory without a copy sees stale bytes, and code
 * that expects an error at the launch sees it later, as it would on a GPU. The first error a
 * queued call hits is kept and thrown by the next read (then cleared); the calls queued after it
 * still run, as kernels after a failed one do.
 * @module
 */

/** Calls that may wait before a launch runs the queue itself (a GPU's queue is bounded too). */
export const MAX_QUEUED = 1024;

/** One emulated device's queue of work. */
export class EmuQueue {
  #work: (() => void)[] = [];
  #error: Error | null = null;
  #scheduled = false;
  #running = false;
  /** Prefix of the errors it reports (`emu:0`). */
  readonly device: string;

  /** @param device The device's name, for errors. */
  constructor(device: string) {
    this.device = device;
  }

  /** How many calls wait. */
  get pending(): number {
    return this.#work.length;
  }

  /**
   * Queues `call`; it throws what went wrong (kept for the next read).
   *
   * @param call The work, run later on this thread.
   */
  enqueue(call: () => void): void {
    this.#work.push(call);
    if (this.#work.length >= MAX_QUEUED) this.run();
    else if (!this.#scheduled) {
      this.#scheduled = true;
      queueMicrotask(() => {
        this.#scheduled = false;
        this.run();
      });
    }
  }

  /** Runs every queued call, in order, keeping the first error. */
  run(): void {
    // A call never enqueues (they are kernels and copies), but a copy to the host inside one
    // would: it then finds the queue running and leaves the rest to this loop.
    if (this.#running) return;
    this.#running = true;
    try {
      for (let i = 0; i < this.#work.length; i++) {
        try {
          this.#work[i]();
        } catch (err) {
          this.#error ??= err as Error;
        }
      }
      this.#work = [];
    } finally {
      this.#running = false;
    }
  }

  /**
   * Runs the queue, then throws the first error a call hit since the last report, once.
   *
   * @throws The error, its message prefixed with the device and where it was found.
   */
  synchronize(): void {
    this.run();
    const error = this.#error;
    if (error === null) return;
    this.#error = null;
    error.message = `${this.device}: ${error.message} (found on the device, reported at the ` +
      "next read: kernels run asynchronously)";
    throw error;
  }
}
