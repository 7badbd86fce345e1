// wmrl/identified-sim.ts: a start written into the identified sim from its observation alone continues as the robot
// it was observed on does (same profile, no noise), for every rollout of a batch; bad starts are refused by name.
import { describe, expect, it } from 'vitest';
import { Rng } from '../nn/index.js';
import { makeEnv } from '../sim/index.js';
import { NOMINAL, type HardwareProfile } from '../sim/profiles.js';
import { IdentifiedSim } from '../wmrl/identified-sim.js';
import { GaussianPolicy } from '../policies/gaussian.js';

const ROBOT: HardwareProfile = { ...NOMINAL, name: 'robot', description: 'a test robot', mass_scale: 1.7, friction_scale: 0.6, damping_scale: 0.5, actuator_gain_scale: 0.7, action_latency_steps: 2, obs_noise_std: 0, control_jitter_substeps: 0 };
const HISTORY = 3;

/** Episodes on the robot from `seeds`: the start, its instruction, smooth random commands and every observation after them. */
async function record(task: string, seeds: number[], steps: number) {
  const env = await makeEnv({ task, profile: ROBOT, commandHistory: HISTORY });
  const rng = new Rng(11);
  const D = env.observationSpace.state.shape[0]!, A = env.actionSpace.shape[0]!;
  try {
    return seeds.map((seed) => {
      const o = env.reset(seed);
      const actions = new Float32Array(steps * A), obs = new Float32Array(steps * D), a = new Float32Array(A);
      for (let t = 0; t < steps; t++) {
        for (let j = 0; j < A; j++) a[j] = Math.max(-1, Math.min(1, 0.8 * a[j]! + 0.6 * rng.normal()));
        actions.set(a, t * A);
        obs.set(env.step(a).obs.state, t * D);
      }
      return { start: o.state, instruction: o.instruction!, actions, obs };
    });
  } finally {
    env.dispose();
  }
}

const maxAbs = (a: Float32Array, b: Float32Array) => a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i]!)), 0);

describe('IdentifiedSim', () => {
  for (const task of ['reach', 'push']) {
    it(`${task}: restores each start from its observation and steps a batch as the robot stepped`, async () => {
      const steps = 60, eps = await record(task, [3, 8, 21], steps);
      const sim = await IdentifiedSim.create(task, ROBOT, { commandHistory: HISTORY });
      try {
        const D = sim.dObs, A = sim.dAct, n = eps.length;
        expect(D).toBe(eps[0]!.start.length);
        const starts = new Float32Array(n * D);
        eps.forEach((e, i) => starts.set(e.start, i * D));
        const restored = await sim.reset(starts, eps.map((e) => e.instruction));
        expect(maxAbs(restored, starts)).toBeLessThan(1e-5);
        let worst = 0, moved = 0;
        for (let t = 0; t < steps; t++) {
          const act = new Float32Array(n * A);
          eps.forEach((e, i) => act.set(e.actions.subarray(t * A, (t + 1) * A), i * A));
          const s = sim.step(act);
          eps.forEach((e, i) => {
            const want = e.obs.subarray(t * D, (t + 1) * D);
            worst = Math.max(worst, maxAbs(s.obs.subarray(i * D, (i + 1) * D), want));
            moved = Math.max(moved, maxAbs(want, e.start));
          });
        }
        expect(moved).toBeGreaterThan(0.1); // the commands moved the arm: the match is not of a robot at rest
        expect(worst).toBeLessThan(1e-3);
      } finally {
        sim.dispose();
      }
    });
  }

  it('imagines a policy\'s rollouts as the robot would run them, and scores a replay as the robot scored the episode', async () => {
    const H = 40, seeds = [4, 9];
    const env = await makeEnv({ task: 'push', profile: ROBOT, commandHistory: HISTORY });
    const D = env.observationSpace.state.shape[0]!, A = env.actionSpace.shape[0]!;
    const policy = new GaussianPolicy({ obsDim: D, actDim: A, hidden: [16], initLogStd: -1, obsMean: new Array<number>(D).fill(0), obsStd: new Array<number>(D).fill(0.3), seed: 2 });
    const sim = await IdentifiedSim.create('push', ROBOT, { commandHistory: HISTORY });
    try {
      // The robot runs the policy's mean action (zero noise) from each start; the sim imagines the same from the starts' observations.
      const want: Float32Array[] = [], starts = new Float32Array(seeds.length * D), instructions: string[] = [], returns: number[] = [], sent: Float32Array[] = [];
      for (const [i, seed] of seeds.entries()) {
        const o = env.reset(seed);
        starts.set(o.state, i * D);
        instructions.push(o.instruction!);
        let obs = o.state, ret = 0;
        const rows = new Float32Array(H * D), acts = new Float32Array(H * A);
        for (let t = 0; t < H; t++) {
          const a = (await policy.act(obs, new Float32Array(A))).action.map((v) => Math.max(-1, Math.min(1, v)));
          acts.set(a, t * A);
          const s = env.step(a);
          ret += s.reward;
          obs = s.obs.state;
          rows.set(obs, t * D);
        }
        want.push(rows);
        returns.push(ret);
        sent.push(acts);
      }
      const im = await sim.imagine(policy, { obs: starts, instructions }, H, { noise: new Float32Array(seeds.length * H * A), actLow: [-1, -1], actHigh: [1, 1] });
      seeds.forEach((_, i) => {
        expect(maxAbs(im.obs.subarray((i * (H + 1) + 1) * D, (i + 1) * (H + 1) * D), want[i]!)).toBeLessThan(1e-3);
        expect(im.reward.subarray(i * H, (i + 1) * H).reduce((a, r) => a + r, 0)).toBeCloseTo(returns[i]!, 3);
      });
      expect(im.logProb.every(Number.isFinite)).toBe(true);
      expect(im.successProb.every((p) => p === 0 || p === 1)).toBe(true);
      expect(await sim.replayScore(starts.subarray(0, D), instructions[0]!, sent[0]!, { mode: 'return', k: 5 })).toBeCloseTo(returns[0]!, 3);
      // Replays and rollouts started together (a trainer's anchor groups finish as they will) each run whole, one after another.
      const [r1, r0, again] = await Promise.all([
        sim.replayScore(starts.subarray(D, 2 * D), instructions[1]!, sent[1]!, { mode: 'return', k: 5 }),
        sim.replayScore(starts.subarray(0, D), instructions[0]!, sent[0]!, { mode: 'return', k: 5 }),
        sim.imagine(policy, { obs: starts, instructions }, H, { noise: new Float32Array(seeds.length * H * A), actLow: [-1, -1], actHigh: [1, 1] }),
      ]);
      expect(r1).toBeCloseTo(returns[1]!, 3);
      expect(r0).toBeCloseTo(returns[0]!, 3);
      expect(maxAbs(again.obs, im.obs)).toBe(0);
      // Disposed while a rollout runs (a trainer's anchors still scoring as it ends): the rollout finishes as it would
      // have, on the sim as it was; anything after is refused, and once the rollout ended the sim is freed.
      const late = sim.imagine(policy, { obs: starts, instructions }, H, { noise: new Float32Array(seeds.length * H * A), actLow: [-1, -1], actHigh: [1, 1] });
      sim.dispose();
      await expect(sim.replayScore(starts.subarray(0, D), instructions[0]!, sent[0]!, { mode: 'return', k: 5 })).rejects.toThrow(/identified sim: used after dispose/);
      expect(maxAbs((await late).obs, im.obs)).toBe(0);
      await new Promise((r) => setTimeout(r, 0));
      await expect(sim.reset(starts, instructions)).rejects.toThrow(/identified sim: used after dispose/);
    } finally {
      sim.dispose();
      env.dispose();
    }
  });

  it('runs the dynamics it was given: another profile from the same start diverges', async () => {
    const [e] = await record('reach', [5], 40);
    const sim = await IdentifiedSim.create('reach', { ...ROBOT, mass_scale: 0.5, action_latency_steps: 0 }, { commandHistory: HISTORY });
    try {
      await sim.reset(e!.start, [e!.instruction]);
      let last: Float32Array = new Float32Array(0);
      for (let t = 0; t < 40; t++) last = sim.step(e!.actions.subarray(t * sim.dAct, (t + 1) * sim.dAct)).obs;
      expect(maxAbs(last, e!.obs.subarray(39 * sim.dObs))).toBeGreaterThan(0.05);
    } finally {
      sim.dispose();
    }
  });

  it('ends an imagined rollout at its first success, as the robot ends its episode, and stops once all have ended', async () => {
    // The robot runs the task's demonstrator (which reads the robot's true state) to success; the sim imagines a policy
    // that sends the same commands from the same start.
    const NOISELESS: HardwareProfile = { ...ROBOT, action_latency_steps: 0 };
    const env = await makeEnv({ task: 'reach', profile: NOISELESS, commandHistory: HISTORY });
    const sim = await IdentifiedSim.create('reach', NOISELESS, { commandHistory: HISTORY });
    try {
      const D = sim.dObs, A = sim.dAct, H = 100;
      const demo = (env as unknown as { demonstrator(o: { latencySteps: number }): { act(o: unknown): Float32Array; executed(a: ArrayLike<number>): void } }).demonstrator({ latencySteps: 0 });
      let o = env.reset(12);
      const start = o.state, instruction = o.instruction!, sent: Float32Array[] = [];
      let succeeded = -1;
      for (let t = 0; t < H && succeeded < 0; t++) {
        const a = demo.act(o).map((v) => Math.max(-1, Math.min(1, v)));
        demo.executed(a);
        sent.push(a);
        const s = env.step(a);
        o = s.obs;
        if (s.info.success) succeeded = t;
      }
      expect(succeeded).toBeGreaterThan(0);
      expect(succeeded).toBeLessThan(H - 10);
      let t = 0;
      const replay = { kind: 'replay', obsDim: D, actDim: A, chunk: 1, inputs: () => ({}), act: async () => ({ action: Float32Array.from(sent[Math.min(t++, sent.length - 1)]!), mean: new Float32Array(A), logProb: new Float32Array(1) }) } as unknown as GaussianPolicy;
      const im = await sim.imagine(replay, { obs: start, instructions: [instruction] }, H, { noise: new Float32Array(H * A), actLow: [-1, -1], actHigh: [1, 1] });
      const hit = im.successProb.findIndex((p) => p === 1);
      expect(hit).toBe(succeeded);
      // Every step after it holds the success and the last observation, unsimulated: the policy was not asked again.
      expect(Array.from(im.successProb.subarray(hit))).toEqual(new Array(H - hit).fill(1));
      expect(Array.from(im.reward.subarray(hit + 1))).toEqual(new Array(H - hit - 1).fill(0));
      expect(maxAbs(im.obs.subarray(H * D, (H + 1) * D), im.obs.subarray((hit + 1) * D, (hit + 2) * D))).toBe(0);
      expect(t).toBe(hit + 1);
    } finally {
      sim.dispose();
      env.dispose();
    }
  });

  it('leaves a rollout marked ended where it was (reward 0, success 1) and steps the others as without the mark', async () => {
    const eps = await record('reach', [2, 6], 12);
    const D = eps[0]!.start.length;
    const run = async (endAt: number | null) => {
      const sim = await IdentifiedSim.create('reach', ROBOT, { commandHistory: HISTORY });
      try {
        const A = sim.dAct, starts = new Float32Array(2 * D);
        eps.forEach((e, i) => starts.set(e.start, i * D));
        await sim.reset(starts, eps.map((e) => e.instruction));
        const ended = new Uint8Array(2), out: Array<{ obs: Float32Array; reward: Float32Array; success: Float32Array }> = [];
        for (let t = 0; t < 12; t++) {
          if (t === endAt) ended[0] = 1;
          const act = new Float32Array(2 * A);
          eps.forEach((e, i) => act.set(e.actions.subarray(t * A, (t + 1) * A), i * A));
          out.push(sim.step(act, ended));
        }
        return out;
      } finally {
        sim.dispose();
      }
    };
    const free = await run(null), cut = await run(5);
    for (let t = 0; t < 12; t++) {
      // The unmarked rollout is untouched by its neighbour's mark.
      expect(maxAbs(cut[t]!.obs.subarray(D), free[t]!.obs.subarray(D))).toBe(0);
      if (t < 5) expect(maxAbs(cut[t]!.obs, free[t]!.obs)).toBe(0);
      else {
        expect(maxAbs(cut[t]!.obs.subarray(0, D), free[4]!.obs.subarray(0, D))).toBe(0);
        expect([cut[t]!.reward[0], cut[t]!.success[0]]).toEqual([0, 1]);
      }
    }
    expect(maxAbs(free[11]!.obs.subarray(0, D), free[4]!.obs.subarray(0, D))).toBeGreaterThan(1e-3); // unmarked, it moved on
  });

  it('built from a calibration (its delay and scales) steps as the robot those describe, and only that one', async () => {
    const [e] = await record('push', [4], 40);
    const { mass_scale, friction_scale, damping_scale, actuator_gain_scale } = ROBOT;
    const run = async (delay: number) => {
      const sim = await IdentifiedSim.fromCalibration('push', { delay, scales: { mass_scale, friction_scale, damping_scale, actuator_gain_scale } }, { commandHistory: HISTORY });
      try {
        await sim.reset(e!.start, [e!.instruction]);
        let last: Float32Array = new Float32Array(0);
        for (let t = 0; t < 40; t++) last = sim.step(e!.actions.subarray(t * sim.dAct, (t + 1) * sim.dAct)).obs;
        return maxAbs(last, e!.obs.subarray(39 * sim.dObs));
      } finally {
        sim.dispose();
      }
    };
    expect(await run(ROBOT.action_latency_steps)).toBeLessThan(1e-3);
    expect(await run(0)).toBeGreaterThan(1e-2);
  });

  it('refuses a start it cannot write: wrong length, an instruction of another task, a non-finite entry', async () => {
    const [e] = await record('reach', [1], 1);
    const sim = await IdentifiedSim.create('reach', ROBOT, { commandHistory: HISTORY });
    try {
      await expect(sim.reset(e!.start.subarray(1), [e!.instruction])).rejects.toThrow(/not a positive multiple of the layout's/);
      await expect(sim.reset(e!.start, ['push the cube onto the red pad'])).rejects.toThrow(/'push the cube onto the red pad' is not an instruction of reach/);
      const bad = e!.start.slice();
      bad[2] = Number.NaN;
      await expect(sim.reset(bad, [e!.instruction])).rejects.toThrow(/start 0 entry 2 is NaN/);
      expect(() => sim.step(new Float32Array(sim.dAct))).toThrow(/step before reset/);
    } finally {
      sim.dispose();
    }
  });
});
