// The sim robot and every sim task: the declared layout is what the state vector holds (joint
// positions and velocities read straight from MuJoCo), the robot's observation is the env's state in
// that layout, and a seeded reset reproduces its start state.
import { describe, expect, it } from 'vitest';
import { buildObservation, layoutDim, layoutEntries, layoutMismatch, layoutOf, robotEntries } from '../common/layout.js';
import { SimRobot } from '../hardware/robots/sim.js';
import { MjEnv } from '../sim/env.js';
import { UnseededResetError } from '../hardware/types.js';
import { TASKS } from './helpers/tasks.js';


describe('sim tasks declare their layout; the sim robot observes through it', () => {
  for (const task of TASKS) {
    it(`${task}: state = [qpos, qvel of the declared joints, features]; robot observation = env state; seeded reset reproduces`, async () => {
      const robot = await SimRobot.create({ task, seed: 3 });
      try {
        const env = robot.env as MjEnv;
        expect(layoutMismatch(env.layout, layoutOf(robot.spec), 'env', 'robot')).toBeNull();
        expect(env.observationSpace.state.shape[0]).toBe(layoutDim(env.layout));
        const nj = env.layout.joints.length;
        const m = env.model.raw;
        const qadr = env.layout.joints.map((j) => (m.jnt_qposadr as Int32Array)[env.model.id('mjOBJ_JOINT', j.name)]!);
        const vadr = env.layout.joints.map((j) => (m.jnt_dofadr as Int32Array)[env.model.id('mjOBJ_JOINT', j.name)]!);
        await robot.reset({ seed: 11 });
        for (let t = 0; t < 6; t++) {
          const o = await robot.observe();
          const s = robot.lastObs.state;
          expect(Array.from(buildObservation(env.layout, o))).toEqual(Array.from(s));
          const qpos = env.data.raw.qpos as Float64Array;
          const qvel = env.data.raw.qvel as Float64Array;
          for (let i = 0; i < nj; i++) {
            expect(s[i]).toBeCloseTo(qpos[qadr[i]!]!, 5);
            expect(s[nj + i]).toBeCloseTo(qvel[vadr[i]!]!, 5);
          }
          await robot.act(Float32Array.from(robot.spec.action.low, (_, k) => Math.sin(t + k)));
        }
        const a = await robot.reset({ seed: 42 });
        await robot.act(new Float32Array(robot.spec.action.low.length).fill(0.5));
        const b = await robot.reset({ seed: 42 });
        const c = await robot.reset({ seed: 43 });
        expect(Array.from(buildObservation(env.layout, b))).toEqual(Array.from(buildObservation(env.layout, a)));
        expect(Array.from(buildObservation(env.layout, c))).not.toEqual(Array.from(buildObservation(env.layout, a)));
        // without a seed: the robot's own sequence, a different start each time
        const d = await robot.reset();
        const e = await robot.reset();
        expect(Array.from(buildObservation(env.layout, d))).not.toEqual(Array.from(buildObservation(env.layout, e)));
      } finally {
        await robot[Symbol.asyncDispose]();
      }
    });
  }

  it("the robot's own entries: joints, the tip and the commands sent; targets, objects and the goal are scene, on the env and through the robot's spec", async () => {
    const own = (task: string) => ({ reach: ['tip x', 'tip y'], push: ['tip x', 'tip y'], pick: [], 'tests/fixtures/sim/custom/robot.yaml': ['ee x', 'ee y', 'ee z'] })[task]!;
    for (const task of TASKS) {
      const robot = await SimRobot.create({ task, seed: 0, commandHistory: 1 });
      try {
        const L = robot.env.layout, nj = L.joints.length;
        const names = (idx: number[]) => idx.map((i) => layoutEntries(L)[i]!.name);
        const robotFeatures = names(robotEntries(L).slice(2 * nj));
        expect(robotEntries(L).slice(0, 2 * nj)).toEqual(Array.from({ length: 2 * nj }, (_, i) => i));
        expect(robotFeatures).toEqual([...own(task), ...robot.spec.action.names.map((a) => `${a} command t-1`)]);
        // every feature of the task itself that is not the robot's measures the world: a goal, a target, an object
        const scene = L.features.filter((f) => f.scene).map((f) => f.name);
        expect(scene.length).toBe(L.features.length - robotFeatures.length);
        expect(scene.some((n) => n.includes('goal'))).toBe(true);
        expect(robotEntries(layoutOf(robot.spec))).toEqual(robotEntries(L));
      } finally {
        await robot[Symbol.asyncDispose]();
      }
    }
  });

  it('a seed that is not an integer in [0, 2^32) is refused, naming the robot', async () => {
    const robot = await SimRobot.create({ task: 'reach' });
    try {
      await expect(robot.reset({ seed: 1.5 })).rejects.toThrow('sim-reach-nominal: reset seed must be an integer in [0, 2^32), got 1.5');
      await expect(robot.reset({ seed: -1 })).rejects.toThrow(RangeError);
      expect(new UnseededResetError('arm', 'x').message).toBe('arm: cannot reset to a seeded start state: x');
    } finally {
      await robot[Symbol.asyncDispose]();
    }
  });
});
