// A trainer's episodes on a fleet of robots (wmrl/fleet.ts): each robot runs one episode at a time, the robots run
// at once; a robot whose own call fails leaves the fleet, its episode kept partial in the store and run again on
// another robot; only an empty fleet fails, naming every robot lost. On sim robots in this process: a group's
// episodes spread over two robots, the clock charging each to its own robot; a robot that dies mid-episode; standard
// GRPO on a fleet; and one robot exactly as before (a group's episodes in turn, drawing from the trainer's generator).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { RobotDeclaration, RobotObservation } from '../common/robot.js';
import { EpisodeStore } from '../episodes/store/store.js';
import { SimRobot } from '../hardware/robots/sim.js';
import { DEFAULT_SAFETY, SafetyLayer, SafetyStop } from '../hardware/safety.js';
import type { ResetOptions, Robot } from '../hardware/types.js';
import { Rng } from '../nn/index.js';
import { GaussianPolicy } from '../policies/gaussian.js';
import { ClippedPolicyGradient, DEFAULT_PG_CONFIG } from '../policies/pg.js';
import type { Policy } from '../policies/types.js';
import { fleetRobots, fleetTarget, groupEpisodes, robotEpisode, robotTarget, type ClosableTarget } from '../wmrl/embodied.js';
import { FleetExhausted, RobotFleet, watchedRobot, type TargetRobot } from '../wmrl/fleet.js';
import { SimPrompts } from '../wmrl/sim-setup.js';
import { trainStandard } from '../wmrl/train_standard.js';

const dir = mkdtempSync(join(tmpdir(), 'fleet-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const SPEC: RobotDeclaration = { name: 'arm', joints: ['j'], positionLimits: [[-1, 1]], velocityLimits: [1], action: { kind: 'normalized', names: ['j'], low: [-1], high: [1] }, controlHz: 10 };
/** A fleet robot that only has a spec and a failure the test sets. */
const fake = (name: string, spec: RobotDeclaration = SPEC) => {
  const r = { failed: null as Error | null, robot: { spec } as unknown as SafetyLayer, outcome: () => ({ reward: 0, done: false }), meta: { robot: name, hardwareProfile: 'real' }, failure: () => r.failed };
  return r;
};

describe('RobotFleet', () => {
  it('runs episodes at once on its robots, each robot one at a time, on the robot that frees up first', async () => {
    const fleet = new RobotFleet([fake('a'), fake('b'), fake('c')]);
    const busy = [0, 0, 0];
    let most = 0, mostOnOne = 0;
    const used: number[] = [];
    await Promise.all(Array.from({ length: 12 }, (_, k) => fleet.run(async (_r, i) => {
      busy[i]!++;
      used.push(i);
      most = Math.max(most, busy.reduce((a, b) => a + b, 0));
      mostOnOne = Math.max(mostOnOne, ...busy);
      await sleep(5 + (k % 3) * 3);
      busy[i]!--;
    })));
    expect([most, mostOnOne]).toEqual([3, 1]);
    expect(new Set(used)).toEqual(new Set([0, 1, 2]));
  });

  it("a robot's own failure takes it out of the fleet and the episode runs again on another; the fleet fails only once empty, naming every robot lost", async () => {
    const [a, b] = [fake('arm-a'), fake('arm-b')];
    const lost: Array<[string, string, number]> = [];
    const fleet = new RobotFleet([a, b], (r, e, left) => lost.push([r.meta.robot, e.message, left]));
    const tries: string[] = [];
    // The episode on arm-a loses its link; it runs again, on arm-b.
    const out = await fleet.run(async (r) => {
      tries.push(r.meta.robot);
      if (r === a) {
        a.failed = new Error('link lost');
        throw a.failed;
      }
      return 'done';
    });
    expect([out, tries, lost]).toEqual(['done', ['arm-a', 'arm-b'], [['arm-a', 'link lost', 1]]]);
    // An error that is not the robot's (the policy's) is the caller's: the robot stays.
    await expect(fleet.run(async () => { throw new Error('policy: NaN'); })).rejects.toThrow('policy: NaN');
    expect(fleet.left).toBe(1);
    // The last robot lost mid-episode, with another episode waiting for it: both fail, naming every robot.
    const failing = fleet.run(async () => {
      await sleep(5);
      b.failed = new Error('no state for 1500 ms');
      throw b.failed;
    });
    const waiting = fleet.run(async () => 'never');
    for (const p of [failing, waiting]) {
      const e = await p.then(() => null, (x: unknown) => x);
      expect(e).toBeInstanceOf(FleetExhausted);
      expect((e as Error).message).toBe("no robot left to run episodes on: robot 'arm-a' lost (link lost); robot 'arm-b' lost (no state for 1500 ms)");
    }
    await expect(fleet.run(async () => 'never')).rejects.toThrow(/^no robot left/);
  });

  it('refuses robots that one policy could not drive: another observation layout or action range', () => {
    expect(() => new RobotFleet([])).toThrow('robot fleet: no robots');
    expect(() => new RobotFleet([fake('a'), fake('b', { ...SPEC, joints: ['k'] })])).toThrow(/^robot fleet: robot 'b' observes another robot than robot 'a' .*joint 0/);
    expect(() => new RobotFleet([fake('a'), fake('b', { ...SPEC, action: { ...SPEC.action, high: [2] } })])).toThrow(/^robot fleet: robot 'b' takes normalized actions in \[-1\] \.\. \[2\], robot 'a' normalized in \[-1\] \.\. \[1\]/);
  });

  it('watchedRobot: a failing robot call is its failure; the safety layer\'s stop is not', async () => {
    let mode: 'ok' | 'stop' | 'fail' = 'ok';
    const inner = { spec: SPEC, observe: async () => { if (mode === 'stop') throw new SafetyStop('estop', 'e-stopped'); if (mode === 'fail') throw new Error('link down'); return {} as RobotObservation; } };
    const w = watchedRobot(inner as unknown as SafetyLayer, () => ({ reward: 1, done: false }), { robot: 'a', hardwareProfile: 'real' });
    expect(w.robot.spec).toBe(SPEC);
    await w.robot.observe();
    mode = 'stop';
    await expect(w.robot.observe()).rejects.toThrow('e-stopped');
    expect(w.failure()).toBeNull();
    mode = 'fail';
    await expect(w.robot.observe()).rejects.toThrow('link down');
    expect(w.failure()?.message).toBe('link down');
  });
});

/** A sim robot whose link drops for good after `failAfter` commands (null: never). */
class DroppingRobot implements Robot {
  acts = 0;
  constructor(readonly sim: SimRobot, private readonly failAfter: number | null) {}
  get spec() {
    return this.sim.spec;
  }
  private check(): void {
    if (this.failAfter !== null && this.acts >= this.failAfter) throw new Error(`${this.sim.spec.name}: link lost`);
  }
  async observe(): Promise<RobotObservation> {
    this.check();
    return this.sim.observe();
  }
  async act(a: Float32Array): Promise<Float32Array> {
    this.check();
    this.acts++;
    return this.sim.act(a);
  }
  async reset(o?: ResetOptions): Promise<RobotObservation> {
    this.check();
    return this.sim.reset(o);
  }
  estop = () => this.sim.estop();
  [Symbol.asyncDispose] = () => this.sim[Symbol.asyncDispose]();
}

/** Sim robots of reach on the gap profile, named a, b, …, as a fleet target recording into `store`. */
async function simFleet(failAfter: Array<number | null>, store: string): Promise<{ target: ClosableTarget; robots: DroppingRobot[] }> {
  const robots = await Promise.all(failAfter.map(async (f) => new DroppingRobot(await SimRobot.create({ task: 'reach', profile: 'gap', seed: 0 }), f)));
  const units = fleetRobots(robots.map((r, i) => {
    const safety = new SafetyLayer(r, { ...DEFAULT_SAFETY, maxDelta: 2 }, { watchdog: false, now: () => r.sim.clockMs });
    const outcome = () => ({ reward: r.sim.lastStep?.reward ?? 0, done: !!(r.sim.lastStep?.terminated || r.sim.lastStep?.truncated), success: r.sim.lastStep?.info.success });
    return { robot: safety, outcome, meta: { robot: String.fromCharCode(97 + i), hardwareProfile: 'gap', task: 'reach' } };
  }));
  const target = fleetTarget(units, { maxSteps: robots[0]!.sim.env.horizon, realTime: false, store, resetSeconds: 5 });
  return { target, robots };
}

/** A policy of the sim's observation that samples around zero. */
const noisePolicy = (D: number, A: number): Policy => ({ kind: 'test', obsDim: D, actDim: A, chunk: 1, inputs: () => ({}), act: async (_x: Float32Array, noise: Float32Array) => ({ action: noise.map((v) => 0.3 * v), mean: new Float32Array(A), logProb: Float32Array.of(0) }) }) as unknown as Policy;

describe('episodes on a fleet of sim robots', () => {
  it("a group's episodes spread over the robots, each charged to its own robot: robot time is the sum, wall-clock the longest robot", async () => {
    const { target } = await simFleet([null, null], join(dir, 'spread.db'));
    try {
      const spec = target.robot.spec;
      const eps = await groupEpisodes(target, noisePolicy(17, spec.action.low.length), 1_000_000, 4, new Rng(1), 'v1');
      const store = target.store!;
      const byRobot = eps.map((ep) => store.list().find((e) => e.meta.id === ep.id)!.meta.robot);
      expect(byRobot.sort()).toEqual(['a', 'a', 'b', 'b']);
      expect(eps.every((ep) => ep.status === 'complete' && ep.seed === 1_000_000)).toBe(true);
      const perEpisode = eps[0]!.steps / spec.controlHz + 5;
      expect(target.clock.state().busy.map((b) => b > 0)).toEqual([true, true]);
      expect(target.clock.robotSeconds).toBeCloseTo(eps.reduce((s, ep) => s + ep.steps / spec.controlHz + 5, 0));
      expect(target.clock.wallSeconds).toBeLessThan(target.clock.robotSeconds);
      expect(target.clock.wallSeconds).toBeGreaterThanOrEqual(perEpisode);
    } finally {
      await target.close();
    }
  });

  it('a robot that dies mid-episode: that episode kept partial in the store and run again on the other robot; nothing recorded is lost', async () => {
    const ended: string[] = [];
    const { target } = await simFleet([null, 30], join(dir, 'dies.db'));
    try {
      const store = target.store!;
      const eps = await groupEpisodes(target, noisePolicy(17, 2), 1_000_001, 4, new Rng(2), 'v1', { ended: (ep) => ended.push(ep.id) });
      expect(eps.map((e) => e.status)).toEqual(['complete', 'complete', 'complete', 'complete']);
      expect(target.fleet!.lost.map((l) => [l.robot.meta.robot, l.error.message])).toEqual([['b', 'sim-reach-gap: link lost']]);
      const all = store.list();
      const partial = all.filter((e) => e.status === 'partial');
      expect(partial.map((e) => [e.meta.robot, e.steps])).toEqual([['b', 30]]);
      // Every episode the group returned ran to its end on robot a; the partial one is kept beside them.
      expect(eps.map((ep) => all.find((e) => e.meta.id === ep.id)!.meta.robot)).toEqual(['a', 'a', 'a', 'a']);
      expect(all).toHaveLength(5);
      expect(ended).toHaveLength(4);
      // The last robot gone too: the group fails naming both.
      const { target: t2 } = await simFleet([10, 20], join(dir, 'both.db'));
      try {
        await expect(groupEpisodes(t2, noisePolicy(17, 2), 1_000_002, 2, new Rng(3), 'v1')).rejects.toThrow("no robot left to run episodes on: robot 'a' lost (sim-reach-gap: link lost); robot 'b' lost (sim-reach-gap: link lost)");
        expect(t2.store!.list().map((e) => e.status).sort()).toEqual(['partial', 'partial']);
      } finally {
        await t2.close();
      }
    } finally {
      await target.close();
    }
  });

  it('one robot: a group runs in turn and draws from the trainer\'s generator as it goes, exactly as episode after episode', async () => {
    const make = async () => {
      const sim = await SimRobot.create({ task: 'reach', profile: 'gap', seed: 0 });
      const robot = new SafetyLayer(sim, { ...DEFAULT_SAFETY, maxDelta: 2 }, { watchdog: false, now: () => sim.clockMs });
      return robotTarget(robot, { outcome: () => ({ reward: sim.lastStep?.reward ?? 0, done: !!(sim.lastStep?.terminated || sim.lastStep?.truncated) }), maxSteps: 20, realTime: false, meta: { robot: 'a', hardwareProfile: 'gap' }, robots: 1, resetSeconds: 5 });
    };
    const [t1, t2] = await Promise.all([make(), make()]);
    try {
      const p = noisePolicy(17, 2);
      const r1 = new Rng(7), r2 = new Rng(7);
      const grouped = await groupEpisodes(t1, p, 1_000_003, 3, r1, 'v');
      const one: Float32Array[] = [];
      for (let k = 0; k < 3; k++) one.push((await robotEpisode(t2, p, 1_000_003, r2, 'v')).action);
      expect(grouped.map((e) => Array.from(e.action))).toEqual(one.map((a) => Array.from(a)));
      expect(r1.getState()).toEqual(r2.getState());
      expect(t1.fleet).toBeUndefined();
    } finally {
      await Promise.all([t1.close(), t2.close()]);
    }
  });

  it('standard GRPO on a fleet of two: every group on both robots, robot time and wall-clock reported apart', async () => {
    const { target } = await simFleet([null, null], join(dir, 'grpo.db'));
    const policy = new GaussianPolicy({ obsDim: 17, actDim: 2, hidden: [16], seed: 0 });
    const pg = await ClippedPolicyGradient.create(policy, { ...DEFAULT_PG_CONFIG, epochs: 1, minibatch: 256 });
    try {
      using prompts = await SimPrompts.create('reach');
      const st = await trainStandard({ config: { updates: 1, prompts: 2, groupSize: 2, evalEvery: 1, promptSeed0: 1_000_000, seed: 0 }, policy, pg, target, prompts });
      const row = st.rows[0]!;
      expect(row.robotEpisodes).toBe(4);
      expect(row.robotWallSeconds).toBeLessThan(row.robotSeconds);
      expect(new Set(target.store!.list().map((e) => e.meta.robot))).toEqual(new Set(['a', 'b']));
    } finally {
      await pg.release();
      await policy.release();
      await target.close();
    }
  });
});

// The store a fleet target opens is its own to close; a store handed in stays open.
describe('fleetTarget', () => {
  it('closes the store it opened and every robot; a store it was given stays open', async () => {
    const store = EpisodeStore.open(join(dir, 'given.db'));
    const closed: string[] = [];
    const unit = (n: string): TargetRobot => ({ ...fake(n), robot: { spec: SPEC, [Symbol.asyncDispose]: async () => void closed.push(n) } as unknown as SafetyLayer });
    const t = fleetTarget([unit('a'), unit('b')], { maxSteps: 5, realTime: false, store, resetSeconds: 1 });
    await t.close();
    expect(closed).toEqual(['a', 'b']);
    expect(store.list()).toEqual([]);
    store.close();
  });
});
