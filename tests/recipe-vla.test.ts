// The VLA recipe (recipes/vla.ts): its config is checked against one schema with every bad field named, and filled
// with the task's own defaults; a tiny-budget run goes clone → world model → WMRL → evaluation → an ONNX artifact that
// the robot's runtime loads and runs.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SimRobot } from '../hardware/robots/sim.js';
import { OnnxPolicy } from '../policies/onnx-policy.js';
import { robotEntries } from '../common/layout.js';
import { makeEnv } from '../sim/index.js';
import { ANCHORS, UPDATES, VLA_CLONE, VLA_PROPRIO, gapRobot, makeVla, runVla, vlaRecipe } from '../recipes/vla.js';

const dir = mkdtempSync(join(tmpdir(), 'recipe-vla-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('vlaRecipe', () => {
  it('fills in each task\'s own defaults', () => {
    const push = vlaRecipe({ task: 'push' });
    expect(push).toMatchObject({ seed: 0, quick: false, hidden: [128, 128], updates: UPDATES.push, clone: VLA_CLONE.full.push, logStd: -1.6, prompts: 16, groupSize: 8 });
    expect(push.wmrl.anchorScore).toBe(ANCHORS.push.score);
    const reach = vlaRecipe({ task: 'reach', quick: true, seed: 3 });
    expect(reach).toMatchObject({ seed: 3, quick: true, hidden: [64, 64], updates: 2, clone: VLA_CLONE.quick.reach, logStd: null });
    expect(reach.wmrl.anchorScore).toBe('robot');
    expect(reach.pg.klCoef).toBeUndefined();
    // the VLA's proprioception is the robot's own state unless the config says otherwise
    expect(VLA_PROPRIO).toBe('robot');
    expect(push.proprio).toBe('robot');
    expect(reach.proprio).toBe('robot');
  });

  it("makeVla builds the recipe's VLA: by default over the gap robot's own entries (joints, tip, the commands it sent)", async () => {
    const env = await makeEnv(gapRobot('reach'));
    try {
      const D = env.observationSpace.state.shape[0];
      const own = makeVla(env)(new Array<number>(D).fill(0), new Array<number>(D).fill(1)), all = makeVla(env, [8], 'all')(new Array<number>(D).fill(0), new Array<number>(D).fill(1));
      expect(own.config.proprio).toBe('robot');
      expect(own.config.proprioEntries).toEqual(robotEntries(env.layout));
      // 2 joint positions, 2 velocities, the tip, the last 3 commands of 2 actuators
      expect(own.config.proprioEntries).toHaveLength(4 + 2 + 6);
      expect(all.config.proprioEntries).toHaveLength(D);
      await own.release();
      await all.release();
    } finally {
      env.dispose();
    }
  });

  it('takes the user\'s settings over the defaults', () => {
    const r = vlaRecipe({ task: 'reach', updates: 7, hidden: [32], proprio: 'all', rl: { klBeta: 0.5, logStd: -2, imagine: 'face' }, clone: { demos: 10, daggerRounds: 1, daggerEpisodes: 2, bcEpochs: 4 } });
    expect(r).toMatchObject({ updates: 7, hidden: [32], proprio: 'all', logStd: -2, imagine: 'face', clone: { demos: 10, daggerRounds: 1, daggerEpisodes: 2, bcEpochs: 4 } });
    expect(r.pg.klCoef).toBe(0.5);
  });

  it('refuses bad input, naming the field', () => {
    expect(() => vlaRecipe({ task: 'lift' })).toThrow(/task must be 'reach' or 'push'/);
    expect(() => vlaRecipe({ task: 'reach', groupSize: 1 })).toThrow(/groupSize must be in \[2, 256\], got 1/);
    expect(() => vlaRecipe({ task: 'reach', rl: { klBeta: -1 } })).toThrow(/rl\.klBeta must be in \[0, 100\], got -1/);
    expect(() => vlaRecipe({ task: 'reach', lr: 1 })).toThrow(/lr unknown key/);
    expect(() => vlaRecipe({ seed: 0 })).toThrow(/task missing/);
    expect(() => vlaRecipe({ task: 'reach', proprio: 'scene' })).toThrow(/proprio must be 'robot' or 'all'/);
    expect(() => vlaRecipe({ task: 'reach', clone: { demos: 2, daggerRounds: 1, daggerEpisodes: 2, bcEpochs: 1 } })).toThrow(/clone\.demos \(2\) must exceed/);
  });
});

describe('runVla', () => {
  it('post-trains a VLA at a tiny budget and exports an artifact the robot runs', async () => {
    const out = join(dir, 'run');
    const r = await runVla({ task: 'reach', quick: true, updates: 1 }, out);
    expect(r.rows).toHaveLength(1);
    // quick: one anchor group of 2 a update on the robot.
    expect(r.robotEpisodes).toBe(2);
    expect(r.clone.heldOutStates.episodes).toBe(5);
    expect(r.stopped).toBe(false);
    expect(r.wmrl!.heldOutCombinations.episodes).toBe(5);
    expect(r.policyPath).toBe(join(out, 'policy.onnx'));
    expect(existsSync(join(out, 'episodes.db'))).toBe(true);
    // The trainer's checkpoint, written after every update.
    for (const f of ['state.json', 'pg.safetensors', 'world_model.safetensors', 'history.json']) expect(existsSync(join(out, f)), f).toBe(true);
    const robot = await SimRobot.create({ ...gapRobot('reach'), seed: 0 });
    try {
      const deployed = await OnnxPolicy.load(r.policyPath, robot.spec);
      const obs = await robot.reset({ seed: 9_000_000 });
      const a = await deployed.act(obs);
      expect(a).toHaveLength(robot.spec.action.names.length);
      expect(a.every(Number.isFinite)).toBe(true);
      // the recipe's VLA reads the robot's own state: moving every target and the goal offset leaves its action
      const moved = Float32Array.from(obs.features!, (x, i) => (robot.env.layout.features[i]!.scene ? x + 0.05 : x));
      expect(Array.from(await deployed.act({ ...obs, features: moved }))).toEqual(Array.from(a));
    } finally {
      await robot[Symbol.asyncDispose]();
    }
  }, 300_000);
});
