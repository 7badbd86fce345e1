// Behaviour cloning from recorded episodes: expert episodes with camera images recorded in the episode
// store give exactly the demonstrations the sim's expert gives; the same episodes exported to MCAP and to
// a LeRobot v3.0 dataset give them again; a layout, action or image mismatch is refused with an error
// naming it; `wmrl bc` trains a VLA from the store and writes an artifact onnx.checker accepts and the
// robot it was made for runs.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { cameraRgb } from '../common/image.js';
import type { ObservationLayout } from '../common/layout.js';
import { exportLeRobot } from '../episodes/lerobot/export.js';
import { exportEpisode } from '../episodes/mcap/export.js';
import { EpisodeStore } from '../episodes/store/store.js';
import type { Episode } from '../episodes/types.js';
import { SimRobot } from '../hardware/robots/sim.js';
import { expertDemonstrations } from '../policies/demos.js';
import { demonstrationsFromEpisodes, loadEpisodes, parseEpisodeSource } from '../policies/episode-demos.js';
import { OnnxPolicy } from '../policies/onnx-policy.js';
import { makeEnv } from '../sim/index.js';
import { onnxCheck } from './helpers/onnx-check.js';

const dir = mkdtempSync(join(tmpdir(), 'bc-episodes-'));
const S = 24, SEEDS = [40, 41, 42];
const wmrl = (...args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', 'bin/wmrl.ts', ...args], { encoding: 'utf8', timeout: 120_000 });

let robot: SimRobot, layout: ObservationLayout, db: string;
beforeAll(async () => {
  robot = await SimRobot.create({ task: 'reach', image: S });
  layout = robot.env.layout;
  db = join(dir, 'episodes.db');
  const store = EpisodeStore.open(db);
  // the scripted expert's episodes, recorded as a robot's would be (observations in robot terms, PNG-free rgb8)
  for (const seed of SEEDS) {
    const env = robot.env;
    let o = env.reset(seed);
    const expert = env.expert();
    const rec = store.begin({ id: randomUUID(), robot: robot.spec.name, policyVersion: 'expert', hardwareProfile: 'nominal', task: 'reach', instruction: o.instruction, startedAt: Date.now(), extra: { seed } });
    for (let t = 0; ; t++) {
      const a = expert.act(o);
      const r = env.step(a);
      rec.append({ seq: t, tObs: t / 50, tAct: t / 50, obs: robot.toRobotObservation(o, t), action: a, reward: r.reward, done: r.terminated || r.truncated });
      o = r.obs;
      if (r.terminated || r.truncated) {
        rec.finish({ success: r.info.success });
        break;
      }
    }
  }
  store.close();
});
afterAll(async () => {
  await robot[Symbol.asyncDispose]();
  rmSync(dir, { recursive: true, force: true });
});

const sameDemos = (a: ReturnType<typeof demonstrationsFromEpisodes>, b: { obs: Float32Array; action: Float32Array; images?: Uint8Array; instructions?: readonly string[] }) => {
  expect(a.obs.length).toBe(b.obs.length);
  a.obs.forEach((v, i) => expect(Math.abs(v - b.obs[i]!)).toBeLessThan(1e-6));
  expect(Array.from(a.action)).toEqual(Array.from(b.action));
  expect(Buffer.from(a.images!).equals(Buffer.from(b.images!))).toBe(true);
  expect(a.instructions).toEqual(b.instructions);
};

describe('demonstrations from recorded episodes', () => {
  it('the store, an MCAP recording and a LeRobot v3.0 dataset give the expert\'s demonstrations, images and instructions included', async () => {
    const env = await makeEnv({ task: 'reach', image: S });
    const direct = SEEDS.map((s) => expertDemonstrations(env, 1, s));
    env.dispose();
    const cat = <T extends Float32Array | Uint8Array>(xs: T[], make: (n: number) => T) => {
      const out = make(xs.reduce((n, x) => n + x.length, 0));
      let o = 0;
      for (const x of xs) {
        out.set(x, o);
        o += x.length;
      }
      return out;
    };
    const want = {
      obs: cat(direct.map((d) => d.obs), (n) => new Float32Array(n)),
      action: cat(direct.map((d) => d.action), (n) => new Float32Array(n)),
      images: cat(direct.map((d) => d.images!), (n) => new Uint8Array(n)),
      instructions: direct.flatMap((d) => d.instructions!),
    };
    const opts = { layout, actionDim: 2, image: { height: S, width: S }, instructions: true };
    const stored = await loadEpisodes(parseEpisodeSource(`store:${db}`), { layout, actionDim: 2 });
    expect(stored).toHaveLength(3);
    const bySeed = SEEDS.map((seed) => stored.find((e) => e.meta.extra?.seed === seed)!);
    sameDemos(demonstrationsFromEpisodes(bySeed, { ...opts, source: 'store' }), want);

    const mcaps = await Promise.all(bySeed.map(async (e, k) => {
      const f = join(dir, `ep${k}.mcap`);
      await exportEpisode(e, f);
      return (await loadEpisodes(parseEpisodeSource(`mcap:${f}`), { layout, actionDim: 2 }))[0]!;
    }));
    sameDemos(demonstrationsFromEpisodes(mcaps, { ...opts, source: 'mcap' }), want);

    const ds = join(dir, 'lerobot');
    await exportLeRobot(bySeed, ds, { layout, fps: 50, images: 'png' });
    const lr = await loadEpisodes(parseEpisodeSource(`lerobot:${ds}`), { layout, actionDim: 2 });
    sameDemos(demonstrationsFromEpisodes(lr, { ...opts, source: 'lerobot' }), want);

    // chunks: each row holds the step's action and the next ones, the last repeated at the end
    const c = demonstrationsFromEpisodes(bySeed.slice(0, 1), { layout, actionDim: 2, chunk: 3, source: 'store' });
    const T = bySeed[0]!.steps.length;
    expect(Array.from(c.action.subarray(0, 6))).toEqual([...bySeed[0]!.steps[0]!.action, ...bySeed[0]!.steps[1]!.action, ...bySeed[0]!.steps[2]!.action]);
    expect(Array.from(c.action.subarray((T - 1) * 6))).toEqual(new Array(3).fill(Array.from(bySeed[0]!.steps[T - 1]!.action)).flat());
  });

  it('refuses episodes that do not fit the robot, naming what differs', async () => {
    const push = await makeEnv({ task: 'push' });
    const pushLayout = push.layout;
    push.dispose();
    const eps = await loadEpisodes(parseEpisodeSource(`store:${db}`), { layout, actionDim: 2 });
    expect(() => demonstrationsFromEpisodes(eps, { layout: pushLayout, actionDim: 2, source: 'store:x' }))
      .toThrow(new RegExp(`store:x episode ${eps[0]!.meta.id} step 0: observation has 13 features, the layout declares ${pushLayout.features.length} \\(tip x, tip y, cube x`));
    expect(() => demonstrationsFromEpisodes(eps, { layout, actionDim: 3, source: 's' })).toThrow(/step 0: action has 2 entries, the robot takes 3/);
    // frames of another size are brought to the policy's, as the policy runner does on the robot
    const big = demonstrationsFromEpisodes(eps.slice(0, 1), { layout, actionDim: 2, image: { height: 32, width: 32 }, source: 's' });
    const img0 = eps[0]!.steps[0]!.obs.image!;
    expect(Array.from(big.images!.subarray(0, 32 * 32 * 3))).toEqual(Array.from(cameraRgb(img0, { width: 32, height: 32 }, 'frame')));
    expect(img0.width).not.toBe(32);
    const bare: Episode = { ...eps[0]!, steps: eps[0]!.steps.map((s) => ({ ...s, obs: { ...s.obs, image: undefined, instruction: undefined } })), meta: { ...eps[0]!.meta, instruction: undefined } };
    expect(() => demonstrationsFromEpisodes([bare], { layout, actionDim: 2, image: { height: S, width: S }, source: 's' })).toThrow(/the policy reads camera images; the step has none/);
    expect(() => demonstrationsFromEpisodes([bare], { layout, actionDim: 2, instructions: true, source: 's' })).toThrow(/neither the step nor its episode has one/);
    // a LeRobot dataset written for reach, read for push
    await expect(loadEpisodes(parseEpisodeSource(`lerobot:${join(dir, 'lerobot')}`), { layout: pushLayout, actionDim: 2 })).rejects.toThrow(/observation layouts differ: feature 2: robot has 'cube x' \(m\), dataset has 'red target x' \(m\)/);
    // a recording that names other joints
    const f = join(dir, 'other.mcap');
    await exportEpisode({ ...eps[0]!, meta: { ...eps[0]!.meta, extra: { joints: ['shoulder', 'wrist'] } } }, f);
    await expect(loadEpisodes(parseEpisodeSource(`mcap:${f}`), { layout, actionDim: 2 })).rejects.toThrow(/recording's joint 1 is 'wrist', the robot's is 'elbow'/);
    expect(() => parseEpisodeSource('hdf5:x')).toThrow(/give store:PATH .*, mcap:PATH .* or lerobot:DIR/);
  });
});

describe('wmrl bc', () => {
  it('trains the VLA from the store and writes an artifact the robot runs', async () => {
    const out = join(dir, 'vla.onnx');
    const r = wmrl('bc', '--from', `store:${db}`, '--robot', 'sim:reach', '--command-history', '0', '--out', out, '--policy', 'vla', '--epochs', '3', '--batch', '32', '--policy-version', 'bc-test');
    expect(r.stderr + r.stdout).toMatch(/behaviour cloning from store:/);
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/vla.*3.*24x24/);
    onnxCheck(out);
    const run = await OnnxPolicy.load(out, robot.spec);
    expect(run.image).toEqual({ height: S, width: S });
    expect(run.metadata.policy_version).toBe('bc-test');
    const a = await run.act(await robot.reset({ seed: 5 }));
    expect(a).toHaveLength(2);
    for (const v of a) expect(Math.abs(v)).toBeLessThanOrEqual(1);
    // the Gaussian MLP from the LeRobot dataset the first test wrote
    const g = join(dir, 'mlp.onnx');
    const rg = wmrl('bc', '--from', `lerobot:${join(dir, 'lerobot')}`, '--robot', 'sim:reach', '--command-history', '0', '--out', g, '--epochs', '2');
    expect(rg.status).toBe(0);
    expect(rg.stdout).toMatch(/gaussian_mlp/);
    expect((await OnnxPolicy.load(g, robot.spec)).image).toBeUndefined();
    // a layout mismatch is refused before any training
    const bad = wmrl('bc', '--from', `store:${db}`, '--robot', 'sim:push', '--out', join(dir, 'x.onnx'));
    expect(bad.status).not.toBe(0);
    expect(bad.stderr).toMatch(/observation has 13 features, the layout declares \d+ \(tip x, tip y, cube x/);
    const noImages = wmrl('bc', '--from', 'hdf5:x', '--robot', 'sim:reach', '--out', join(dir, 'y.onnx'));
    expect(noImages.stderr).toMatch(/give store:PATH/);
  });
});
