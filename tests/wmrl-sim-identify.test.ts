// wmrl/calibrate.ts identifyProfile: the sim, replaying a robot's commands from its reported states, finds the robot's delay and
// physical scales; episodes that do not fit the task are refused, naming what is wrong.
import { describe, expect, it } from 'vitest';
import { Rng } from '../nn/index.js';
import { identifyProfile, replayError, type RecordedEpisode } from '../wmrl/calibrate.js';
import { NOMINAL, type HardwareProfile } from '../sim/profiles.js';
import { makeEnv } from '../sim/index.js';

const ROBOT: HardwareProfile = { ...NOMINAL, name: 'robot', description: 'a test robot', mass_scale: 1.6, damping_scale: 0.5, actuator_gain_scale: 0.6, action_latency_steps: 2, obs_noise_std: 0.003, control_jitter_substeps: 1 };

/** Episodes of smooth random commands on a robot with `profile`, recorded as a robot reports them. */
async function record(profile: HardwareProfile, episodes: number, steps: number): Promise<RecordedEpisode[]> {
  const env = await makeEnv({ task: 'reach', profile, commandHistory: 2, seed: 5 });
  const rng = new Rng(3);
  const out: RecordedEpisode[] = [];
  try {
    for (let i = 0; i < episodes; i++) {
      const D = env.observationSpace.state.shape[0]!, A = env.actionSpace.shape[0]!;
      const states = new Float32Array((steps + 1) * D), actions = new Float32Array(steps * A);
      states.set(env.reset(100 + i).state);
      const a = new Float32Array(A);
      for (let t = 0; t < steps; t++) {
        for (let j = 0; j < A; j++) a[j] = Math.max(-1, Math.min(1, 0.8 * a[j]! + 0.5 * rng.normal()));
        actions.set(a, t * A);
        states.set(env.step(a).obs.state, (t + 1) * D);
      }
      out.push({ states, actions });
    }
  } finally {
    env.dispose();
  }
  return out;
}

describe('identifyProfile', () => {
  it("finds the robot's delay and its mass, damping and gain from its episodes", async () => {
    const episodes = await record(ROBOT, 6, 50);
    const found = await identifyProfile('reach', episodes, { maxDelay: 4, commandHistory: 2, seed: 1 });
    expect(found.delay).toBe(2);
    expect(found.loss).toHaveLength(5);
    // the true delay explains the episodes clearly better than its neighbours
    expect(found.loss[1]!).toBeGreaterThan(1.5 * found.loss[2]!);
    expect(found.loss[3]!).toBeGreaterThan(1.5 * found.loss[2]!);
    const near = (v: number, truth: number, ratio: number) => expect(Math.max(v / truth, truth / v)).toBeLessThan(ratio);
    near(found.scales.actuator_gain_scale, 0.6, 1.05);
    near(found.scales.mass_scale, 1.6, 1.1);
    near(found.scales.damping_scale, 0.5, 1.05);
    // the first pass over the 5 delays, then a local search from the two best, within its budget of 150 replays each
    expect(found.evaluations).toBeGreaterThan(5 * (1 + 6 * 24));
    expect(found.evaluations).toBeLessThanOrEqual(5 * (1 + 6 * 24) + 2 * 150);
    // the truth's own error is as low as what the search found (within the sensor noise)
    const error = await replayError('reach', episodes, { maxDelay: 4, commandHistory: 2 });
    const truth = await error(2, [Math.log(1.6), 0, Math.log(0.5), Math.log(0.6)]);
    expect(found.loss[2]!).toBeLessThan(truth * 1.1);
    expect(await error(2, [0, 0, 0, 0])).toBeGreaterThan(1.5 * truth);
  });

  it('refuses episodes that do not fit the task, and a search it cannot run, naming the problem', async () => {
    const [e] = await record(NOMINAL, 1, 20);
    await expect(replayError('reach', [{ states: e!.states, actions: e!.actions.subarray(1) }], { maxDelay: 2, commandHistory: 2 })).rejects.toThrow(/episode 0 has 39 action values, not a multiple of the 2 actuators/);
    await expect(replayError('reach', [{ states: e!.states.subarray(3), actions: e!.actions }], { maxDelay: 2, commandHistory: 2 })).rejects.toThrow(/episode 0 has \d+ state values, expected 21 x \d+ for its 20 commands/);
    await expect(replayError('reach', [e!], { maxDelay: 15, commandHistory: 2 })).rejects.toThrow(/no episode has the 25 steps of one segment after the longest delay/);
    const error = await replayError('reach', [e!], { maxDelay: 2, commandHistory: 2 });
    await expect(error(3, [0, 0, 0, 0])).rejects.toThrow(/delay 3 is outside 0 … 2/);
    await expect(identifyProfile('reach', [e!], { maxDelay: 2, commandHistory: 2, spread: 1 })).rejects.toThrow(/spread must be a number > 1, got 1/);
    await expect(identifyProfile('reach', [e!], { maxDelay: 2, commandHistory: 2, refine: -1 })).rejects.toThrow(/refine must be a whole number of replays, got -1/);
    await expect(identifyProfile('reach', [e!], { maxDelay: 2, commandHistory: 2, elite: 30 })).rejects.toThrow(/1 ≤ elite ≤ population \(got 6, 24, 30\)/);
  });
});
