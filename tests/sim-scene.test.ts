// Scene export for the viewer: static geometry once, then compact frames that decode to the body poses.
import { describe, expect, it } from 'vitest';
import type { MjEnv } from '../sim/env.js';
import { makeEnv } from '../sim/registry.js';
import { decodeFrame, encodeFrame } from '../sim/scene.js';

describe('scene export', () => {
  it('static part lists every geom with type, size, colour and body; JSON-serializable', async () => {
    const env = (await makeEnv({ task: 'push' })) as MjEnv;
    try {
      env.reset(0);
      const st = env.sceneStatic();
      const byName = new Map(st.geoms.map((g) => [g.name, g]));
      expect(byName.get('floor')).toMatchObject({ type: 'plane', body: 0 });
      expect(byName.get('cube')).toMatchObject({ type: 'box', size: [0.02, 0.02, 0.02], rgba: [0.95, 0.6, 0.1, 1] });
      expect(byName.get('finger')?.type).toBe('capsule');
      expect(st.geoms).toHaveLength(env.model.raw.ngeom);
      expect(JSON.parse(JSON.stringify(st))).toEqual(st);
      // the world and the welded base never move, so frames leave them out
      expect(st.dynamicBodies).not.toContain(0);
      expect(st.dynamicBodies).not.toContain(env.model.id('mjOBJ_BODY', 'base'));
      expect(st.dynamicBodies).toContain(env.model.id('mjOBJ_BODY', 'cube'));
    } finally {
      env.dispose();
    }
  });

  it('frames are 2 + 7 floats per moving body and decode to the poses of every body', async () => {
    const env = (await makeEnv({ task: 'push' })) as MjEnv;
    try {
      let obs = env.reset(1);
      const st = env.sceneStatic();
      const expert = env.expert();
      for (let k = 1; k <= 30; k++) {
        obs = env.step(expert.act(obs)).obs;
        const frame = encodeFrame(st, env.data, k);
        expect(frame).toHaveLength(2 + 7 * st.dynamicBodies.length);
        const { step, time, poses } = decodeFrame(st, frame);
        expect(step).toBe(k);
        expect(time).toBeCloseTo(env.data.raw.time, 5);
        expect(Array.from(poses)).toEqual(Array.from(env.poses()));
      }
    } finally {
      env.dispose();
    }
  });
});
