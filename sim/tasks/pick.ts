// pick: grasp the cube with the gantry gripper and put it down on the pad of the named colour.
import { join } from 'node:path';
import type { SimData, SimModel } from '../mujoco.js';
import type { Rng } from '../rng.js';
import { defineLayout } from '../../common/layout.js';
import { argmaxFrom, type BoundTask, type TaskDef } from '../task.js';
import type { Obs } from '../types.js';
import { COLOURS, spreadPoints } from './layout.js';
import { packagePath } from '../../common/package-root.js';

const ASSETS = packagePath('sim', 'assets', 'pick');
const PAD = 0.05;

// State: positions (0..4) and velocities (5..9) of the five joints, then cube (10..15), pads (16..21), goal (22..24).
// The joints (gantry and fingers) are the robot's; every feature measures the world (flagged scene).
const LAYOUT = defineLayout(
  ['x', 'y', 'z', 'finger_left', 'finger_right'].map((name) => ({ name, unit: 'm' as const })),
  [
    ...['x', 'y', 'z'].map((a) => ({ name: `cube ${a}`, unit: 'm' })),
    ...['vx', 'vy', 'vz'].map((a) => ({ name: `cube ${a}`, unit: 'm/s' })),
    ...COLOURS.flatMap((c) => [{ name: `${c} pad x`, unit: 'm' }, { name: `${c} pad y`, unit: 'm' }]),
    ...COLOURS.map((c) => ({ name: `goal is ${c}`, unit: '1' })),
  ].map((f) => ({ ...f, scene: true as const })),
);
const NJ = LAYOUT.joints.length;
const CUBE = 2 * NJ; // offset of the cube position in the state
const PADS = CUBE + 6;
const G = PADS + 6; // offset of the goal one-hot
const FINGER = 3; // finger_left position: how far the fingers have closed

export const pick: TaskDef = {
  name: 'pick',
  scene: join(ASSETS, 'scene.xml'),
  substeps: 10,
  horizon: 250,
  camera: 'top',
  bind(model: SimModel): BoundTask {
    const jadr = (name: string) => (model.raw.jnt_qposadr as Int32Array)[model.id('mjOBJ_JOINT', name)]!;
    const vadr = (name: string) => (model.raw.jnt_dofadr as Int32Array)[model.id('mjOBJ_JOINT', name)]!;
    const [qx, qf, qc] = [jadr('x'), jadr('finger_left'), jadr('cube')];
    const vc = vadr('cube');
    const mocap = COLOURS.map((c) => (model.raw.body_mocapid as Int32Array)[model.id('mjOBJ_BODY', `pad_${c}`)]!);
    const actuators = ['x', 'y', 'z', 'grip'];
    const cr = model.raw.actuator_ctrlrange as Float64Array;
    const ranges = actuators.map((a) => {
      const id = model.id('mjOBJ_ACTUATOR', a);
      return [cr[2 * id]!, cr[2 * id + 1]!] as [number, number];
    });
    const jq = LAYOUT.joints.map((j) => jadr(j.name));
    const jv = LAYOUT.joints.map((j) => vadr(j.name));
    return {
      actuatorNames: actuators,
      layout: LAYOUT,
      instructions: COLOURS.map((c) => `put the cube on the ${c} pad`),
      keyframe: 'home',
      resetEpisode(data: SimData, rng: Rng): number {
        const goal = rng.intIn(0, 2);
        const cube = spreadPoints(rng, 1, 0, 0.2, 0)[0]!;
        // pads at least 13 cm apart and from the cube, so it never starts on one
        const pads = spreadPoints(rng, 3, 0, 0.22, 0.13, [cube]);
        const mp = data.raw.mocap_pos as Float64Array;
        pads.forEach(([x, y], i) => {
          mp[3 * mocap[i]!] = x;
          mp[3 * mocap[i]! + 1] = y;
        });
        const q = data.raw.qpos as Float64Array;
        const yaw = rng.uniform(-0.5, 0.5);
        q.set([cube[0], cube[1], 0.02, Math.cos(yaw / 2), 0, 0, Math.sin(yaw / 2)], qc);
        const [gx, gy] = spreadPoints(rng, 1, 0, 0.15, 0)[0]!;
        const gz = rng.uniform(0.12, 0.18);
        q[qx] = gx;
        q[qx + 1] = gy;
        q[qx + 2] = gz;
        // servos start at where the gripper is, so nothing jumps at reset
        (data.raw.ctrl as Float64Array).set([gx, gy, gz, 0]);
        return goal;
      },
      observe(data: SimData, goal: number, out: Float32Array): void {
        const q = data.raw.qpos as Float64Array;
        const qd = data.raw.qvel as Float64Array;
        const mp = data.raw.mocap_pos as Float64Array;
        for (let i = 0; i < NJ; i++) {
          out[i] = q[jq[i]!]!;
          out[NJ + i] = qd[jv[i]!]!;
        }
        for (let i = 0; i < 3; i++) {
          out[CUBE + i] = q[qc + i]!;
          out[CUBE + 3 + i] = qd[vc + i]!;
          out[PADS + 2 * i] = mp[3 * mocap[i]!]!;
          out[PADS + 1 + 2 * i] = mp[3 * mocap[i]! + 1]!;
          out[G + i] = i === goal ? 1 : 0;
        }
      },
      pose(data: SimData, state: Float32Array): void {
        const q = data.raw.qpos as Float64Array;
        const mp = data.raw.mocap_pos as Float64Array;
        for (let i = 0; i < 3; i++) {
          q[qc + i] = state[CUBE + i]!;
          mp[3 * mocap[i]!] = state[PADS + 2 * i]!;
          mp[3 * mocap[i]! + 1] = state[PADS + 1 + 2 * i]!;
        }
      },
      goalPosition(data: SimData, goal: number): [number, number] {
        const mp = data.raw.mocap_pos as Float64Array;
        return [mp[3 * mocap[goal]!]!, mp[3 * mocap[goal]! + 1]!];
      },
      evaluate(data: SimData, goal: number, action: Float32Array) {
        const q = data.raw.qpos as Float64Array;
        const qd = data.raw.qvel as Float64Array;
        const mp = data.raw.mocap_pos as Float64Array;
        const px = mp[3 * mocap[goal]!]!, py = mp[3 * mocap[goal]! + 1]!;
        const cx = q[qc]!, cy = q[qc + 1]!, cz = q[qc + 2]!;
        const resting = cz < 0.025 && Math.hypot(qd[vc]!, qd[vc + 1]!, qd[vc + 2]!) < 0.05;
        const success = Math.abs(cx - px) < PAD && Math.abs(cy - py) < PAD && resting && q[qf]! < 0.015;
        const cubeToPad = Math.hypot(cx - px, cy - py);
        const gripToCube = Math.hypot(q[qx]! - cx, q[qx + 1]! - cy, q[qx + 2]! - cz);
        let effort = 0;
        for (const a of action) effort += a * a;
        return { reward: -cubeToPad - 0.5 * gripToCube - 0.001 * effort + (success ? 1 : 0), success };
      },
      expert: () => pickExpert(ranges),
    };
  },
};

/**
 * A phase machine tuned on `nominal`: above the cube, down, close, lift, carry, down, open, up.
 * Servo targets include the gripper's nominal sag under gravity (about 7 mm).
 */
function pickExpert(ranges: Array<[number, number]>) {
  const SAG = 0.007;
  const HIGH = 0.12;
  let phase = 0;
  let timer = 0;
  const toAction = (ctrl: number[]) => Float32Array.from(ctrl, (c, i) => (2 * (c - ranges[i]![0])) / (ranges[i]![1] - ranges[i]![0]) - 1);
  return {
    act(obs: Obs): Float32Array {
      const s = obs.state;
      const g = argmaxFrom(s, G, 3);
      const [x, y, z] = [s[0]!, s[1]!, s[2]!];
      const [cx, cy, cz] = [s[CUBE]!, s[CUBE + 1]!, s[CUBE + 2]!];
      const [px, py] = [s[PADS + 2 * g]!, s[PADS + 1 + 2 * g]!];
      const closing = s[FINGER]!;
      const xyErr = (tx: number, ty: number) => Math.hypot(x - tx, y - ty);
      timer++;
      const next = () => {
        phase++;
        timer = 0;
      };
      switch (phase) {
        case 0: // above the cube
          if (xyErr(cx, cy) < 0.008) next();
          return toAction([cx, cy, HIGH + SAG, 0]);
        case 1: // down around it
          if (Math.abs(z - (cz + 0.006)) < 0.006 && timer > 5) next();
          return toAction([cx, cy, cz + 0.006 + SAG, 0]);
        case 2: // close, and give the grip time to settle
          if (closing > 0.02 && timer > 12) next();
          return toAction([cx, cy, cz + 0.006 + SAG, ranges[3]![1]]);
        case 3: // lift
          if (z > HIGH - 0.02) next();
          return toAction([x, y, HIGH + SAG, ranges[3]![1]]);
        case 4: {
          // carry over the pad with the setpoint at most 4 cm ahead, so the grasp is not jerked
          if (xyErr(px, py) < 0.01) next();
          const d = xyErr(px, py);
          const k = d > 0.04 ? 0.04 / d : 1;
          return toAction([x + (px - x) * k, y + (py - y) * k, HIGH + SAG, ranges[3]![1]]);
        }
        case 5: // lower until the cube nearly touches
          if (cz < 0.024 || timer > 60) next();
          return toAction([px, py, 0.026 + SAG, ranges[3]![1]]);
        case 6: // open
          if (closing < 0.01 && timer > 5) next();
          return toAction([px, py, 0.026 + SAG, 0]);
        default: // back up
          return toAction([px, py, HIGH + SAG, 0]);
      }
    },
  };
}
