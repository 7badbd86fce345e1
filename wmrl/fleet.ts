// A fleet: a trainer's robot episodes run on N robots at once, each robot exclusive (one episode at a time) and
// behind its own safety layer; an episode goes to the robot that frees up first. A robot whose own call fails (its
// link lost, its reset refused: anything but its safety layer's stop) leaves the fleet: the episode it was running
// is kept in the store as partial and runs again, from the same reset, on another robot, and the run goes on with
// the others. Only a fleet with no robot left fails, naming every robot it lost and why.
import { layoutMismatch, layoutOf } from '../common/layout.js';
import type { RobotDeclaration } from '../common/robot.js';
import type { EpisodeStore } from '../episodes/store/store.js';
import type { Scorer } from '../hardware/record.js';
import { SafetyStop, type SafetyLayer } from '../hardware/safety.js';

/** One robot a target's episodes run on: its safety layer, its own outcome signal, what its episodes record. */
export interface TargetRobot {
  robot: SafetyLayer;
  /** Reward, done and success of the step just taken, as this robot reports them. */
  outcome: Scorer;
  meta: { robot: string; hardwareProfile: string; task?: string };
  /** Where its episodes are recorded; default: the target's store. */
  store?: EpisodeStore;
  /** The robot's own failure, once one of its calls failed other than by its safety layer's stop; null while it works. */
  failure(): Error | null;
}

/**
 * `robot` and its `outcome` as a fleet's robot: every call of either that fails other than by the safety layer's stop
 * is the robot's failure (the errors still reach their callers).
 */
export function watchedRobot(robot: SafetyLayer, outcome: Scorer, meta: TargetRobot['meta']): TargetRobot {
  let failure: Error | null = null;
  const note = (e: unknown): never => {
    if (!(e instanceof SafetyStop)) failure ??= e instanceof Error ? e : new Error(String(e));
    throw e;
  };
  const watch = <T>(f: () => T): T => {
    try {
      const r = f();
      return (r instanceof Promise ? r.catch(note) : r) as T;
    } catch (e) {
      return note(e);
    }
  };
  const watched = new Proxy(robot, {
    get: (target, key) => {
      const v = Reflect.get(target, key, target) as unknown;
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => watch(() => (v as (...a: unknown[]) => unknown).apply(target, args));
    },
  });
  return { robot: watched, outcome: () => watch(outcome), meta, failure: () => failure };
}

/** Why the robot `who` of `spec` cannot join a fleet whose lead is `lead` of `leadSpec` (one policy acts on every robot of a fleet), or null. */
export function fleetMismatch(lead: string, leadSpec: RobotDeclaration, who: string, spec: RobotDeclaration): string | null {
  const mismatch = layoutMismatch(layoutOf(leadSpec), layoutOf(spec), lead, who);
  if (mismatch) return `${who} observes another robot than ${lead} (one policy acts on every robot of a fleet): ${mismatch}`;
  const a = spec.action, b = leadSpec.action;
  const same = a.kind === b.kind && a.low.length === b.low.length && a.low.every((v, i) => v === b.low[i] && a.high[i] === b.high[i]);
  if (!same) return `${who} takes ${a.kind} actions in [${a.low.join(', ')}] .. [${a.high.join(', ')}], ${lead} ${b.kind} in [${b.low.join(', ')}] .. [${b.high.join(', ')}]: one policy acts on every robot of a fleet`;
  return null;
}

/** The fleet has no robot left: each one it lost, with its failure. */
export class FleetExhausted extends Error {
  override readonly name = 'FleetExhausted';
  constructor(readonly lost: ReadonlyArray<{ robot: TargetRobot; error: Error }>) {
    super(`no robot left to run episodes on: ${lost.map((l) => `robot '${l.robot.meta.robot}' lost (${l.error.message})`).join('; ')}`, { cause: lost.at(-1)?.error });
  }
}

export class RobotFleet {
  /** Robots free for an episode, lowest index first. */
  private readonly idle: number[];
  private readonly waiting: Array<{ resolve: (i: number) => void; reject: (e: Error) => void }> = [];
  /** The robots lost so far, in the order they were lost. */
  readonly lost: Array<{ index: number; robot: TargetRobot; error: Error }> = [];

  /**
   * `robots` share one observation layout and action space (the policy acts on every one of them). `onLost` hears of each
   * robot the fleet loses, its failure and how many robots are left.
   */
  constructor(
    readonly robots: readonly TargetRobot[],
    private readonly onLost?: (robot: TargetRobot, error: Error, left: number) => void,
  ) {
    if (robots.length === 0) throw new Error('robot fleet: no robots');
    const lead = robots[0]!;
    for (const r of robots.slice(1)) {
      const problem = fleetMismatch(`robot '${lead.meta.robot}'`, lead.robot.spec, `robot '${r.meta.robot}'`, r.robot.spec);
      if (problem) throw new Error(`robot fleet: ${problem}`);
    }
    this.idle = robots.map((_, i) => i);
  }

  /** Robots still in the fleet. */
  get left(): number {
    return this.robots.length - this.lost.length;
  }

  /**
   * Runs `episode` on the robot that frees up first (the lowest-numbered of those free). Where it fails by the robot's
   * own failure, the robot leaves the fleet and `episode` runs again on another; any other error is the caller's.
   * Rejects with FleetExhausted once no robot is left.
   */
  async run<T>(episode: (robot: TargetRobot, index: number) => Promise<T>): Promise<T> {
    for (;;) {
      const i = await this.acquire();
      const r = this.robots[i]!;
      try {
        const out = await episode(r, i);
        this.release(i);
        return out;
      } catch (e) {
        const failure = r.failure();
        if (!failure) {
          this.release(i);
          throw e;
        }
        this.lose(i, failure);
      }
    }
  }

  private acquire(): Promise<number> {
    if (this.left === 0) return Promise.reject(this.exhausted());
    const i = this.idle.shift();
    if (i !== undefined) return Promise.resolve(i);
    return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }));
  }

  private release(i: number): void {
    const next = this.waiting.shift();
    if (next) return next.resolve(i);
    this.idle.push(i);
    this.idle.sort((a, b) => a - b);
  }

  private lose(index: number, error: Error): void {
    const robot = this.robots[index]!;
    this.lost.push({ index, robot, error });
    this.onLost?.(robot, error, this.left);
    if (this.left > 0) return;
    const e = this.exhausted();
    for (const w of this.waiting.splice(0)) w.reject(e);
  }

  private exhausted(): FleetExhausted {
    return new FleetExhausted(this.lost.map(({ robot, error }) => ({ robot, error })));
  }
}
