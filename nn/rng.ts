// A small seeded PRNG (sfc32) for parameter initialization and tests; its state can be saved.

export class Rng {
  private s: Uint32Array;

  constructor(seed: number | readonly number[]) {
    const init = typeof seed === 'number' ? [0x9e3779b9, 0x243f6a88, 0xb7e15162, seed >>> 0] : seed;
    this.s = Uint32Array.from(init);
    if (typeof seed === 'number') for (let i = 0; i < 15; i++) this.nextU32();
  }

  nextU32(): number {
    const s = this.s;
    const t = (((s[0]! + s[1]!) >>> 0) + s[3]!) >>> 0;
    s[3] = (s[3]! + 1) >>> 0;
    s[0] = s[1]! ^ (s[1]! >>> 9);
    s[1] = (s[2]! + (s[2]! << 3)) >>> 0;
    s[2] = ((s[2]! << 21) | (s[2]! >>> 11)) >>> 0;
    s[2] = (s[2]! + t) >>> 0;
    return t;
  }

  /** Uniform in [0, 1). */
  next(): number {
    return this.nextU32() / 4294967296;
  }

  uniform(lo: number, hi: number): number {
    return lo + (hi - lo) * this.next();
  }

  /** Standard normal (Box–Muller). */
  normal(): number {
    const u = 1 - this.next();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * this.next());
  }

  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  state(): number[] {
    return [...this.s];
  }
}
