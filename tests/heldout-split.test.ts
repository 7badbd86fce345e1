// Held-out evaluation by (instruction, target region): the split (sim/split.ts) keeps the held-out
// combinations out of the training seeds while every colour and every region still appears there, draws
// its evaluation seeds from outside the training range, and reproduces from its seeds; evaluateHeldOut
// (policies/demos.ts) measures a policy on the held-out states and the held-out combinations apart, and a
// Gaussian MLP behaviour-cloned on the training seeds of `reach` beats the untrained one on both.
import { describe, expect, it } from 'vitest';
import { combinationSplit, makeEnv, regionOf, type MjEnv } from '../sim/index.js';
import { GaussianPolicy } from '../policies/gaussian.js';
import { behaviourClone } from '../policies/bc.js';
import { chanceOutcomes, evaluateHeldOut, evaluateOn, expertDemonstrationsOn } from '../policies/demos.js';
import type { Policy, PolicyContext } from '../policies/types.js';
import { dlsReach } from '../sim/tasks/arm.js';
import { COLOURS } from '../sim/tasks/layout.js';
import { observationStats } from '../policies/episode-demos.js';

describe('the (instruction, target region) split', () => {
  it('regions are equal angular sectors around the base', () => {
    expect(regionOf(-1, -1e-9, 4)).toBe(0);
    expect(regionOf(0, -1, 4)).toBe(1);
    expect(regionOf(1, 0, 4)).toBe(2);
    expect(regionOf(-1, 1e-9, 4)).toBe(3);
    expect(regionOf(0, 1, 2)).toBe(1);
  });

  it.each(['reach', 'push'])('%s: held-out combinations never train; every colour and region does; evaluation seeds lie outside training', async (task) => {
    const split = await combinationSplit(task, { train: { seed0: 0, scan: 80 }, eval: { seed0: 5000, episodes: 8 } });
    expect(split.heldOut).toEqual([{ goal: 0, region: 0 }, { goal: 1, region: 1 }, { goal: 2, region: 2 }]);
    const env = await makeEnv({ task });
    const combo = (seed: number) => {
      const o = env.reset(seed);
      const k = split.instructions.indexOf(o.instruction);
      // the goal is the instruction's colour
      const g = (env as MjEnv).goalOf();
      expect(g.goal).toBe(k);
      return { goal: k, region: regionOf(g.position![0], g.position![1], split.regions) };
    };
    const held = (c: { goal: number; region: number }) => split.heldOut.some((h) => h.goal === c.goal && h.region === c.region);
    const train = split.train.map(combo);
    expect(train.some(held)).toBe(false);
    expect(split.train.length).toBeGreaterThan(40);
    expect(split.train.length).toBeLessThan(80); // some seeds were held out
    for (let k = 0; k < 3; k++) expect(train.some((c) => c.goal === k)).toBe(true);
    for (let r = 0; r < 4; r++) expect(train.some((c) => c.region === r)).toBe(true);
    expect(split.heldOutStates).toHaveLength(8);
    expect(split.heldOutCombinations).toHaveLength(8);
    expect(split.heldOutStates.map(combo).some(held)).toBe(false);
    expect(split.heldOutCombinations.map(combo).every(held)).toBe(true);
    for (const s of [...split.heldOutStates, ...split.heldOutCombinations]) expect(s).toBeGreaterThanOrEqual(5000);
    env.dispose();
    // the same options give the same split
    expect(await combinationSplit(task, { train: { seed0: 0, scan: 80 }, eval: { seed0: 5000, episodes: 8 } })).toEqual(split);
  });

  it('withheld combinations are neither trained on nor evaluated, so two evaluations with other held-out combinations share one training set', async () => {
    const a = [{ goal: 0, region: 0 }, { goal: 1, region: 1 }, { goal: 2, region: 2 }];
    const b = [{ goal: 0, region: 2 }, { goal: 1, region: 3 }, { goal: 2, region: 0 }];
    const first = await combinationSplit('reach', { heldOut: a, withheld: b, train: { seed0: 0, scan: 80 }, eval: { seed0: 5000, episodes: 6 } });
    const second = await combinationSplit('reach', { heldOut: b, withheld: a, train: { seed0: 0, scan: 80 }, eval: { seed0: 6000, episodes: 6 } });
    expect(second.train).toEqual(first.train);
    const env = await makeEnv({ task: 'reach' });
    const combo = (seed: number) => {
      env.reset(seed);
      const g = (env as MjEnv).goalOf();
      return { goal: g.goal, region: regionOf(g.position![0], g.position![1], 4) };
    };
    const among = (list: typeof a) => (c: { goal: number; region: number }) => list.some((h) => h.goal === c.goal && h.region === c.region);
    // Half the twelve combinations train; neither evaluation's held-out ones do.
    expect(first.train.map(combo).some((c) => among(a)(c) || among(b)(c))).toBe(false);
    expect(first.train.length).toBeLessThan(60);
    expect(first.heldOutCombinations.map(combo).every(among(a))).toBe(true);
    expect(second.heldOutCombinations.map(combo).every(among(b))).toBe(true);
    for (const s of [...first.heldOutStates, ...second.heldOutStates].map(combo)) expect(among(a)(s) || among(b)(s)).toBe(false);
    env.dispose();
    await expect(combinationSplit('reach', { heldOut: a, withheld: [a[1]!], train: { seed0: 0, scan: 10 }, eval: { seed0: 10, episodes: 5 } })).rejects.toThrow(/combination \(goal 1, region 1\) is both held out and withheld/);
    await expect(combinationSplit('reach', { withheld: [{ goal: 0, region: 4 }], train: { seed0: 0, scan: 10 }, eval: { seed0: 10, episodes: 5 } })).rejects.toThrow(/withheld combination \(goal 0, region 4\) is not one of 3 goals x 4 regions/);
  });

  it('refuses overlapping ranges and combinations that do not exist', async () => {
    await expect(combinationSplit('reach', { train: { seed0: 0, scan: 100 }, eval: { seed0: 50, episodes: 5 } })).rejects.toThrow(/evaluation seeds start at 50, inside the train range \[0, 100\)/);
    await expect(combinationSplit('reach', { heldOut: [{ goal: 3, region: 0 }], train: { seed0: 0, scan: 10 }, eval: { seed0: 10, episodes: 5 } })).rejects.toThrow(/\(goal 3, region 0\) is not one of 3 goals x 4 regions/);
  });
});

describe('evaluation on held-out states and held-out combinations', () => {
  it('reach: behaviour cloning on the training seeds beats the untrained policy on both held-out sets, measured apart', async () => {
    const split = await combinationSplit('reach', { train: { seed0: 0, scan: 120 }, eval: { seed0: 10_000, episodes: 12 } });
    const env = await makeEnv({ task: 'reach' });
    const demos = expertDemonstrationsOn(env, split.train);
    const D = env.observationSpace.state.shape[0];
    const { mean, std } = observationStats(demos.obs, D);
    const make = () => new GaussianPolicy({ obsDim: D, actDim: 2, obsMean: mean, obsStd: std, hidden: [128, 128], seed: 0 });
    const untrained = make(), bc = make();
    await behaviourClone(bc, demos, { epochs: 100, batchSize: 256 });
    const before = await evaluateHeldOut(env, untrained, split);
    const after = await evaluateHeldOut(env, bc, split);
    console.log(`reach held-out return (success): untrained ${before.heldOutStates.return.toFixed(1)} (${before.heldOutStates.success}) / ${before.heldOutCombinations.return.toFixed(1)} (${before.heldOutCombinations.success}); BC ${after.heldOutStates.return.toFixed(1)} (${after.heldOutStates.success}) / ${after.heldOutCombinations.return.toFixed(1)} (${after.heldOutCombinations.success})`);
    expect(after.heldOutStates.episodes).toBe(12);
    expect(after.heldOutCombinations.episodes).toBe(12);
    expect(after.heldOutStates.return).toBeGreaterThan(before.heldOutStates.return + 3);
    expect(after.heldOutCombinations.return).toBeGreaterThan(before.heldOutCombinations.return + 3);
    // each set is exactly the policy on its own seeds, with every episode's outcome in the seeds' order
    expect(after.heldOutCombinations).toEqual(await evaluateOn(env, bc, split.heldOutCombinations));
    expect(after.heldOutStates.outcomes).toHaveLength(12);
    expect(after.heldOutStates.outcomes.reduce((x, y) => x + y, 0) / 12).toBe(after.heldOutStates.success);
    const one = await evaluateOn(env, bc, [split.heldOutStates[3]!]);
    expect(one.outcomes).toEqual([after.heldOutStates.outcomes[3]]);
    const push = { ...split, task: 'push' };
    await expect(evaluateHeldOut(env, bc, push)).rejects.toThrow(/the split is of task 'push', the env runs 'reach'/);
    await bc.release();
    await untrained.release();
    env.dispose();
  });

  it('reach with shuffled instructions: a policy that follows what it is told falls to exactly its chance outcomes, one that reads the goal from the state does not', async () => {
    const env = await makeEnv({ task: 'reach' });
    // The scripted expert's reach steered to the target the instruction names (state: targets at 6 + 2i, the tip at 4), or to the goal the state gives (its goal - tip at 15).
    const reacher = (follow: boolean): Policy => ({
      kind: 'test', obsDim: 17, actDim: 2, chunk: 1, inputs: () => ({}),
      act: async (s: Float32Array, _noise: Float32Array, ctx?: PolicyContext) => {
        const i = COLOURS.findIndex((c) => ctx!.instructions![0]!.includes(c));
        const [dx, dy] = follow ? [s[6 + 2 * i]! - s[4]!, s[7 + 2 * i]! - s[5]!] : [s[15]!, s[16]!];
        const mean = dlsReach(s[0]!, s[1]!, s[2]!, s[3]!, dx, dy, 6, 0.4);
        return { action: mean, mean, logProb: Float32Array.of(0) };
      },
    }) as unknown as Policy;
    const seeds = Array.from({ length: 24 }, (_, k) => 20_000 + k);
    const follower = reacher(true), stateReader = reacher(false);
    const own = await evaluateOn(env, follower, seeds);
    const shuffled = await evaluateOn(env, follower, seeds, { shuffleInstructions: { seed: 7 } });
    expect(own.success).toBeGreaterThan(0.8);
    expect(own.shuffled).toBeUndefined();
    expect(shuffled.shuffled!.choices).toBe(3);
    const m = shuffled.shuffled!.matched, drawnOwn = m.reduce((a, b) => a + b, 0);
    expect(drawnOwn).toBeGreaterThan(2);
    expect(drawnOwn).toBeLessThan(seeds.length - 2);
    // where the draw named another target the follower went there: its outcomes are its chance outcomes, episode by episode
    expect(shuffled.outcomes).toEqual(chanceOutcomes(own, shuffled));
    expect(shuffled.success).toBeLessThan(own.success - 0.2);
    // the same draws for every policy on the same seeds; a state reader is not fooled
    const other = await evaluateOn(env, stateReader, seeds, { shuffleInstructions: { seed: 7 } });
    expect(other.shuffled!.matched).toEqual(m);
    expect(other.outcomes).toEqual((await evaluateOn(env, stateReader, seeds)).outcomes);
    expect((await evaluateOn(env, follower, seeds, { shuffleInstructions: { seed: 8 } })).shuffled!.matched).not.toEqual(m);
    expect(() => chanceOutcomes(own, own)).toThrow(/did not shuffle its instructions/);
    expect(() => chanceOutcomes({ ...own, outcomes: own.outcomes.slice(1) }, shuffled)).toThrow(/23 episodes with their own instructions, 24 shuffled/);
    env.dispose();
  });
});
