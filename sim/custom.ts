// Custom robots: the user's MJCF plus a small YAML mapping (actuators, joints, end-effector site, reward and
// success terms) -> a reach-a-goal Env on the same machinery as the built-in tasks.
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { isMap, isScalar, LineCounter, parseDocument, type Node as YamlNode } from 'yaml';
import type { SimData, SimModel } from './mujoco.js';
import { ProfileError, type HardwareProfile } from './profiles.js';
import { envForTask } from './registry.js';
import type { BoundTask, TaskDef } from './task.js';
import type { Env } from './types.js';

export interface RobotMapping {
  /** MJCF file, relative to the mapping file. */
  mjcf: string;
  /** Actuators in action order. */
  actuators: string[];
  /** Joints observed (position, velocity) and reported in the robot spec. */
  joints: string[];
  end_effector_site: string;
  /** Goal position of the end effector (world frame, m). */
  goal: [number, number, number];
  instruction: string;
  substeps: number;
  horizon: number;
  camera?: string;
  keyframe?: string;
  reward: { distance_weight: number; action_weight: number };
  success: { radius: number };
}

const SCHEMA: Record<string, 'string' | 'strings' | 'vec3' | 'int' | 'object'> = {
  mjcf: 'string', actuators: 'strings', joints: 'strings', end_effector_site: 'string', goal: 'vec3',
  instruction: 'string', substeps: 'int', horizon: 'int', camera: 'string', keyframe: 'string', reward: 'object', success: 'object',
};
const SUB: Record<string, string[]> = { reward: ['distance_weight', 'action_weight'], success: ['radius'] };

/** Parses and validates a mapping; errors are ProfileError-style: file, line, key. */
export function parseRobotMapping(text: string, file: string): RobotMapping {
  const lc = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lc, prettyErrors: false });
  if (doc.errors.length) throw new ProfileError(file, doc.errors[0]!.message.split('\n')[0]!, doc.errors[0]!.linePos?.[0]?.line);
  // line of the key itself (getIn would give the value, which may start on the next line)
  const lineOf = (path: string[]) => {
    const parent = path.length > 1 ? doc.getIn(path.slice(0, -1), true) : doc.contents;
    if (!isMap(parent)) return undefined;
    const pair = parent.items.find((it) => isScalar(it.key) && String(it.key.value) === path[path.length - 1]);
    const node = pair?.key as YamlNode | undefined;
    return node?.range ? lc.linePos(node.range[0]).line : undefined;
  };
  const raw = doc.toJS() as Record<string, unknown> | null;
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) throw new ProfileError(file, 'a robot mapping is a mapping of key: value');
  const bad = (key: string, msg: string, path = [key]): never => {
    throw new ProfileError(file, msg, lineOf(path), key);
  };
  for (const [k, v] of Object.entries(raw)) {
    const kind = SCHEMA[k];
    if (!kind) bad(k, `unknown key (known: ${Object.keys(SCHEMA).join(', ')})`);
    if (kind === 'string' && typeof v !== 'string') bad(k, 'must be a string');
    if (kind === 'strings' && !(Array.isArray(v) && v.length > 0 && v.every((x) => typeof x === 'string'))) bad(k, 'must be a non-empty list of names');
    if (kind === 'vec3' && !(Array.isArray(v) && v.length === 3 && v.every((x) => typeof x === 'number'))) bad(k, 'must be [x, y, z]');
    if (kind === 'int' && !(Number.isInteger(v) && (v as number) > 0)) bad(k, 'must be a positive integer');
    if (kind === 'object') {
      if (!v || typeof v !== 'object' || Array.isArray(v)) bad(k, 'must be a mapping');
      for (const [sk, sv] of Object.entries(v as object)) {
        if (!SUB[k]!.includes(sk)) bad(`${k}.${sk}`, `unknown key (known: ${SUB[k]!.join(', ')})`, [k, sk]);
        if (typeof sv !== 'number' || !(sv >= 0)) bad(`${k}.${sk}`, 'must be a number >= 0', [k, sk]);
      }
    }
  }
  for (const k of ['mjcf', 'actuators', 'joints', 'end_effector_site', 'goal']) if (!(k in raw)) throw new ProfileError(file, `missing key '${k}'`);
  const r = raw as Partial<RobotMapping>;
  return {
    mjcf: r.mjcf!,
    actuators: r.actuators!,
    joints: r.joints!,
    end_effector_site: r.end_effector_site!,
    goal: r.goal!,
    instruction: r.instruction ?? 'move the end effector to the goal',
    substeps: r.substeps ?? 10,
    horizon: r.horizon ?? 200,
    camera: r.camera,
    keyframe: r.keyframe,
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
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new ProfileError(file, `cannot read robot mapping (${(e as Error).message})`);
  }
  return envForTask(customTask(parseRobotMapping(text, file), file), o);
}
