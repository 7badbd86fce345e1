// Recording real episodes as they happen: a policy on a robot through the safety layer, each step
// committed to the store; a safety stop ends the episode as partial, never silently.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EpisodeStore } from '../episodes/store/store.js';
import { runEpisode } from '../hardware/record.js';
import { SimRobot } from '../hardware/robots/sim.js';
import { DEFAULT_SAFETY, SafetyLayer } from '../hardware/safety.js';
import { simRobotTarget } from '../wmrl/sim-setup.js';

const dir = mkdtempSync(join(tmpdir(), 'record-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('runEpisode', () => {
  it('records every step of an expert episode on the sim robot, with the instruction given after reset', async () => {
    const sim = await SimRobot.create({ task: 'reach', seed: 5 });
    const robot = new SafetyLayer(sim, { ...DEFAULT_SAFETY, maxDelta: 2 }, { watchdog: false });
    const store = EpisodeStore.open(join(dir, 'a.db'), { synchronous: 'NORMAL' });
    let expert = sim.env.expert();
    const out = await runEpisode({
      robot,
      store,
      maxSteps: 200,
      realTime: false,
      policy: () => expert.act(sim.lastObs),
      score: () => ({ reward: sim.lastStep!.reward, done: sim.lastStep!.terminated || sim.lastStep!.truncated, success: sim.lastStep!.info.success }),
      meta: { robot: robot.spec.name, policyVersion: 'expert', hardwareProfile: 'nominal', task: 'reach' },
    });
    expect(out.status).toBe('complete');
    expect(out.success).toBe(true);
    const e = store.get(out.id);
    expect(e.steps).toHaveLength(out.steps);
    expect(e.meta.instruction).toBe(sim.lastObs.instruction);
    expect(e.steps.at(-1)!.done).toBe(true);
    expect(e.steps.at(-1)!.success).toBe(true);
    expect(e.steps.every((s, i) => s.seq === i && s.tAct >= s.tObs && s.obs.features!.length === robot.spec.features!.length)).toBe(true);
    expect(e.steps.reduce((r, s) => r + s.reward, 0)).toBeCloseTo(out.return, 4);
    // A second episode gets a new expert and a new instruction layout.
    expert = sim.env.expert();
    const out2 = await runEpisode({ robot, store, maxSteps: 5, realTime: false, policy: () => expert.act(sim.lastObs), meta: { robot: 'sim', policyVersion: 'expert', hardwareProfile: 'nominal' } });
    expect(store.get(out2.id).steps).toHaveLength(5);
    store.close();
    await robot[Symbol.asyncDispose]();
  });

  it('an e-stop mid-episode stops it and stores it as partial with its committed steps', async () => {
    const sim = await SimRobot.create({ task: 'push', seed: 1 });
    const robot = new SafetyLayer(sim, DEFAULT_SAFETY, { watchdog: false });
    const store = EpisodeStore.open(join(dir, 'b.db'), { synchronous: 'NORMAL' });
    let n = 0;
    const out = await runEpisode({
      robot,
      store,
      maxSteps: 100,
      realTime: false,
      policy: async () => {
        if (++n === 8) await robot.estop('operator');
        return Float32Array.of(0.1, 0.1);
      },
      meta: { robot: 'sim', policyVersion: 'p', hardwareProfile: 'nominal' },
    });
    expect(out).toMatchObject({ status: 'partial', stoppedBy: 'estop', steps: 7 });
    const s = store.list().find((x) => x.meta.id === out.id)!;
    expect(s.status).toBe('partial');
    expect(s.steps).toBe(7);
    store.close();
    await robot[Symbol.asyncDispose]();
  });

  it('a sim stepped as fast as it goes runs what a slow policy computed: the trainers\' target reads the sim\'s clock', async () => {
    // A policy call that takes longer than the stale-command limit (a slow host, a garbage-collection pause): the sim
    // waits for it, so the command is not stale on the robot's clock, and the episode is the one a fast host gives.
    const run = async (slowMs: number) => {
      const target = await simRobotTarget({ task: 'reach', profile: 'nominal', robots: 1, resetSeconds: 0, seed: 0 });
      const sent: number[] = [];
      let n = 0;
      await runEpisode({
        robot: target.robot, maxSteps: 4, realTime: false, reset: { seed: 11 },
        policy: async () => {
          if (++n === 2 && slowMs > 0) await new Promise((r) => setTimeout(r, slowMs));
          return Float32Array.of(0.6, -0.4);
        },
        onSent: (a) => sent.push(...a),
        meta: { robot: 'sim', policyVersion: 'p', hardwareProfile: 'nominal' },
      });
      const stale = target.robot.counts.rejected_stale;
      await target.close();
      return { sent, stale };
    };
    const fast = await run(0), slow = await run(DEFAULT_SAFETY.maxCommandAgeMs + 60);
    expect(slow.stale).toBe(0);
    expect(slow.sent).toEqual(fast.sent);
    expect(slow.sent.slice(2, 4)).toEqual([Math.fround(0.6), Math.fround(-0.4)]);
    // On the host's clock (a robot in real time) the same delay makes the command stale: the robot holds instead.
    const sim = await SimRobot.create({ task: 'reach', profile: 'nominal' });
    const robot = new SafetyLayer(sim, { ...DEFAULT_SAFETY, maxDelta: 2 }, { watchdog: false });
    const held: number[] = [];
    let n = 0;
    await runEpisode({
      robot, maxSteps: 2, realTime: false, reset: { seed: 11 },
      policy: async () => { if (++n === 2) await new Promise((r) => setTimeout(r, DEFAULT_SAFETY.maxCommandAgeMs + 60)); return Float32Array.of(0.6, -0.4); },
      onSent: (a) => held.push(...a),
      meta: { robot: 'sim', policyVersion: 'p', hardwareProfile: 'nominal' },
    });
    expect(robot.counts.rejected_stale).toBe(1);
    expect(held.slice(2, 4)).not.toEqual([Math.fround(0.6), Math.fround(-0.4)]);
    await robot[Symbol.asyncDispose]();
  });
});

describe('SimRobot.act', () => {
  it('reports the command as sent (within [-1, 1], NaN as 0, none once stopped), not the action its actuators apply under the profile\'s latency', async () => {
    await using sim = await SimRobot.create({ task: 'reach', profile: 'gap' });
    await sim.reset({ seed: 3 });
    const commands = [[0.5, -0.5], [2, -3], [NaN, 0.25], [0.1, 0.2]];
    const sent: number[][] = [], applied: number[][] = [];
    for (const c of commands) {
      sent.push(Array.from(await sim.act(Float32Array.from(c))));
      applied.push(Array.from(sim.lastStep!.info.appliedAction));
    }
    expect(sent).toEqual([[0.5, -0.5], [1, -1], [0, 0.25], [Math.fround(0.1), Math.fround(0.2)]]);
    // The gap profile's actuators apply each command 3 steps after it is sent.
    expect(applied[3]).toEqual([0.5, -0.5]);
    expect(applied[3]).not.toEqual(sent[3]);
    await sim.estop();
    expect(Array.from(await sim.act(Float32Array.of(0.7, 0.7)))).toEqual([0, 0]);
  });
});
