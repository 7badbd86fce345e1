// The safety layer: wraps every robot, independent of any policy. Nothing a policy (or a bug, or a
// network glitch) produces reaches the transport unless it is finite, the right length, inside the
// action range and the joint limits, and within the per-step change cap. A watchdog holds the robot
// when commands stop; the e-stop latches until an explicit clear; episodes have a time cap.
import type { RobotObservation, RobotDeclaration } from '../common/robot.js';
import type { ResetOptions, Robot } from './types.js';

export interface SafetyConfig {
  /** Largest change of any action component between consecutive commands. */
  maxDelta: number;
  /** When no fresh command arrives within this, the watchdog intervenes. */
  watchdogMs: number;
  /** hold: keep sending the hold action; stop: send it once and latch the e-stop. */
  watchdogAction: 'hold' | 'stop';
  /** A command whose stamp is older than this is refused as stale. */
  maxCommandAgeMs: number;
  /** Longest episode, from reset(); later commands are refused until the next reset. */
  maxEpisodeSeconds: number;
}

export const DEFAULT_SAFETY: SafetyConfig = { maxDelta: 0.5, watchdogMs: 100, watchdogAction: 'hold', maxCommandAgeMs: 200, maxEpisodeSeconds: 120 };

/**
 * What "do nothing" means for a robot: for position commands, stay where the joints are (`position`, else the
 * `fallback` command, else 0), never at a target beyond a joint's limits; otherwise zero velocity or effort.
 * Always within the action range.
 */
export function holdCommand(s: RobotDeclaration, position?: ArrayLike<number>, fallback?: ArrayLike<number>): Float32Array {
  const n = s.action.low.length, hold = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    let v = 0;
    if (s.action.kind === 'joint_position') {
      const [lo, hi] = s.positionLimits[i] ?? [-Infinity, Infinity];
      v = clampTo(position?.[i] ?? fallback?.[i] ?? 0, lo, hi);
    }
    hold[i] = clampTo(v, s.action.low[i]!, s.action.high[i]!);
  }
  return hold;
}

export type Intervention =
  | 'rejected_nonfinite' | 'rejected_length' | 'rejected_stale'
  | 'clamped_range' | 'clamped_velocity' | 'clamped_position' | 'clamped_delta'
  | 'watchdog' | 'estop' | 'refused_estopped' | 'episode_timeout' | 'refused_timeout';

export interface InterventionEvent {
  kind: Intervention;
  detail: string;
  /** Clock time, ms. */
  t: number;
}

/** Thrown by act() while the robot must not move: e-stop latched or episode over. */
export class SafetyStop extends Error {
  constructor(readonly reason: 'estop' | 'episode_timeout', message: string) {
    super(message);
    this.name = 'SafetyStop';
  }
}

export interface ActOptions {
  /** Clock time (ms) of the observation the action was computed from. */
  stamp?: number;
}

export class SafetyLayer implements Robot {
  readonly counts: Record<Intervention, number> = {
    rejected_nonfinite: 0, rejected_length: 0, rejected_stale: 0, clamped_range: 0, clamped_velocity: 0,
    clamped_position: 0, clamped_delta: 0, watchdog: 0, estop: 0, refused_estopped: 0, episode_timeout: 0, refused_timeout: 0,
  };
  private last: Float32Array;
  private lastObs?: RobotObservation;
  private lastCommandAt: number;
  private episodeStart: number;
  private estopped = false;
  private timedOut = false;
  private watchdogFired = false;
  /** A reset in progress: the robot moves under the reset's own control (a home trajectory takes seconds). */
  private resetting = false;
  /** When the watchdog last sent the hold action (layer clock, ms). */
  private lastHoldAt = -Infinity;
  private timer?: NodeJS.Timeout;
  private readonly n: number;
  private readonly dtMs: number;

  constructor(
    readonly inner: Robot,
    readonly config: SafetyConfig = DEFAULT_SAFETY,
    private readonly opts: { now?: () => number; log?: (e: InterventionEvent) => void; watchdog?: boolean } = {},
  ) {
    const s = inner.spec;
    this.n = s.action.names.length;
    if (s.action.low.length !== this.n || s.action.high.length !== this.n) throw new Error(`safety: ${s.name}: action spec bounds do not match its ${this.n} names`);
    this.dtMs = 1000 / s.controlHz;
    this.last = this.holdAction();
    this.lastCommandAt = this.now();
    this.episodeStart = this.now();
    if (opts.watchdog !== false) {
      // Checked every quarter period so an intervention lands within timeout + one control period
      // even when timers run late.
      this.timer = setInterval(() => void this.checkWatchdog(), Math.max(1, this.dtMs / 4));
      this.timer.unref();
    }
  }

  get spec(): RobotDeclaration {
    return this.inner.spec;
  }

  get isEstopped(): boolean {
    return this.estopped;
  }

  /** The layer's clock, ms (its `now` option, else the host's): command stamps, the watchdog and the episode cap read it. */
  now(): number {
    return this.opts.now ? this.opts.now() : performance.now();
  }

  private note(kind: Intervention, detail: string): void {
    this.counts[kind]++;
    this.opts.log?.({ kind, detail, t: this.now() });
  }

  /** What "do nothing" means for this robot: zero velocity/effort, or stay at the current position. */
  holdAction(): Float32Array {
    return holdCommand(this.inner.spec, this.lastObs?.position, this.last ?? undefined);
  }

  /** Returns the safe version of `action` (and records why it differs), or null when it must be refused. */
  sanitize(action: ArrayLike<number>, opts: ActOptions = {}): Float32Array | null {
    const s = this.inner.spec;
    if (action.length !== this.n) {
      this.note('rejected_length', `expected ${this.n} values, got ${action.length}`);
      return null;
    }
    for (let i = 0; i < this.n; i++) {
      if (!Number.isFinite(action[i])) {
        this.note('rejected_nonfinite', `component ${i} (${s.action.names[i]}) is ${action[i]}`);
        return null;
      }
    }
    if (opts.stamp !== undefined && !(this.now() - opts.stamp <= this.config.maxCommandAgeMs)) {
      this.note('rejected_stale', `command computed ${(this.now() - opts.stamp).toFixed(1)} ms ago (limit ${this.config.maxCommandAgeMs} ms)`);
      return null;
    }
    const out = new Float32Array(this.n);
    let range = false, vel = false, pos = false, delta = false;
    for (let i = 0; i < this.n; i++) {
      const lo = s.action.low[i]!, hi = s.action.high[i]!;
      let v = action[i]!;
      const r = clampTo(v, lo, hi);
      if (r !== v) range = true;
      v = r;
      // The change cap smooths; the hard limits after it win, and they only ever move a command
      // towards holding still.
      const prev = this.last[i]!;
      if (Math.abs(v - prev) > this.config.maxDelta) {
        v = clampTo(v, prev - this.config.maxDelta, prev + this.config.maxDelta);
        delta = true;
      }
      const [plo, phi] = s.positionLimits[i] ?? [-Infinity, Infinity];
      const p = this.lastObs?.position[i];
      if (s.action.kind === 'joint_velocity') {
        const lim = s.velocityLimits[i] ?? Infinity;
        const c = clampTo(v, -lim, lim);
        if (c !== v) vel = true;
        v = c;
        // At a position limit, never command further out.
        if (p !== undefined && ((p >= phi && v > 0) || (p <= plo && v < 0))) {
          v = 0;
          pos = true;
        }
      } else if (s.action.kind === 'joint_position') {
        const step = (s.velocityLimits[i] ?? Infinity) * (this.dtMs / 1000);
        if (p !== undefined && Math.abs(v - p) > step) {
          v = clampTo(v, p - step, p + step);
          vel = true;
        }
        // Last, so a joint found outside its limits is pulled back inside them.
        const c = clampTo(v, plo, phi);
        if (c !== v) pos = true;
        v = c;
      }
      out[i] = Math.fround(clampTo(v, lo, hi));
      // float32 rounding can step just past a bound; keep the sent value inside.
      if (out[i]! > hi) out[i] = nextDown(hi);
      if (out[i]! < lo) out[i] = nextUp(lo);
    }
    if (range) this.note('clamped_range', 'action outside the action range');
    if (vel) this.note('clamped_velocity', 'velocity limit');
    if (pos) this.note('clamped_position', 'position limit');
    if (delta) this.note('clamped_delta', `change above ${this.config.maxDelta} per step`);
    return out;
  }

  async act(action: Float32Array, opts: ActOptions = {}): Promise<Float32Array> {
    this.checkEpisodeTime();
    if (this.estopped) {
      this.note('refused_estopped', 'e-stop is latched; clear it explicitly');
      throw new SafetyStop('estop', `${this.spec.name}: e-stop is latched; call clearEstop() before commanding again`);
    }
    if (this.timedOut) {
      this.note('refused_timeout', 'episode exceeded its time cap');
      throw new SafetyStop('episode_timeout', `${this.spec.name}: episode exceeded ${this.config.maxEpisodeSeconds} s; reset() to start another`);
    }
    const safe = this.sanitize(action, opts);
    // A refused command is not fresh: the watchdog keeps counting, and the robot holds.
    if (safe) {
      this.lastCommandAt = this.now();
      this.watchdogFired = false;
    }
    return this.send(safe ?? this.holdAction());
  }

  private async send(a: Float32Array): Promise<Float32Array> {
    this.last = a;
    const sent = await this.inner.act(a);
    return sent;
  }

  async observe(): Promise<RobotObservation> {
    const o = await this.inner.observe();
    this.lastObs = o;
    return o;
  }

  async reset(options?: ResetOptions): Promise<RobotObservation> {
    if (this.estopped) throw new SafetyStop('estop', `${this.spec.name}: e-stop is latched; reset() does not clear it — call clearEstop()`);
    // The watchdog's hold would pre-empt a home trajectory, and its stop would latch mid-reset.
    this.resetting = true;
    let o: RobotObservation;
    try {
      o = await this.inner.reset(options);
    } finally {
      this.resetting = false;
      this.lastCommandAt = this.now();
    }
    this.lastObs = o;
    this.last = this.holdAction();
    this.timedOut = false;
    this.watchdogFired = false;
    this.episodeStart = this.now();
    this.lastCommandAt = this.now();
    return o;
  }

  /** Latches the e-stop; only clearEstop() releases it. */
  async estop(reason = 'requested'): Promise<void> {
    this.estopped = true;
    this.note('estop', reason);
    await this.inner.estop();
  }

  clearEstop(): void {
    this.estopped = false;
    this.last = this.holdAction();
    this.lastCommandAt = this.now();
  }

  private checkEpisodeTime(): void {
    if (!this.timedOut && (this.now() - this.episodeStart) / 1000 > this.config.maxEpisodeSeconds) {
      this.timedOut = true;
      this.note('episode_timeout', `episode longer than ${this.config.maxEpisodeSeconds} s`);
      void this.inner.act(this.holdAction()).catch(() => undefined);
    }
  }

  private async checkWatchdog(): Promise<void> {
    if (this.estopped || this.timedOut || this.resetting) return;
    this.checkEpisodeTime();
    if (this.now() - this.lastCommandAt <= this.config.watchdogMs) return;
    if (!this.watchdogFired) this.note('watchdog', `no fresh command for ${(this.now() - this.lastCommandAt).toFixed(0)} ms`);
    const first = !this.watchdogFired;
    this.watchdogFired = true;
    try {
      if (this.config.watchdogAction === 'stop') {
        if (first) {
          // The latch must not depend on the link: a hold command that fails (a timed-out
          // broker ack, a dropped connection) still ends in the e-stop.
          try {
            await this.send(this.holdAction());
          } finally {
            await this.estop('watchdog');
          }
        }
      } else if (first || this.now() - this.lastHoldAt >= this.dtMs) {
        // Checked four times a period for a prompt first hold; repeated holds go at the control rate, not faster.
        this.lastHoldAt = this.now();
        await this.send(this.holdAction());
      }
    } catch (e) {
      this.opts.log?.({ kind: 'watchdog', detail: `hold command failed: ${(e as Error).message}`, t: this.now() });
    }
  }

  /** Ends the watchdog without disposing the robot underneath (its owner does that). */
  stopWatchdog(): void {
    clearInterval(this.timer);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    clearInterval(this.timer);
    await this.inner[Symbol.asyncDispose]();
  }
}

const clampTo = (v: number, lo: number, hi: number) => (v < lo ? lo : v > hi ? hi : v);
const f32 = new Float32Array(1);
const i32 = new Int32Array(f32.buffer);
/** The largest float32 strictly below x (x itself when already a float32 below the bound). */
function nextDown(x: number): number {
  f32[0] = x;
  if (f32[0]! <= x) return f32[0]!;
  i32[0] = f32[0]! > 0 ? i32[0]! - 1 : i32[0]! + 1;
  return f32[0]!;
}
function nextUp(x: number): number {
  f32[0] = x;
  if (f32[0]! >= x) return f32[0]!;
  i32[0] = f32[0]! > 0 ? i32[0]! + 1 : i32[0]! - 1;
  return f32[0]!;
}
