// Start states the robot reported (wmrl/reported-starts.ts): the first observation of each complete episode of the
// task, by instruction; episodes of another task, another layout's shape or not complete are not this robot's starts.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { defineLayout } from '../common/layout.js';
import { EpisodeStore } from '../episodes/store/store.js';
import { Rng } from '../nn/index.js';
import { ReportedStarts } from '../wmrl/reported-starts.js';
import { makeStep, meta } from './helpers/episode-data.js';

const dir = mkdtempSync(join(tmpdir(), 'reported-starts-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const layout = defineLayout([{ name: 'a', unit: 'rad' }, { name: 'b', unit: 'rad' }, { name: 'c', unit: 'rad' }]);

describe('reported starts', () => {
  it('takes the first observation of each complete episode of the task, incrementally, drawn by instruction', () => {
    const store = EpisodeStore.open(join(dir, 'e.db'));
    try {
      const record = (id: string, over: Partial<ReturnType<typeof meta>> = {}, finish = true, features = false) => {
        const rec = store.begin({ ...meta(id), ...over });
        for (let k = 0; k < 3; k++) {
          const s = makeStep(id, k, k === 2);
          rec.append(features ? { ...s, obs: { ...s.obs, features: Float32Array.of(1) } } : s);
        }
        if (finish) store.finish(id, { success: false });
      };
      const starts = new ReportedStarts(store, layout, 'reach');
      expect(starts.refresh()).toBe(0);
      expect(starts.draw('touch the red cube', new Rng(0))).toBeNull();
      record('red-1');
      record('blue-1', { instruction: 'touch the blue cube' });
      record('push-1', { task: 'push' });
      record('open-1', {}, false);
      record('wide-1', {}, true, true);
      record('measured-1', { policyVersion: 'eval-0' });
      expect(starts.refresh()).toBe(2);
      expect(starts.size).toBe(2);
      const first = makeStep('red-1', 0, false).obs;
      const rng = new Rng(1);
      for (let i = 0; i < 10; i++) {
        const s = starts.draw('touch the red cube', rng)!;
        expect(s.instruction).toBe('touch the red cube');
        expect(Array.from(s.obs)).toEqual(Array.from([...first.position, ...first.velocity], Math.fround));
      }
      // An instruction the robot reported no start of: any start it reported.
      const other = new Set(Array.from({ length: 20 }, () => starts.draw('touch the green cube', rng)!.instruction));
      expect(other).toEqual(new Set(['touch the red cube', 'touch the blue cube']));
      // Only what was recorded since, nothing twice.
      record('red-2');
      expect(starts.refresh()).toBe(1);
      expect(starts.refresh()).toBe(0);
      expect(starts.size).toBe(3);
    } finally {
      store.close();
    }
  });

  it("leaves out a trainer's measurement episodes (robotEvaluation's), which choose between policies on their starts", async () => {
    const { robotEvaluation } = await import('../wmrl/embodied.js');
    const { simRobotTarget } = await import('../wmrl/sim-setup.js');
    const { GaussianPolicy } = await import('../policies/gaussian.js');
    const { layoutOf } = await import('../common/layout.js');
    const target = await simRobotTarget({ task: 'reach', profile: 'gap', robots: 1, resetSeconds: 5, seed: 0, store: join(dir, 'measured.db') });
    try {
      const spec = target.robot.spec, layout = layoutOf(spec);
      const policy = new GaussianPolicy({ obsDim: layout.joints.length * 2 + layout.features.length, actDim: spec.action.low.length, hidden: [4] });
      await robotEvaluation(target, 2)(policy);
      expect(target.store!.list({ status: 'complete' })).toHaveLength(2);
      expect(new ReportedStarts(target.store!, layout, target.meta.task).refresh()).toBe(0);
    } finally {
      await target.close();
    }
  }, 60_000);
});
