/** Polls `f` every 50 ms until it returns a value; throws after `ms`. */
export async function until<T>(f: () => T | undefined, ms: number): Promise<T> {
  const t0 = Date.now();
  for (;;) {
    const v = f();
    if (v !== undefined) return v;
    if (Date.now() - t0 > ms) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 50));
  }
}
