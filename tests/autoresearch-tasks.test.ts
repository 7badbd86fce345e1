// The built-in tasks really execute in the sandbox (a classifier trained with nn/ on vega-datasets'
// Seattle weather, a PD controller on the MuJoCo reach task), deterministically and with scores
// that rank good proposals above bad ones; the agent's policy gradient moves it toward what scores
// well; both trainers run end to end (tiny budgets) through the sandbox and the wmrl/ core.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProposalPolicy, type ResearchRollout } from '../autoresearch/agent.js';
import { SandboxPool } from '../autoresearch/sandbox.js';
import { execute, type ResearchTask } from '../autoresearch/task.js';
import { classifierTask, loadWeather } from '../autoresearch/tasks/classifier.js';
import { controllerTask } from '../autoresearch/tasks/controller.js';
import { trainStandard } from '../autoresearch/train_standard.js';
import { trainWmrl } from '../autoresearch/train_wmrl.js';
import { Rng } from '../nn/rng.js';

let pool: SandboxPool;
beforeAll(() => { pool = SandboxPool.create({ slots: 2 }); });
afterAll(async () => { await pool?.close(); });

describe('built-in tasks', () => {
  it('the weather data: 1461 days, fixed 60/20/20 split, five classes', () => {
    const d = loadWeather();
    expect(d.y.length).toBe(1461);
    expect(d.split.train.length + d.split.val.length + d.split.test.length).toBe(1461);
    expect(new Set([...d.split.train, ...d.split.val, ...d.split.test]).size).toBe(1461);
    expect(new Set(d.y).size).toBe(5);
  });

  it('classifier search: executions are deterministic and a good architecture beats a bad one on the held-out split', async () => {
    const good = { hidden: 32, layers: 1, activation: 'tanh', lr: 0.1, epochs: 10, batch: 128 };
    const bad = { hidden: 2, layers: 3, activation: 'relu', lr: 1e-4, epochs: 1, batch: 512 };
    const [g1, g2, b] = await Promise.all([execute(pool, classifierTask, good, 0), execute(pool, classifierTask, good, 0), execute(pool, classifierTask, bad, 0)]);
    expect(g1.reason).toBeNull();
    expect(g1.score).toBe(g2.score);
    expect(g1.score!).toBeGreaterThan(0.4);
    expect(g1.score!).toBeGreaterThan(b.score! + 0.15);
    expect(g1.output).toMatchObject({ steps: 10 * Math.floor(876 / 128) });
    expect(g1.output!.test as number).toBeGreaterThan(0.3);
  }, 60_000);

  it('controller research: well-damped gains reach, undamped stiff gains fail and pay for their effort', async () => {
    const [ok, stiff] = await Promise.all([
      execute(pool, controllerTask, { kp: 1, kd: 0.4, reachScale: 1 }, 0),
      execute(pool, controllerTask, { kp: 25, kd: 0, reachScale: 1 }, 0),
    ]);
    expect(ok.output).toMatchObject({ successRate: 1 });
    expect(ok.score!).toBeGreaterThan(0.8);
    expect(stiff.output).toMatchObject({ successRate: 0 });
    expect(stiff.score!).toBeLessThan(0);
  }, 60_000);
});

/** A cheap task: the score is the sum of two fields' positions, known in advance. */
const TOY: ResearchTask = {
  name: 'toy',
  fields: [{ name: 'a', choices: [0, 1, 2, 3] }, { name: 'b', choices: ['x', 'y', 'z'] }],
  program: { kind: 'source', code: `export default ({ proposal }) => ({ score: proposal.a / 3 + (proposal.b === 'z' ? 1 : 0) })` },
  metric: 'a/3 + [b = z]',
  limits: { timeoutMs: 10_000 },
  seeds: 1,
};

describe('the agent', () => {
  it('its policy gradient moves probability toward proposals with positive advantage', () => {
    const policy = new ProposalPolicy(TOY);
    const rng = new Rng(5);
    for (let t = 0; t < 60; t++) {
      const group: ResearchRollout[] = Array.from({ length: 8 }, () => policy.sample('c', rng));
      const s = group.map((r) => Number(r.proposal.a) / 3 + (r.proposal.b === 'z' ? 1 : 0));
      const m = s.reduce((a, b) => a + b, 0) / s.length;
      policy.update([group], [s.map((x) => x - m)], [s.map(() => 1)], 1);
    }
    expect(policy.greedy('c')).toEqual({ a: 3, b: 'z' });
    expect(policy.probs('c', 1)[2]!).toBeGreaterThan(0.8);
    expect(policy.greedy('other')).toEqual({ a: 0, b: 'x' }); // an untouched context is still uniform (first choice wins ties)
  });

  it('standard GRPO and WMRL train it end to end through the sandbox; WMRL executes only its anchors', async () => {
    const args = { task: TOY, executor: pool, groupsPerStep: 4, groupSize: 4, lr: 1, seed: 0, steps: 3 };
    const std = await trainStandard(args);
    expect(std.log).toHaveLength(3);
    expect(std.log[2]!.executions).toBe(3 * 16);
    expect(std.log[2]!.slotSeconds).toBeGreaterThan(0);
    expect(std.log[2]!.failedExecutions).toBe(0);
    const wm = await trainWmrl({ ...args, warmup: 8, corrector: { anchors: { fraction: 0.25, floor: 1 }, debias: { minPairs: 8, refitEvery: 4 } } });
    expect(wm.log).toHaveLength(3);
    // 8 warm-up executions, then one anchor group of 4 per step.
    expect(wm.log[2]!.executions).toBe(8 + 3 * 4);
    expect(wm.log[2]!.anchorFraction).toBe(0.25);
    const pure = await trainWmrl({ ...args, warmup: 8, corrector: { anchors: { fraction: 0, floor: 0 }, debias: false, denoise: false } });
    expect(pure.log[2]!.executions).toBe(8);
  }, 120_000);

  it('WMRL with fewer anchors than one group per step: steps without an anchor execute nothing and still train the policy', async () => {
    // The autoresearch bench's regime: no per-step floor, an anchor fraction below 1/groupsPerStep.
    const wm = await trainWmrl({ task: TOY, executor: pool, groupsPerStep: 4, groupSize: 4, lr: 1, seed: 1, steps: 8, warmup: 4, corrector: { anchors: { fraction: 1 / 8, floor: 0 } } });
    let before = { executions: 4, slot: wm.log[0]!.slotSeconds, entropy: Math.log(4) / 2 + Math.log(3) / 2 };
    let withoutAnchor = 0;
    for (const l of wm.log) {
      const anchors = Math.round(l.anchorFraction * 4);
      expect(l.executions).toBe(before.executions + 4 * anchors);
      if (anchors === 0) {
        withoutAnchor++;
        expect(l.slotSeconds).toBe(before.slot);
        expect(l.entropy).not.toBeCloseTo(before.entropy, 6); // the world model's advantages moved the policy
      }
      before = { executions: l.executions, slot: l.slotSeconds, entropy: l.entropy };
    }
    expect(withoutAnchor).toBeGreaterThan(0);
    expect(wm.log.at(-1)!.executions).toBeLessThan(4 + 8 * 4 * 4 / 2);
  }, 120_000);
});
