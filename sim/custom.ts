// Custom robots: the user's MJCF plus a small YAML mapping (actuators, joints, end-effector site, reward and
// success terms) -> a reach-a-goal Env on the same machinery as the built-in tasks.
import { basename, dirname, resolve } from 'node:path';
import { Type, type Static, type TProperties } from '@sinclair/typebox';
import { parseConfig, readConfigFile } from '../common/config.js';
import { defineLayout } from '../common/layout.js';
import { SimData, type SimModel } from './mujoco.js';
import type { HardwareProfile } from './profiles.js';
import { envForTask } from './env.js';
import { jointUnit, type BoundTask, type TaskDef } from './task.js';
import type { Rng } from './rng.js';
import type { Env, Expert, Obs } from './types.js';

const Point = Type.Tuple([Type.Number(), Type.Number(), Type.Number()], { errorMessage: 'must be [x, y, z]' });
const Names = Type.Array(Type.String(), { minItems: 1, errorMessage: 'must be a non-empty list of names' });
const Count = Type.Optional(Type.Integer({ minimum: 1, errorMessage: 'must be a positive integer' }));
const Weight = Type.Optional(Type.Number({ minimum: 0, errorMessage: 'must be a number >= 0' }));
const Terms = <T extends TProperties>(terms: T) => Type.Optional(Type.Object(terms, { additionalProperties: false, errorMessage: 'must be a mapping' }));

/** A mapping file as written; parseRobotMapping fills the defaults. */
const MappingFile = Type.Object(
  {
    /** The robot's name (task `custom:NAME`, sim robot `sim-custom:NAME-PROFILE`); default the mapping file's name. */
    name: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9_.-]{1,64}$', errorMessage: 'must be 1-64 letters, digits, _ . or -' })),
    /** MJCF file, relative to the mapping file. */
    mjcf: Type.String(),
    /** Actuators in action order. */
    actuators: Names,
    /** Joints observed (position, velocity) and reported in the robot's layout. */
    joints: Names,
    end_effector_site: Type.String(),
    /** Goal of the end effector (world frame, m): a fixed point [x, y, z], or a box {low, high} each episode samples from. */
    goal: Type.Union([Point, Type.Object({ low: Point, high: Point }, { additionalProperties: false })], { errorMessage: 'must be [x, y, z] or {low: [x, y, z], high: [x, y, z]}' }),
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
type Vec3 = [number, number, number];
export type RobotMapping = Required<Omit<MappingFile, 'camera' | 'keyframe' | 'reward' | 'success' | 'goal'>> &
  Pick<MappingFile, 'camera' | 'keyframe'> & {
    /** The goal region; low = high for a fixed goal. */
    goal: { low: Vec3; high: Vec3 };
    reward: Required<NonNullable<MappingFile['reward']>>;
    success: Required<NonNullable<MappingFile['success']>>;
  };

/** Parses and validates a mapping; a ConfigError names the file, line and key. */
export function parseRobotMapping(text: string, file: string): RobotMapping {
  const { value: r, fail } = parseConfig(MappingFile, text, file, 'robot mapping');
  const goal = Array.isArray(r.goal) ? { low: r.goal, high: r.goal } : r.goal;
  goal.low.forEach((lo, i) => lo <= goal.high[i]! || fail(['goal', 'low'], `${'xyz'[i]} ${lo} exceeds goal.high's ${goal.high[i]}`));
  return {
    ...r,
    name: r.name ?? basename(file).replace(/\.ya?ml$/i, ''),
    goal,
    instruction: r.instruction ?? 'move the end effector to the goal',
    substeps: r.substeps ?? 10,
    horizon: r.horizon ?? 200,
    reward: { distance_weight: 1, action_weight: 0, ...r.reward },
    success: { radius: 0.03, ...r.success },
  };
}

export function customTask(mapping: RobotMapping, mappingFile: string): TaskDef {
  const scene = resolve(dirname(mappingFile), mapping.mjcf);
  const { low, high } = mapping.goal;
  const mid = low.map((l, i) => (l + high[i]!) / 2);
  return {
    name: `custom:${mapping.name}`,
    scene,
    substeps: mapping.substeps,
    horizon: mapping.horizon,
    camera: mapping.camera ?? '',
    // the goal is a mocap body, so it is part of the physics state (getState/setState) like the built-in targets
    worldbody: `<body name="${GOAL_BODY}" mocap="true" pos="${mid.join(' ')}"><site name="${GOAL_BODY}" size="${mapping.success.radius}" rgba="0.1 0.8 0.2 0.5"/></body>`,
    bind(model: SimModel): BoundTask {
      // every name must exist: the error names the MJCF file and the missing element
      const site = model.id('mjOBJ_SITE', mapping.end_effector_site);
      const acts = mapping.actuators.map((a) => model.id('mjOBJ_ACTUATOR', a));
      const jnt = mapping.joints.map((j) => model.id('mjOBJ_JOINT', j));
      const qadr = jnt.map((j) => (model.raw.jnt_qposadr as Int32Array)[j]!);
      const vadr = jnt.map((j) => (model.raw.jnt_dofadr as Int32Array)[j]!);
      const mocap = (model.raw.body_mocapid as Int32Array)[model.id('mjOBJ_BODY', GOAL_BODY)]!;
      if (mapping.keyframe) model.id('mjOBJ_KEY', mapping.keyframe);
      const eeDist = (data: SimData) => {
        const sx = data.raw.site_xpos as Float64Array;
        const mp = data.raw.mocap_pos as Float64Array;
        return Math.hypot(sx[3 * site]! - mp[3 * mocap]!, sx[3 * site + 1]! - mp[3 * mocap + 1]!, sx[3 * site + 2]! - mp[3 * mocap + 2]!);
      };
      const layout = defineLayout(
        mapping.joints.map((name) => {
          const { type, unit } = jointUnit(model, name);
          if (!unit) throw new Error(`${mappingFile}: joint '${name}' is a ${type} joint; only hinge and slide joints can be listed under 'joints'`);
          return { name, unit };
        }),
        [...['ee x', 'ee y', 'ee z'].map((name) => ({ name, unit: 'm' })), ...['goal x', 'goal y', 'goal z'].map((name) => ({ name, unit: 'm', scene: true as const }))],
      );
      const n = jnt.length;
      let ik: DlsIk | undefined;
      return {
        actuatorNames: mapping.actuators,
        layout,
        instructions: [mapping.instruction],
        keyframe: mapping.keyframe,
        resetEpisode(data: SimData, rng: Rng): number {
          const mp = data.raw.mocap_pos as Float64Array;
          for (let i = 0; i < 3; i++) mp[3 * mocap + i] = low[i] === high[i] ? low[i]! : rng.uniform(low[i]!, high[i]!);
          return 0;
        },
        observe(data: SimData, _goal: number, out: Float32Array): void {
          const q = data.raw.qpos as Float64Array;
          const qd = data.raw.qvel as Float64Array;
          const sx = data.raw.site_xpos as Float64Array;
          const mp = data.raw.mocap_pos as Float64Array;
          for (let i = 0; i < n; i++) {
            out[i] = q[qadr[i]!]!;
            out[n + i] = qd[vadr[i]!]!;
          }
          for (let i = 0; i < 3; i++) {
            out[2 * n + i] = sx[3 * site + i]!;
            out[2 * n + 3 + i] = mp[3 * mocap + i]!;
          }
        },
        pose(data: SimData, state: Float32Array): void {
          const mp = data.raw.mocap_pos as Float64Array;
          for (let i = 0; i < 3; i++) mp[3 * mocap + i] = state[2 * n + 3 + i]!;
        },
        evaluate(data: SimData, _goal: number, action: Float32Array) {
          const d = eeDist(data);
          let effort = 0;
          for (const a of action) effort += a * a;
          const success = d < mapping.success.radius;
          return { reward: -mapping.reward.distance_weight * d - mapping.reward.action_weight * effort + (success ? 1 : 0), success };
        },
        expert() {
          ik ??= new DlsIk(model, mappingFile, site, acts, jnt, mapping.keyframe);
          return ik.expert();
        },
        dispose: () => ik?.dispose(),
      };
    },
  };
}

const GOAL_BODY = 'wmrl_goal';

/**
 * The custom robot's expert: damped least-squares IK on the end-effector site through MuJoCo's Jacobian
 * (mj_jacSite), evaluated on a scratch MjData set to the observed joint positions, so it reads only the
 * observation. Each step moves a joint-space setpoint by dq = Jᵀ(JJᵀ + λ²I)⁻¹ e (e: goal − ee from the
 * observation, step-limited); integrating the setpoint takes out a servo's steady-state sag under gravity.
 * Position actuators get the setpoint, motors a PD torque towards it.
 */
class DlsIk {
  private readonly data: SimData;
  private readonly jac: { GetView(): Float64Array; delete(): void };
  private readonly cols: number[];
  private readonly kind: Array<'position' | 'motor'>;
  private readonly ctrlLo: number[];
  private readonly ctrlHi: number[];
  private readonly qLo: number[];
  private readonly qHi: number[];
  private readonly qadr: number[];
  /** Index of each actuator's joint among the observed joints. */
  private readonly actJoint: number[];

  constructor(private readonly model: SimModel, file: string, private readonly site: number, acts: number[], jnt: number[], keyframe?: string) {
    const m = model.raw;
    const trntype = m.actuator_trntype as Int32Array;
    const trnid = m.actuator_trnid as Int32Array;
    const biastype = m.actuator_biastype as Int32Array;
    const biasprm = m.actuator_biasprm as Float64Array;
    const cr = m.actuator_ctrlrange as Float64Array;
    const jr = m.jnt_range as Float64Array;
    const limited = m.jnt_limited as Uint8Array;
    const NB = 10; // mjNBIAS
    this.actJoint = acts.map((a) => {
      const name = model.name('mjOBJ_ACTUATOR', a);
      const j = jnt.indexOf(trnid[2 * a]!);
      if (trntype[a] !== 0 || j < 0) throw new Error(`${file}: the IK expert drives actuators on the listed joints; actuator '${name}' does not act on one of [${jnt.map((id) => model.name('mjOBJ_JOINT', id))}]`);
      return j;
    });
    this.kind = acts.map((a) => {
      if (biastype[a] === 0) return 'motor';
      if (biastype[a] === 1 && biasprm[NB * a + 1]! < 0 && biasprm[NB * a + 2]! <= 0) return 'position';
      throw new Error(`${file}: the IK expert drives position servos and motors; actuator '${model.name('mjOBJ_ACTUATOR', a)}' is neither`);
    });
    this.ctrlLo = acts.map((a) => cr[2 * a]!);
    this.ctrlHi = acts.map((a) => cr[2 * a + 1]!);
    this.cols = jnt.map((j) => (m.jnt_dofadr as Int32Array)[j]!);
    this.qadr = jnt.map((j) => (m.jnt_qposadr as Int32Array)[j]!);
    this.qLo = jnt.map((j) => (limited[j] ? jr[2 * j]! : -Infinity));
    this.qHi = jnt.map((j) => (limited[j] ? jr[2 * j + 1]! : Infinity));
    this.data = new SimData(model);
    this.data.reset(keyframe);
    this.jac = new (model.mj as unknown as { DoubleBuffer: new (n: number) => { GetView(): Float64Array; delete(): void } }).DoubleBuffer(3 * m.nv);
  }

  expert(): Expert {
    const n = this.cols.length;
    let setpoint: Float64Array | undefined;
    const LAMBDA = 0.05, GAIN = 0.5, MAX_STEP = 0.1, MAX_LEAD = 0.5;
    return {
      act: (obs: Obs): Float32Array => {
        const s = obs.state;
        const q = Float64Array.from({ length: n }, (_, i) => s[i]!);
        const qd = Float64Array.from({ length: n }, (_, i) => s[n + i]!);
        const e = [0, 1, 2].map((k) => s[2 * n + 3 + k]! - s[2 * n + k]!);
        setpoint ??= q.slice();
        const J = this.jacobian(q);
        // dq = Jᵀ (J Jᵀ + λ² I)⁻¹ e
        const A = [0, 1, 2].map((r) => [0, 1, 2].map((c) => J[r]!.reduce((sum, v, i) => sum + v * J[c]![i]!, 0) + (r === c ? LAMBDA * LAMBDA : 0)));
        const y = solve3(A, e);
        const dq = Array.from({ length: n }, (_, i) => GAIN * (J[0]![i]! * y[0]! + J[1]![i]! * y[1]! + J[2]![i]! * y[2]!));
        const big = Math.max(...dq.map(Math.abs));
        const k = big > MAX_STEP ? MAX_STEP / big : 1;
        for (let i = 0; i < n; i++) {
          const sp = Math.min(q[i]! + MAX_LEAD, Math.max(q[i]! - MAX_LEAD, setpoint[i]! + k * dq[i]!));
          setpoint[i] = Math.min(this.qHi[i]!, Math.max(this.qLo[i]!, sp));
        }
        return Float32Array.from(this.actJoint, (j, a) => {
          const lo = this.ctrlLo[a]!, hi = this.ctrlHi[a]!;
          const ctrl = this.kind[a] === 'position' ? setpoint![j]! : 20 * (setpoint![j]! - q[j]!) - 2 * qd[j]!;
          return hi > lo ? Math.max(-1, Math.min(1, (2 * (ctrl - lo)) / (hi - lo) - 1)) : 0;
        });
      },
    };
  }

  /** 3 x n translational Jacobian of the site at joint positions q (other joints at the reference pose). */
  private jacobian(q: Float64Array): number[][] {
    const qpos = this.data.raw.qpos as Float64Array;
    this.qadr.forEach((a, i) => (qpos[a] = q[i]!));
    const mj = this.model.mj;
    mj.mj_kinematics(this.model.raw, this.data.raw);
    mj.mj_comPos(this.model.raw, this.data.raw);
    mj.mj_jacSite(this.model.raw, this.data.raw, this.jac, null, this.site);
    const v = this.jac.GetView();
    const nv = this.model.raw.nv;
    return [0, 1, 2].map((r) => this.cols.map((c) => v[r * nv + c]!));
  }

  dispose(): void {
    this.jac.delete();
    this.data.dispose();
  }
}

/** Solves the 3 x 3 system A x = b (A symmetric positive definite) by Gaussian elimination. */
function solve3(A: number[][], b: number[]): number[] {
  const M = A.map((row, i) => [...row, b[i]!]);
  for (let c = 0; c < 3; c++) {
    let p = c;
    for (let r = c + 1; r < 3; r++) if (Math.abs(M[r]![c]!) > Math.abs(M[p]![c]!)) p = r;
    [M[c], M[p]] = [M[p]!, M[c]!];
    for (let r = 0; r < 3; r++) {
      if (r === c) continue;
      const f = M[r]![c]! / M[c]![c]!;
      for (let k = c; k < 4; k++) M[r]![k]! -= f * M[c]![k]!;
    }
  }
  return [0, 1, 2].map((i) => M[i]![3]! / M[i]![i]!);
}

/** The task of a user's robot from its YAML mapping file (the mapping's `mjcf` path is relative to it). */
export function loadCustomTask(mappingFile: string): TaskDef {
  const file = resolve(mappingFile);
  return customTask(parseRobotMapping(readConfigFile(file, 'robot mapping'), file), file);
}

/** An Env for the user's robot: `robot` is the YAML mapping file. */
export async function makeCustomEnv(o: { robot: string; profile?: string | HardwareProfile; seed?: number; image?: number }): Promise<Env> {
  return envForTask(loadCustomTask(o.robot), o);
}
