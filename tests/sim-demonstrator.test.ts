// The robust demonstrator (Env.demonstrator): succeeds on the gap robot where the nominal expert fails, on
// the same seeds; its actuation predictor identifies a delayed joint's gain and predicts through the
// commands in flight; tasks without one, and bad latencies, are named errors.
import { describe, expect, it } from 'vitest';
import { makeEnv } from '../sim/registry.js';
import { ActuationPredictor } from '../sim/tasks/arm.js';
import type { Env, Expert } from '../sim/types.js';

/** Fraction of episodes from `seeds` the controller made by `make` ends in success. */
function successOn(env: Env, seeds: number[], make: () => Expert): number {
  let ok = 0;
  for (const seed of seeds) {
    let o = env.reset(seed);
    const c = make();
    for (;;) {
      const r = env.step(c.act(o));
      o = r.obs;
      if (r.terminated || r.truncated) {
        if (r.info.success) ok++;
        break;
      }
    }
  }
  return ok / seeds.length;
}

describe('robust demonstrator', () => {
  const seeds = Array.from({ length: 30 }, (_, i) => 9_000_000 + i);
  for (const task of ['reach', 'push']) {
    it(`${task}: on the gap robot >= 50% and >= 40 points over the nominal expert on the same 30 seeds; >= 90% on nominal`, async () => {
      const gap = await makeEnv({ task, profile: 'gap' });
      const nominal = await makeEnv({ task, profile: 'nominal' });
      try {
        const demo = successOn(gap, seeds, () => gap.demonstrator({ latencySteps: 3 }));
        const expert = successOn(gap, seeds, () => gap.expert());
        expect(demo).toBeGreaterThanOrEqual(0.5);
        expect(demo).toBeGreaterThanOrEqual(expert + 0.4);
        expect(successOn(nominal, seeds.slice(0, 15), () => nominal.demonstrator({ latencySteps: 0 }))).toBeGreaterThanOrEqual(0.9);
      } finally {
        gap.dispose();
        nominal.dispose();
      }
    });
  }

  it('the latency it is told matters: told 0 steps on the 3-step gap robot, reach does worse', async () => {
    const gap = await makeEnv({ task: 'reach', profile: 'gap' });
    try {
      const told = successOn(gap, seeds, () => gap.demonstrator({ latencySteps: 3 }));
      const blind = successOn(gap, seeds, () => gap.demonstrator({ latencySteps: 0 }));
      expect(told).toBeGreaterThan(blind);
    } finally {
      gap.dispose();
    }
  });

  it('a task without one, and a latency that is not a whole number of steps, are named errors', async () => {
    const pick = await makeEnv({ task: 'pick' });
    const reach = await makeEnv({ task: 'reach' });
    try {
      expect(() => pick.demonstrator({ latencySteps: 0 })).toThrow(/pick: the task has no robust demonstrator/);
      expect(() => reach.demonstrator({ latencySteps: 1.5 })).toThrow(/latencySteps must be a whole number/);
      expect(() => reach.demonstrator({ latencySteps: -1 })).toThrow(/latencySteps must be a whole number/);
    } finally {
      pick.dispose();
      reach.dispose();
    }
  });
});

describe('ActuationPredictor', () => {
  // A joint qdd = b u − c qd whose commands act `L` steps after they are sent (exact Euler, as the predictor integrates).
  const b = 25, c = 2, L = 3, dt = 0.02;
  function run(steps: number, report: (pr: ActuationPredictor, sentByController: number, executed: number) => void) {
    const pr = new ActuationPredictor(1, L, dt, 60, 60);
    const queue = [0, 0, 0];
    let q = 0, qd = 0, seed = 1;
    const rand = () => ((seed = (seed * 16807) % 2147483647) / 2147483647) * 2 - 1;
    for (let t = 0; t < steps; t++) {
      pr.observe([qd]);
      const mine = rand(), executed = Math.max(-1, Math.min(1, mine + 0.5 * rand()));
      pr.record([mine]);
      report(pr, mine, executed);
      queue.push(executed);
      const u = queue.shift()!;
      qd += (b * u - c * qd) * dt;
      q += qd * dt;
    }
    return { q, qd, queue };
  }

  it('identifies the gain and damping of a delayed joint, and predicts through the commands in flight', () => {
    let pr!: ActuationPredictor;
    const end = run(400, (p, _mine, executed) => {
      pr = p;
      p.record([executed], true);
    });
    const id = pr.identified(0);
    expect(Math.abs(id.gain - b) / b).toBeLessThan(0.05);
    expect(Math.abs(id.damping - c)).toBeLessThan(0.5);
    expect(pr.scale(0)).toBeCloseTo(60 / id.gain, 10);
    // Carry the true state through the queue by hand; the prediction from the last observation must match it.
    const truth = { q: end.q, qd: end.qd };
    for (const u of end.queue) {
      truth.qd += (b * u - c * truth.qd) * dt;
      truth.q += truth.qd * dt;
    }
    pr.observe([end.qd]);
    const p = pr.predict([end.q], [end.qd]);
    expect(p.qd[0]!).toBeCloseTo(truth.qd, 1);
    expect(p.q[0]!).toBeCloseTo(truth.q, 2);
  });

  it('not told what was executed instead of its commands, it identifies the gain worse', () => {
    let told!: ActuationPredictor, untold!: ActuationPredictor;
    run(400, (p, _m, executed) => {
      told = p;
      p.record([executed], true);
    });
    run(400, (p) => {
      untold = p;
    });
    expect(Math.abs(untold.identified(0).gain - b)).toBeGreaterThan(2 * Math.abs(told.identified(0).gain - b));
  });
});
