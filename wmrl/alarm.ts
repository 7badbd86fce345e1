// The reward-hacking alarm: a policy that learns to fool the world model shows as a world model predicting more
// success on the anchor prompts than the robot measures on the very same prompts.

/** Predicted against measured success over the latest `window` updates; a gap beyond `gap` over a full window raises it. */
export class HackingAlarm {
  private readonly p: number[];
  private readonly m: number[];

  /** `saved`: the per-update means a resumed run saved, oldest first. */
  constructor(readonly window: number, readonly gap: number, saved: { predicted?: readonly number[]; measured?: readonly number[] } = {}) {
    this.p = [...(saved.predicted ?? [])];
    this.m = [...(saved.measured ?? [])];
  }

  /** The latest updates' mean predicted success on the anchor prompts, oldest first. */
  get predicted(): number[] {
    return [...this.p];
  }

  /** The latest updates' measured success of the anchor episodes, oldest first. */
  get measured(): number[] {
    return [...this.m];
  }

  /** Whether the alarm is up: the latest full window's mean gap passes the threshold (until an update clears it). */
  get raised(): boolean {
    const p = this.p.reduce((a, x) => a + x, 0), m = this.m.reduce((a, x) => a + x, 0);
    return this.p.length === this.window && Math.abs((p - m) / this.p.length) > this.gap;
  }

  /** Adds one update's mean predicted and measured success; returns the warning when the alarm goes off, else null. */
  observe(predicted: number, measured: number, update: number): string | null {
    this.p.push(predicted);
    this.m.push(measured);
    if (this.p.length > this.window) { this.p.shift(); this.m.shift(); }
    if (!this.raised) return null;
    const p = this.p.reduce((a, x) => a + x, 0), m = this.m.reduce((a, x) => a + x, 0);
    return `wmrl: reward-hacking alarm at update ${update}: the world model predicts ${(100 * p / this.p.length).toFixed(0)}% success on the anchor prompts, the robot measured ${(100 * m / this.m.length).toFixed(0)}% over the last ${this.window} updates`;
  }
}
