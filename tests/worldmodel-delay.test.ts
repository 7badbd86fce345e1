// Actuation delay the model never saw: identified from episodes by the model's one-step likelihood, and
// applied by the model env (step() and the fused imagine() alike) and by the anchors' replays.
import { describe, expect, it } from 'vitest';
import * as nn from '../nn/index.js';
import { delayedEpisodes } from './helpers/delayed-system.js';
import { EnsembleModel, ModelEnv, TransitionBuffer, delayActions, identifyDelay, replayScore, type GraphPolicy } from '../worldmodel/index.js';

/** A model of the undelayed system (what a sim gives), conditioning on one past action. */
async function undelayedModel(): Promise<EnsembleModel> {
  const buf = new TransitionBuffer(1, 1, 1);
  for (const e of delayedEpisodes(80, 20, 1, 0)) buf.addEpisode(e);
  const m = new EnsembleModel({ dObs: 1, dAct: 1, members: 3, hidden: [32, 32], actionHistory: 1, seed: 0 });
  await m.fit(buf.transitions(), { epochs: 30, lr: 3e-3, seed: 0 });
  return m;
}

/**
 * The same episodes observed as a robot made with a command tail reports them (sim/env.ts commandHistory 1): the
 * state, then the last command sent (0 before the first).
 */
function withCommandTail(eps: ReturnType<typeof delayedEpisodes>): ReturnType<typeof delayedEpisodes> {
  return eps.map((e) => {
    const T = e.actions.length, states = new Float32Array(2 * (T + 1));
    for (let t = 0; t <= T; t++) {
      states[2 * t] = e.states[t]!;
      states[2 * t + 1] = t > 0 ? e.actions[t - 1]! : 0;
    }
    return { ...e, states };
  });
}

/** An open-loop policy: the action is the noise input. */
const openLoop: GraphPolicy = { store: new nn.ParamStore(0), noiseDim: 1, build: (_obs, noise) => ({ action: noise! }) };

describe('delayActions', () => {
  it('shifts each rollout by the delay, zeros first, rollouts kept apart', () => {
    const a = Float32Array.of(1, 10, 2, 20, 3, 30, 4, 40, 5, 50, 6, 60); // N = 2, H = 3, dAct = 2
    expect(Array.from(delayActions(a, 2, 2, 1))).toEqual([0, 0, 1, 10, 2, 20, 0, 0, 4, 40, 5, 50]);
    expect(Array.from(delayActions(a, 2, 2, 0))).toEqual(Array.from(a));
    expect(Array.from(delayActions(a, 2, 2, 5))).toEqual(new Array(12).fill(0));
    expect(() => delayActions(a, 5, 2, 1)).toThrow('not N x H x dAct');
    expect(() => delayActions(a, 2, 2, -1)).toThrow('delay must be a non-negative integer');
  });
});

describe('a robot that applies actions two steps late, a model of the undelayed sim', () => {
  it('identifyDelay finds the delay: the one-step NLL is lowest at d = 2', async () => {
    const m = await undelayedModel();
    const est = await identifyDelay(m, delayedEpisodes(8, 20, 7, 2), 4);
    expect(est.nll).toHaveLength(5);
    expect(est.delay).toBe(2);
    // On the undelayed system itself it finds none.
    expect((await identifyDelay(m, delayedEpisodes(8, 20, 8, 0), 4)).delay).toBe(0);
    await expect(identifyDelay(m, [], 4)).rejects.toThrow('no episode with a step');
    await m.release();
  }, 60_000);

  it('with the command tail in the observation: the tail is no input of the model, and identifyDelay still finds d = 2', async () => {
    const buf = new TransitionBuffer(2, 1, 1);
    for (const e of withCommandTail(delayedEpisodes(80, 20, 1, 0))) buf.addEpisode(e);
    const m = new EnsembleModel({ dObs: 2, dAct: 1, members: 3, hidden: [32, 32], actionHistory: 1, commandHistory: 1, seed: 0 });
    await m.fit(buf.transitions(), { epochs: 30, lr: 3e-3, seed: 0 });
    // On the sim the tail equals the last applied action; on a robot with latency it runs ahead of it, a combination
    // the sim never showed: the model must not read it.
    const p = async (tail: number) => Array.from((await m.predict(Float32Array.of(0.3, tail), Float32Array.of(0.5), Float32Array.of(-0.2))).nextObsMean).filter((_, k) => k % 2 === 0);
    expect(await p(0.9)).toEqual(await p(-0.9));
    // The tail is no dynamics either: identification scores the state alone.
    expect(m.dynamicsDims).toEqual([0]);
    const est = await identifyDelay(m, withCommandTail(delayedEpisodes(8, 20, 7, 2)), 4);
    expect(est.delay).toBe(2);
    expect((await identifyDelay(m, withCommandTail(delayedEpisodes(8, 20, 8, 0)), 4)).delay).toBe(0);
    await m.release();
  }, 60_000);

  it('the model env with actionDelay = 2 imagines the delayed robot; step() and the fused imagine() agree, and equal feeding the delayed actions', async () => {
    const m = await undelayedModel();
    const test = delayedEpisodes(6, 20, 9, 2);
    const N = test.length, H = 20;
    const start = Float32Array.from(test, (e) => e.states[0]!);
    const sent = new Float32Array(N * H);
    test.forEach((e, i) => sent.set(e.actions, i * H));
    const members = Int32Array.from({ length: N }, (_, i) => i % 3);
    const mse = (obs: Float32Array) => {
      let s = 0;
      test.forEach((e, i) => { for (let t = 1; t <= H; t++) s += (obs[i * (H + 1) + t]! - e.states[t]!) ** 2; });
      return s / (N * H);
    };
    const delayed = new ModelEnv(m, { members: 'fixed', actionDelay: 2 });
    const plain = new ModelEnv(m, { members: 'fixed' });
    const im = await delayed.imagine(start, openLoop, H, { members, policyNoise: sent, stepsPerRun: 7 });
    // The fused graph returns the actions sent (what the policy gradient needs), not the applied ones.
    expect(Array.from(im.action)).toEqual(Array.from(sent));
    const viaShift = await plain.imagine(start, openLoop, H, { members, policyNoise: delayActions(sent, N, 1, 2) });
    for (let i = 0; i < im.obs.length; i++) expect(im.obs[i]).toBeCloseTo(viaShift.obs[i]!, 5);
    delayed.reset(start, { members });
    for (let t = 0; t < H; t++) {
      const s = await delayed.step(Float32Array.from({ length: N }, (_, i) => sent[i * H + t]!));
      for (let i = 0; i < N; i++) expect(s.obs[i]).toBeCloseTo(im.obs[i * (H + 1) + t + 1]!, 5);
    }
    const undelayed = await plain.imagine(start, openLoop, H, { members, policyNoise: sent });
    expect(mse(im.obs)).toBeLessThan(mse(undelayed.obs) / 5);
    // The anchors' replay applies the same delay.
    const r = await replayScore(m, start, sent, { actionDelay: 2 });
    const rShift = await replayScore(m, start, delayActions(sent, N, 1, 2));
    for (let i = 0; i < N; i++) expect(r.score[i]).toBeCloseTo(rShift.score[i]!, 5);
    expect(() => new ModelEnv(m, { actionDelay: 1.5 })).toThrow('actionDelay must be a non-negative integer');
    await delayed.release();
    await plain.release();
    await m.release();
  }, 60_000);
});
