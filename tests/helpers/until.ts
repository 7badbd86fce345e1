/** Resolves after `ms`. */
export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

type Polled<T> = T | undefined | false;

/**
 * Polls `f` every `every` ms until it returns something other than `undefined` or `false`, and returns that;
 * after `ms` it throws an error naming `what`, followed by `detail()` where given (a child process's output, say).
 */
export async function until<T>(
  f: () => Polled<T> | Promise<Polled<T>>,
  what: string,
  ms = 5000,
  { every = 20, detail }: { every?: number; detail?: () => string } = {},
): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms${detail ? `\n${detail()}` : ''}`);
    await sleep(every);
  }
}
