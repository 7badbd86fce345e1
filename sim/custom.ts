// Custom robots: the user's MJCF plus a small YAML mapping (actuators, joints, end-effector site, reward and
// success terms) -> a reach-a-goal Env on the same machinery as the built-in tasks.
import { dirname, resolve } from 'node:path';
import { Type, type Static, type TProperties } from '@sinclair/typebox';
import { parseConfig, readConfigFile } from '../common/config.js';
import type { SimData, SimModel } from './mujoco.js';
import type { HardwareProfile } from './profiles.js';
import { envForTask } from './registry.js';
import type { BoundTask, TaskDef } from './task.js';
import type { Env } from './types.js';

const Names = Type.Array(Type.String(), { minItems: 1, errorMessage: 'must be a non-empty list of names' });
const Count = Type.Optional(Type.Integer({ minimum: 1, errorMessage: 'must be a positive integer' }));
const Weight = Type.Optional(Type.Number({ minimum: 0, errorMessage: 'must be a number >= 0' }));
const Terms = <T extends TProperties>(terms: T) => Type.Optional(Type.Object(terms, { additionalProperties: false, errorMessage: 'must be a mapping' }));

/** A mapping file as written; parseRobotMapping fills the defaults. */
const MappingFile = Type.Object(
  {
    /** MJCF file, relative to the mapping file. */
    mjcf: Type.String(),
    /** Actuators in action order. */
    actuators: Names,
    /** Joints observed (position, velocity) and reported in the robot's layout. */
    joints: Names,
    end_effector_site: Type.String(),
    /** Goal position of the end effector (world frame, m). */
    goal: Type.Tuple([Type.Number(), Type.Number(), Type.Number()], { errorMessage: 'must be [x, y, z]' }),
    instruction: Type.Optional(Type.String()),
    substeps: Count,
    horizon: Count,
    camera: Type.Optional(Type.String()),
    keyframe: Type.Optional(Type.String()),
    reward: Terms({ distance_weight: Weight, action_weight: Weight }),
    success: Terms({ radius: Weight }),
  },
  { additionalProperties: false },
);

type MappingFile = Static<typeof MappingFile>;
export type RobotMapping = Required<Omit<MappingFile, 'camera' | 'keyframe' | 'reward' | 'success'>> &
  Pick<MappingFile, 'camera' | 'keyframe'> & {
    reward: Required<NonNullable<MappingFile['reward']>>;
    success: Required<NonNullable<MappingFile['success']>>;
  };

/** Parses and validates a mapping; a ConfigError names the file, line and key. */
export function parseRobotMapping(text: string, file: string): RobotMapping {
  const r = parseConfig(MappingFile, text, file, 'robot mapping').value;
  return {
    ...r,
    instruction: r.instruction ?? 'move the end effector to the goal',
    substeps: r.substeps ?? 10,
    horizon: r.horizon ?? 200,
    reward: { distance_weight: 1, action_weight: 0, ...r.reward },
    success: { radius: 0.03, ...r.success },
  };
}

export function customTask(mapping: RobotMapping, mappingFile: string): TaskDef {
  const scene = resolve(dirname(mappingFile), mapping.mjcf);
  return {
    name: `custom:${mappingFile}`,
    scene,
    substeps: mapping.substeps,
    horizon: mapping.horizon,
    camera: mapping.camera ?? '',
    bind(model: SimModel): BoundTask {
      // every name must exist: the error names the MJCF file and the missing element
      const site = model.id('mjOBJ_SITE', mapping.end_effector_site);
      mapping.actuators.forEach((a) => model.id('mjOBJ_ACTUATOR', a));
      const jnt = mapping.joints.map((j) => model.id('mjOBJ_JOINT', j));
      const qadr = jnt.map((j) => (model.raw.jnt_qposadr as Int32Array)[j]!);
      const vadr = jnt.map((j) => (model.raw.jnt_dofadr as Int32Array)[j]!);
      if (mapping.keyframe) model.id('mjOBJ_KEY', mapping.keyframe);
      const [gx, gy, gz] = mapping.goal;
      const eeDist = (data: SimData) => {
        const sx = data.raw.site_xpos as Float64Array;
        return Math.hypot(sx[3 * site]! - gx, sx[3 * site + 1]! - gy, sx[3 * site + 2]! - gz);
      };
      return {
        actuatorNames: mapping.actuators,
        jointNames: mapping.joints,
        stateNames: [
          ...mapping.joints.map((j) => `${j} pos`),
          ...mapping.joints.map((j) => `${j} vel`),
          'ee x (m)', 'ee y (m)', 'ee z (m)', 'goal x (m)', 'goal y (m)', 'goal z (m)',
        ],
        instructions: [mapping.instruction],
        keyframe: mapping.keyframe,
        resetEpisode: () => 0,
        observe(data: SimData, _goal: number, out: Float32Array): void {
          const q = data.raw.qpos as Float64Array;
          const qd = data.raw.qvel as Float64Array;
          const sx = data.raw.site_xpos as Float64Array;
          const n = jnt.length;
          for (let i = 0; i < n; i++) {
            out[i] = q[qadr[i]!]!;
            out[n + i] = qd[vadr[i]!]!;
          }
          out.set([sx[3 * site]!, sx[3 * site + 1]!, sx[3 * site + 2]!, gx, gy, gz], 2 * n);
        },
        evaluate(data: SimData, _goal: number, action: Float32Array) {
          const d = eeDist(data);
          let effort = 0;
          for (const a of action) effort += a * a;
          const success = d < mapping.success.radius;
          return { reward: -mapping.reward.distance_weight * d - mapping.reward.action_weight * effort + (success ? 1 : 0), success };
        },
        // A custom robot has no scripted skill: its expert sends the zero action (mid-range servo targets).
        expert: () => ({ act: () => new Float32Array(mapping.actuators.length) }),
      };
    },
  };
}

/** An Env for the user's robot: `mappingFile` is the YAML mapping (its `mjcf` path is relative to it). */
export async function makeCustomEnv(o: { robot: string; profile?: string | HardwareProfile; seed?: number; image?: number }): Promise<Env> {
  const file = resolve(o.robot);
  return envForTask(customTask(parseRobotMapping(readConfigFile(file, 'robot mapping'), file), file), o);
}
