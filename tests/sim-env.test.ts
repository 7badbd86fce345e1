// The Env contract: spaces and wiring, seeding, full-state save/restore, profile latency, the vectorized form,
// and no WASM memory growth across thousands of resets.
import { describe, expect, it } from 'vitest';
import { heapSize } from '../sim/mujoco.js';
import { NOMINAL } from '../sim/profiles.js';
import { MjEnv } from '../sim/env.js';
import { makeEnv } from '../sim/registry.js';
import { VecEnv } from '../sim/vec.js';
import { Rng } from '../sim/rng.js';

function randomActions(seed: number, n: number, dim: number): Float32Array[] {
  const rng = new Rng(seed);
  return Array.from({ length: n }, () => Float32Array.from({ length: dim }, () => rng.uniform(-1, 1)));
}

describe('Env', () => {
  it('declares spaces, instruction, robot spec; steps return the documented shapes', async () => {
    const env = await makeEnv({ task: 'push', seed: 0, image: 32 });
    try {
      expect(env.actionSpace.shape).toEqual([2]);
      expect(env.observationSpace.state.names).toHaveLength(env.observationSpace.state.shape[0]);
      expect(env.observationSpace.image?.shape).toEqual([32, 32, 3]);
      expect(env.spec).toMatchObject({ jointNames: ['shoulder', 'elbow'], actuatorNames: ['shoulder', 'elbow'], controlHz: 50 });
      expect(env.spec.jointLimits[0]).toEqual([-Infinity, Infinity]);
      expect(env.spec.jointLimits[1]![1]).toBeCloseTo(2.7);
      const obs = env.reset(5);
      expect(env.observationSpace.instructions).toContain(obs.instruction);
      expect(obs.instruction).toMatch(/^push the cube onto the (red|green|blue) pad$/);
      expect(obs.state).toHaveLength(env.observationSpace.state.shape[0]);
      expect(obs.image).toHaveLength(32 * 32 * 3);
      const r = env.step([2, -5]); // out of bounds: clipped
      expect(Array.from(r.info.appliedAction)).toEqual([1, -1]);
      expect(typeof r.reward).toBe('number');
      expect(r.info.instruction).toBe(obs.instruction);
      expect(r.info.substeps).toBe(10);
      expect(() => env.step([0])).toThrow(/expected 2/);
    } finally {
      env.dispose();
    }
  });

  it('episodes end by truncation at the horizon', async () => {
    const env = await makeEnv({ task: 'reach' });
    try {
      env.reset(1);
      let r;
      let n = 0;
      do {
        r = env.step([0, 0]);
        n++;
      } while (!r.terminated && !r.truncated);
      expect(r.truncated).toBe(true);
      expect(n).toBe(env.horizon);
    } finally {
      env.dispose();
    }
  });

  it('same seed -> same episode (layout, instruction and trajectory, noise included); other seed differs', async () => {
    const a = await makeEnv({ task: 'reach', profile: 'gap' });
    const b = await makeEnv({ task: 'reach', profile: 'gap' });
    try {
      const acts = randomActions(3, 30, 2);
      const run = (env: typeof a, seed: number) => {
        const out = [Array.from(env.reset(seed).state)];
        for (const act of acts) out.push(Array.from(env.step(act).obs.state));
        return out;
      };
      expect(run(a, 7)).toEqual(run(b, 7));
      expect(run(a, 8)).not.toEqual(run(b, 7));
      // rendering (which runs mj_forward) does not change the trajectory
      const c = await makeEnv({ task: 'reach', profile: 'gap', image: 16 });
      expect(run(c, 7)).toEqual(run(a, 7));
      c.dispose();
    } finally {
      a.dispose();
      b.dispose();
    }
  });

  it('getState/setState continues an episode exactly (physics, latency queue, RNG)', async () => {
    const env = await makeEnv({ task: 'push', profile: 'gap' });
    try {
      const acts = randomActions(4, 40, 2);
      env.reset(11);
      for (const act of acts.slice(0, 20)) env.step(act);
      const saved = env.getState();
      const first = acts.slice(20).map((act) => Array.from(env.step(act).obs.state));
      env.reset(99); // scramble
      env.setState(saved);
      const second = acts.slice(20).map((act) => Array.from(env.step(act).obs.state));
      expect(second).toEqual(first);
    } finally {
      env.dispose();
    }
  });

  it('action latency delays the applied action by exactly that many steps', async () => {
    const env = await makeEnv({ task: 'reach', profile: { ...NOMINAL, name: 'lag', action_latency_steps: 3 } });
    try {
      env.reset(0);
      const acts = randomActions(5, 8, 2);
      const applied = acts.map((a) => Array.from(env.step(a).info.appliedAction));
      for (let k = 3; k < 8; k++) expect(applied[k]).toEqual(Array.from(acts[k - 3]!));
      expect(applied[0]).toEqual([0, 0]); // the queue starts holding the reset controls (0 torque)
    } finally {
      env.dispose();
    }
  });

  it('a drive dead zone swallows small commands and takes its width off larger ones', async () => {
    const env = (await makeEnv({ task: 'reach', profile: { ...NOMINAL, name: 'dead', actuator_deadband: 0.3 } })) as MjEnv;
    const plain = (await makeEnv({ task: 'reach' })) as MjEnv;
    try {
      // Held below the dead zone the arm stays where it started; without it the same commands move it.
      env.reset(0);
      plain.reset(0);
      const q = (e: MjEnv) => Array.from((e.data.raw.qpos as Float64Array).slice(0, 2));
      const moved = (e: MjEnv, q0: number[]) => Math.max(...q(e).map((x, i) => Math.abs(x - q0[i]!)));
      const q0 = q(env), p0 = q(plain);
      for (let k = 0; k < 20; k++) {
        env.step([0.25, 0.25]);
        plain.step([0.25, 0.25]);
      }
      expect(moved(plain, p0)).toBeGreaterThan(0.05);
      expect(moved(env, q0)).toBeLessThan(0.1 * moved(plain, p0));
      const ctrl = () => Array.from(env.data.raw.ctrl as Float64Array);
      env.step([0.2, -0.25]);
      expect(ctrl()).toEqual([0, 0]);
      env.step([0.5, -0.9]);
      expect(ctrl()[0]).toBeCloseTo(0.2, 6);
      expect(ctrl()[1]).toBeCloseTo(-0.6, 6);
      // What reached the drive is still reported as commanded (the dead zone is the hardware's, not the command's).
      expect(Array.from(env.step([0.1, 0.1]).info.appliedAction)).toEqual([Math.fround(0.1), Math.fround(0.1)]);
    } finally {
      env.dispose();
      plain.dispose();
    }
  });

  it('control-rate jitter varies the substeps within ±jitter', async () => {
    const env = await makeEnv({ task: 'reach', profile: { ...NOMINAL, name: 'jit', control_jitter_substeps: 3 } });
    try {
      env.reset(0);
      const seen = new Set<number>();
      for (let k = 0; k < 60; k++) seen.add(env.step([0, 0]).info.substeps);
      expect(Math.min(...seen)).toBeGreaterThanOrEqual(7);
      expect(Math.max(...seen)).toBeLessThanOrEqual(13);
      expect(seen.size).toBeGreaterThan(3);
    } finally {
      env.dispose();
    }
  });

  it('VecEnv equals N single envs stepped one by one (same seeds), and auto-resets finished envs', async () => {
    const n = 4;
    const vec = await VecEnv.create(n, { task: 'reach', seed: 100 });
    const singles = await Promise.all(Array.from({ length: n }, () => makeEnv({ task: 'reach' })));
    try {
      const s = vec.observationSpace.state.shape[0];
      const obs0 = vec.reset();
      singles.forEach((e, i) => expect(Array.from(obs0.subarray(i * s, (i + 1) * s))).toEqual(Array.from(e.reset(100 + i).state)));
      const acts = randomActions(6, 20, 2 * n);
      for (const a of acts) {
        const r = vec.step(a);
        singles.forEach((e, i) => {
          const one = e.step(a.subarray(2 * i, 2 * i + 2));
          expect(r.reward[i]).toBe(Math.fround(one.reward));
          expect(Array.from(r.obs.subarray(i * s, (i + 1) * s))).toEqual(Array.from(one.obs.state));
        });
      }
      // run past the horizon: every env finishes once and restarts with seed + n*1 + i
      let finished = 0;
      for (let k = 0; k < 100; k++) {
        const r = vec.step(new Float32Array(2 * n));
        finished += r.truncated.reduce((x, y) => x + y, 0) + r.terminated.reduce((x, y) => x + y, 0);
        for (let i = 0; i < n; i++) if (r.truncated[i] || r.terminated[i]) expect(r.finalObs[i]).toHaveLength(s);
      }
      expect(finished).toBeGreaterThanOrEqual(n);
    } finally {
      vec.dispose();
      singles.forEach((e) => e.dispose());
    }
  });

  it('no WASM heap growth across 5000 resets, 1000 env create/dispose cycles and repeated 500-env batches', async () => {
    const env = await makeEnv({ task: 'push' });
    try {
      for (let k = 0; k < 200; k++) {
        env.reset(k);
        env.step([0.1, -0.1]);
      }
      // The heap only grows (by >= 20% at a time) and never shrinks. Measured here: 1000 leaked models
      // (~8 KB each) grow it, 300 do not; so this detects leaks of >= ~1 KB per reset or ~5 KB per env.
      const before = await heapSize();
      for (let k = 0; k < 5000; k++) {
        env.reset(k);
        env.step([0.1, -0.1]);
      }
      for (let k = 0; k < 1000; k++) (await makeEnv({ task: 'reach' })).dispose();
      expect(await heapSize()).toBe(before);
      // 500 live MjData (~270 KB each with the scene's 100 KB arena) grow the heap once; a leaked batch would
      // not fit a second time
      (await VecEnv.create(500, { task: 'reach' })).dispose();
      const withBatch = await heapSize();
      for (let k = 0; k < 2; k++) (await VecEnv.create(500, { task: 'reach' })).dispose();
      expect(await heapSize()).toBe(withBatch);
    } finally {
      env.dispose();
    }
  });
});
