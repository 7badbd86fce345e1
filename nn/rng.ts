// The project's seeded PRNG: sfc32 seeded through splitmix32, Box-Muller normals. Its whole state
// (four words and a cached normal) can be saved and restored to continue the exact same stream.
// sim/ and wmrl/ use this one class.

/** Saved state: the four sfc32 words, then the cached normal (NaN when none). */
export type RngState = number[];

export class Rng {
  private s = new Uint32Array(4);
  private spare = NaN;

  constructor(seed: number) {
    this.seed(seed);
  }

  static fromState(state: readonly number[]): Rng {
    const r = new Rng(0);
    r.setState(state);
    return r;
  }

  seed(seed: number): void {
    // splitmix32 spreads a small integer seed over the 128-bit state.
    let x = seed >>> 0;
    for (let i = 0; i < 4; i++) {
      x = (x + 0x9e3779b9) >>> 0;
      let z = x;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
      this.s[i] = (z ^ (z >>> 16)) >>> 0;
    }
    this.spare = NaN;
    // sfc32 mixes poorly right after seeding.
    for (let i = 0; i < 12; i++) this.nextU32();
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

  /** Integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  /** Integer in [lo, hi], both included. */
  intIn(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }

  /** Standard normal (Box-Muller; the second value of each pair is kept for the next call). */
  normal(): number {
    if (!Number.isNaN(this.spare)) {
      const v = this.spare;
      this.spare = NaN;
      return v;
    }
    const u = 1 - this.next();
    const v = this.next();
    const r = Math.sqrt(-2 * Math.log(u));
    this.spare = r * Math.sin(2 * Math.PI * v);
    return r * Math.cos(2 * Math.PI * v);
  }

  /** Fisher-Yates shuffle in place (an array or a typed array); returns it. */
  shuffle<A extends { length: number; [i: number]: unknown }>(xs: A): A {
    for (let i = xs.length - 1; i > 0; i--) {
      const j = this.int(i + 1);
      const t = xs[i]!;
      xs[i] = xs[j]!;
      xs[j] = t;
    }
    return xs;
  }

  getState(): RngState {
    return [...this.s, this.spare];
  }

  setState(st: readonly number[]): void {
    for (let i = 0; i < 4; i++) this.s[i] = st[i]! >>> 0;
    this.spare = st[4] ?? NaN;
  }
}
