/**
 * A deadline for one await in a test: the store and handshake tests wrap each wait in it, so that
 * a wait the code under test never ends fails naming what it waited for instead of hanging.
 * @module
 */

/** `work`, or a failure naming `what` once `ms` have passed. */
export async function within<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: nothing after ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}
