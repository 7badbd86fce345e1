// Every MJCF scene compiles and steps one second of sim time under random control with no MuJoCo warning.
import { describe, expect, it } from 'vitest';
import { SimData, SimModel, takeMujocoLog } from '../sim/mujoco.js';
import { makeCustomEnv } from '../sim/custom.js';
import { TASKS } from '../sim/registry.js';
import { Rng } from '../sim/rng.js';

describe('scenes', () => {
  for (const [name, task] of TASKS) {
    it(`${name}: compiles, has a home keyframe, steps 1 s under random control without warnings`, async () => {
      const model = await SimModel.load(task.scene);
      const data = new SimData(model);
      try {
        model.id('mjOBJ_KEY', 'home');
        data.reset('home');
        takeMujocoLog();
        const rng = new Rng(1);
        const steps = Math.round(1 / model.timestep);
        for (let k = 0; k < steps; k++) {
          if (k % task.substeps === 0) {
            const ctrl = data.raw.ctrl as Float64Array;
            const range = model.raw.actuator_ctrlrange as Float64Array;
            for (let a = 0; a < model.raw.nu; a++) ctrl[a] = rng.uniform(range[2 * a]!, range[2 * a + 1]!);
          }
          data.step();
        }
        expect(data.raw.time).toBeCloseTo(1, 6);
        expect(data.warnings()).toEqual({});
        expect(takeMujocoLog()).toEqual([]);
        const q = data.raw.qpos as Float64Array;
        expect(Array.from(q).every(Number.isFinite)).toBe(true);
      } finally {
        data.dispose();
        model.dispose();
      }
    });
  }

  it('custom robot fixture: steps 1 s under random actions without warnings', async () => {
    const env = await makeCustomEnv({ robot: 'tests/fixtures/sim/custom/robot.yaml', seed: 0 });
    try {
      env.reset(0);
      const rng = new Rng(2);
      for (let k = 0; k < env.spec.controlHz; k++) env.step([rng.uniform(-1, 1), rng.uniform(-1, 1)]);
      expect((env as unknown as { data: SimData }).data.warnings()).toEqual({});
    } finally {
      env.dispose();
    }
  });
});
