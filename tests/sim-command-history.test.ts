// An env made with `commandHistory: K` reports the last K commands it was sent (clipped, newest first) after
// the task's own observation, declared in its layout; everything else about the env is unchanged.
import { describe, expect, it } from 'vitest';
import { buildObservation, layoutDim } from '../common/layout.js';
import { SimRobot } from '../hardware/robots/sim.js';
import { GaussianPolicy } from '../policies/gaussian.js';
import { SceneTwin, makeEnv } from '../sim/index.js';
import { evaluateSuccess, SimPrompts } from '../wmrl/embodied.js';
import { DEFAULT_PRETRAIN, pretrainWorldModel } from '../wmrl/sim-setup.js';

describe('command history in the observation', () => {
  it('reach on the gap robot: the last 3 commands sent, newest first, clipped; the task part and the sensor noise as without it', async () => {
    using plain = await makeEnv({ task: 'reach', profile: 'gap' });
    using env = await makeEnv({ task: 'reach', profile: 'gap', commandHistory: 3 });
    const n = plain.observationSpace.state.shape[0], A = env.actionSpace.shape[0];
    expect(A).toBe(2);
    expect(env.observationSpace.state.shape[0]).toBe(n + 3 * A);
    expect(layoutDim(env.layout)).toBe(n + 3 * A);
    expect(env.layout.features.slice(-6).map((f) => f.name)).toEqual([
      'shoulder command t-1', 'elbow command t-1', 'shoulder command t-2', 'elbow command t-2', 'shoulder command t-3', 'elbow command t-3',
    ]);
    expect(env.observationSpace.state.names.slice(0, n)).toEqual(plain.observationSpace.state.names);
    expect(Array.from(env.observationSpace.state.low.slice(n))).toEqual(new Array(6).fill(-1));

    const p0 = plain.reset(5), o0 = env.reset(5);
    expect(Array.from(o0.state.slice(0, n))).toEqual(Array.from(p0.state));
    // Before any command: the reset's holding command, in every slot.
    const hold = Array.from(o0.state.slice(n, n + A));
    expect(Array.from(o0.state.slice(n))).toEqual([...hold, ...hold, ...hold]);

    const sent = [[0.5, -0.25], [2, -3], [-0.75, 0.125], [0.25, 0.5]];
    const tails: number[][] = [];
    for (const a of sent) {
      const p = plain.step(a), r = env.step(a);
      expect(Array.from(r.obs.state.slice(0, n))).toEqual(Array.from(p.obs.state));
      expect(r.reward).toBe(p.reward);
      tails.push(Array.from(r.obs.state.slice(n)));
    }
    expect(tails[2]).toEqual([-0.75, 0.125, 1, -1, 0.5, -0.25]);
    expect(tails[3]).toEqual([0.25, 0.5, -0.75, 0.125, 1, -1]);

    // The history is part of the env's state: restored with it, and a state without one is refused by name.
    const s = env.getState();
    env.step([0, 0]);
    env.setState(s);
    expect(Array.from(env.step([0, 0]).obs.state.slice(n + A))).toEqual([0.25, 0.5, -0.75, 0.125]);
    expect(() => env.setState(plain.getState())).toThrow(/last 3 commands/);
  });

  it('rejects a command history that is not a whole number >= 0, naming it', async () => {
    await expect(makeEnv({ task: 'reach', commandHistory: -1 })).rejects.toThrow(/commandHistory must be a whole number >= 0, got -1/);
    await expect(makeEnv({ task: 'reach', commandHistory: 1.5 })).rejects.toThrow(/commandHistory/);
  });

  it('reaches every part the trainers build from the sim: the sim robot, prompts, held-out evaluation and the world model', async () => {
    using plain = await makeEnv({ task: 'reach', profile: 'gap' });
    const n = plain.observationSpace.state.shape[0], D = n + 6;
    await using robot = await SimRobot.create({ task: 'reach', profile: 'gap', seed: 1, commandHistory: 3 });
    expect(robot.spec.features!.slice(-2)).toEqual(['shoulder command t-3', 'elbow command t-3']);
    await robot.reset({ seed: 2 });
    await robot.act(Float32Array.from([0.5, -0.5]));
    const x = buildObservation(robot.env.layout, await robot.observe());
    expect(x.length).toBe(D);
    expect(Array.from(x.slice(n, n + 2))).toEqual([0.5, -0.5]);

    using prompts = await SimPrompts.create('reach', 'gap', { commandHistory: 3 });
    expect(prompts.get(4).startObs.length).toBe(D);

    const policy = new GaussianPolicy({ obsDim: D, actDim: 2, hidden: [8], seed: 0 });
    const ev = await evaluateSuccess(policy, 'reach', 'gap', 2, 9_000_000, { commandHistory: 3 });
    expect(ev.episodes).toBe(2);
    // One outcome per start state, in order, and success their mean: what paired comparisons of two policies read.
    expect(ev.outcomes).toHaveLength(2);
    expect(ev.outcomes!.every((x) => x === 0 || x === 1)).toBe(true);
    expect(ev.success).toBe((ev.outcomes![0]! + ev.outcomes![1]!) / 2);
    await policy.release();

    const { model, simData } = await pretrainWorldModel({ ...DEFAULT_PRETRAIN, task: 'reach', wmEpisodes: 2, wmEpochs: 1, wmHidden: [8], wmMembers: 2, fit: false, commandHistory: 3 });
    expect(model.config.dObs).toBe(D);
    expect(model.commandHistory).toBe(3);
    expect(simData.obs.length % D).toBe(0);
    await model.release();

    // The twin renders those states: the commands do not move the scene, so the image is the one without them.
    using twin = await SceneTwin.create('reach', 16, { commandHistory: 3 });
    using plainTwin = await SceneTwin.create('reach', 16);
    expect(twin.layout).toEqual(robot.env.layout);
    const o = prompts.get(4).startObs, shifted = Float32Array.from(o);
    shifted.fill(0.9, n);
    expect(Array.from(twin.render(shifted))).toEqual(Array.from(plainTwin.render(o.slice(0, n))));
    expect(() => plainTwin.render(o)).toThrow(/not a positive multiple/);
    await expect(SceneTwin.create('reach', 16, { commandHistory: -2 })).rejects.toThrow(/commandHistory must be a whole number >= 0, got -2/);
  });
});
