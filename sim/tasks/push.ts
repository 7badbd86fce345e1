// push: push the cube onto the pad of the named colour.
import { join } from 'node:path';
import type { SimData, SimModel } from '../mujoco.js';
import type { Rng } from '../rng.js';
import { argmaxFrom, type BoundTask, type TaskDef } from '../task.js';
import type { Demonstrator, Obs } from '../types.js';
import { e, pick, sub } from '../../common/derived.js';
import { ActuationPredictor, ARM_TIP, armLayout, armState, ik, pd, tipOf } from './arm.js';
import { COLOURS, spreadPoints } from './layout.js';
import { packagePath } from '../../common/package-root.js';

const ASSETS = packagePath('sim', 'assets', 'push');
const PAD = 0.05; // half side of a goal pad
const CUBE = 0.02; // half side of the cube
const FINGER = 0.012;

/** Distance from the origin to the segment a-b (the arm cannot push through its own base). */
function segmentClearance(a: [number, number], b: [number, number]): number {
  const dx = b[0] - a[0], dy = b[1] - a[1];
  const t = Math.max(0, Math.min(1, -(a[0] * dx + a[1] * dy) / (dx * dx + dy * dy)));
  return Math.hypot(a[0] + t * dx, a[1] + t * dy);
}

export const push: TaskDef = {
  name: 'push',
  scene: join(ASSETS, 'scene.xml'),
  substeps: 10,
  horizon: 300,
  camera: 'top',
  bind(model: SimModel): BoundTask {
    const tip = model.id('mjOBJ_SITE', 'tip');
    const cubeJnt = model.id('mjOBJ_JOINT', 'cube');
    const cq = (model.raw.jnt_qposadr as Int32Array)[cubeJnt]!;
    const cv = (model.raw.jnt_dofadr as Int32Array)[cubeJnt]!;
    const mocap = COLOURS.map((c) => (model.raw.body_mocapid as Int32Array)[model.id('mjOBJ_BODY', `pad_${c}`)]!);
    // Every feature past the tip measures the world (flagged scene): the cube, the pads, the goal and offsets to them.
    const layout = armLayout([
      { name: 'cube x', unit: 'm' }, { name: 'cube y', unit: 'm' }, { name: 'cube vx', unit: 'm/s' }, { name: 'cube vy', unit: 'm/s' },
      ...COLOURS.flatMap((c) => [{ name: `${c} pad x`, unit: 'm' }, { name: `${c} pad y`, unit: 'm' }]),
      ...COLOURS.map((c) => ({ name: `goal is ${c}`, unit: '1' })),
      // the offsets the push logic plans from, as reach's goal-minus-tip: a clone need not learn to select the
      // goal pad by the one-hot and subtract
      { name: 'goal pad x - cube x', unit: 'm' },
      { name: 'goal pad y - cube y', unit: 'm' },
      { name: 'cube x - tip x', unit: 'm' },
      { name: 'cube y - tip y', unit: 'm' },
    ].map((f) => ({ ...f, scene: true as const })));
    const G = 16; // offset of the one-hot
    const REL = G + 3; // offset of the relative entries
    return {
      actuatorNames: ['shoulder', 'elbow'],
      layout,
      instructions: COLOURS.map((c) => `push the cube onto the ${c} pad`),
      keyframe: 'home',
      // Pads and the goal's one-hot hold still; the tip follows the joints; the offsets are differences of entries.
      derived: {
        held: [10, 11, 12, 13, 14, 15, G, G + 1, G + 2],
        computed: [
          ...ARM_TIP,
          { entry: REL, expr: sub(pick(G, 10, 3, 2), e(6)) },
          { entry: REL + 1, expr: sub(pick(G, 11, 3, 2), e(7)) },
          { entry: REL + 2, expr: sub(e(6), e(4)) },
          { entry: REL + 3, expr: sub(e(7), e(5)) },
        ],
      },
      resetEpisode(data: SimData, rng: Rng): number {
        const goal = rng.intIn(0, 2);
        let cube: [number, number];
        let pads: Array<[number, number]>;
        for (;;) {
          cube = spreadPoints(rng, 1, 0.16, 0.3, 0)[0]!;
          pads = spreadPoints(rng, 3, 0.16, 0.32, 0.13, [cube]);
          if (pads.every((p) => Math.hypot(p[0] - cube[0], p[1] - cube[1]) > 0.12) && segmentClearance(cube, pads[goal]!) > 0.12) break;
        }
        const mp = data.raw.mocap_pos as Float64Array;
        pads.forEach(([x, y], i) => {
          mp[3 * mocap[i]!] = x;
          mp[3 * mocap[i]! + 1] = y;
        });
        const q = data.raw.qpos as Float64Array;
        q[cq] = cube[0];
        q[cq + 1] = cube[1];
        // arm starts pointing away from the cube so it never starts touching it
        q[0] = Math.atan2(-cube[1], -cube[0]) + rng.uniform(-0.6, 0.6);
        q[1] = rng.uniform(0.8, 1.8) * (rng.next() < 0.5 ? -1 : 1);
        return goal;
      },
      observe(data: SimData, goal: number, out: Float32Array): void {
        const q = data.raw.qpos as Float64Array;
        const qd = data.raw.qvel as Float64Array;
        const sx = data.raw.site_xpos as Float64Array;
        const mp = data.raw.mocap_pos as Float64Array;
        armState(q, qd, sx, tip, out);
        out[6] = q[cq]!;
        out[7] = q[cq + 1]!;
        out[8] = qd[cv]!;
        out[9] = qd[cv + 1]!;
        for (let i = 0; i < 3; i++) {
          out[10 + 2 * i] = mp[3 * mocap[i]!]!;
          out[11 + 2 * i] = mp[3 * mocap[i]! + 1]!;
          out[G + i] = i === goal ? 1 : 0;
        }
        out[REL] = mp[3 * mocap[goal]!]! - q[cq]!;
        out[REL + 1] = mp[3 * mocap[goal]! + 1]! - q[cq + 1]!;
        out[REL + 2] = q[cq]! - sx[3 * tip]!;
        out[REL + 3] = q[cq + 1]! - sx[3 * tip + 1]!;
      },
      pose(data: SimData, state: Float32Array): void {
        const q = data.raw.qpos as Float64Array;
        const mp = data.raw.mocap_pos as Float64Array;
        q[cq] = state[6]!;
        q[cq + 1] = state[7]!;
        for (let i = 0; i < 3; i++) {
          mp[3 * mocap[i]!] = state[10 + 2 * i]!;
          mp[3 * mocap[i]! + 1] = state[11 + 2 * i]!;
        }
      },
      goalPosition(data: SimData, goal: number): [number, number] {
        const mp = data.raw.mocap_pos as Float64Array;
        return [mp[3 * mocap[goal]!]!, mp[3 * mocap[goal]! + 1]!];
      },
      evaluate(data: SimData, goal: number, action: Float32Array) {
        const q = data.raw.qpos as Float64Array;
        const qd = data.raw.qvel as Float64Array;
        const sx = data.raw.site_xpos as Float64Array;
        const mp = data.raw.mocap_pos as Float64Array;
        const px = mp[3 * mocap[goal]!]!, py = mp[3 * mocap[goal]! + 1]!;
        const cx = q[cq]!, cy = q[cq + 1]!;
        const inside = Math.abs(cx - px) < PAD && Math.abs(cy - py) < PAD;
        const success = inside && Math.hypot(qd[cv]!, qd[cv + 1]!) < 0.05;
        const cubeToPad = Math.hypot(cx - px, cy - py);
        const tipToCube = Math.hypot(sx[3 * tip]! - cx, sx[3 * tip + 1]! - cy);
        const effort = action[0]! * action[0]! + action[1]! * action[1]!;
        return { reward: -cubeToPad - 0.2 * tipToCube - 0.01 * effort + (success ? 1 : 0), success };
      },
      expert: () => pushExpert(G),
      demonstrator: (o) => pushDemonstrator(G, o.latencySteps, o.controlDt),
    };
  },
};

/** How the push logic moves the arm: where it takes the tip to be, and the command towards a tip setpoint. */
interface PushDrive {
  /** Called first on every observation: the tip position the logic plans from. */
  tip(s: Float32Array): [number, number];
  command(s: Float32Array, sp: [number, number]): Float32Array;
}

/** The scripted expert's drive: the observed tip, a joint PD (kp 6, kd 0.4) on the observed joints. */
const DIRECT: PushDrive = {
  tip: (s) => [s[4]!, s[5]!],
  command: (s, sp) => pd([s[0]!, s[1]!], [s[2]!, s[3]!], ik(sp[0], sp[1], s[1]!), 6, 0.4),
};

/** Actuation gain (rad/s² per unit command) the demonstrator's gains are designed for, and its first guess. */
const PUSH_B_REF = 80;

/**
 * The demonstrator's drive: the tip and joints the ActuationPredictor expects when this command takes effect,
 * a joint PD on them (kp 6, kd 0.15: less damping, which a delayed velocity turns against the motion) scaled
 * by the identified actuation gain.
 */
function predictiveDrive(latency: number, dt: number): PushDrive & { executed(a: ArrayLike<number>): void } {
  const pr = new ActuationPredictor(2, latency, dt, PUSH_B_REF / 2, PUSH_B_REF);
  let pred = { q: [0, 0], qd: [0, 0] };
  const clip = (v: number) => Math.max(-1, Math.min(1, v));
  return {
    tip(s) {
      pr.observe([s[2]!, s[3]!]);
      pred = pr.predict([s[0]!, s[1]!], [s[2]!, s[3]!]);
      return tipOf(pred.q[0]!, pred.q[1]!);
    },
    command(_s, sp) {
      const [q0, q1] = pred.q as [number, number];
      const t = ik(sp[0], sp[1], q1);
      const e0 = Math.atan2(Math.sin(t[0] - q0), Math.cos(t[0] - q0)), e1 = t[1] - q1;
      const a = Float32Array.of(clip(pr.scale(0) * (6 * e0 - 0.15 * pred.qd[0]!)), clip(pr.scale(1) * (6 * e1 - 0.15 * pred.qd[1]!)));
      pr.record(a);
      return a;
    },
    executed(a) {
      pr.record(a, true);
    },
  };
}

function pushDemonstrator(G: number, latency: number, dt: number): Demonstrator {
  const drive = predictiveDrive(latency, dt);
  const logic = pushExpert(G, drive);
  return { act: (obs) => logic.act(obs), executed: (a) => drive.executed(a) };
}

/** Get behind the cube on the line from the pad through it, then push along that line; re-approach on drift. */
function pushExpert(G: number, drive: PushDrive = DIRECT) {
  let phase: 'approach' | 'push' = 'approach';
  let sp: [number, number] | undefined; // Cartesian setpoint, moved at bounded speed so paths stay near-straight
  const BEHIND = CUBE + FINGER + 0.016;
  return {
    act(obs: Obs): Float32Array {
      const s = obs.state;
      const g = argmaxFrom(s, G, 3);
      const tip = drive.tip(s);
      const c: [number, number] = [s[6]!, s[7]!];
      const pad: [number, number] = [s[10 + 2 * g]!, s[11 + 2 * g]!];
      sp ??= tip;
      let dx = pad[0] - c[0], dy = pad[1] - c[1];
      const dist = Math.hypot(dx, dy);
      dx /= dist || 1;
      dy /= dist || 1;
      const nx = -dy, ny = dx;
      const rx = tip[0] - c[0], ry = tip[1] - c[1];
      const along = rx * dx + ry * dy;
      const perp = rx * nx + ry * ny;
      const behind: [number, number] = [c[0] - dx * BEHIND, c[1] - dy * BEHIND];
      const touching = CUBE + FINGER;
      let target: [number, number];
      let speed = 0.012;
      if (phase === 'push' && (Math.abs(perp) > 0.02 || along > -CUBE)) phase = 'approach';
      if (phase === 'approach' && Math.hypot(tip[0] - behind[0], tip[1] - behind[1]) < 0.012) phase = 'push';
      if (phase === 'push') {
        // finger a little inside the cube's face pushes it; back off once the centre is on the pad's centre
        const ahead = dist < 0.015 ? -BEHIND : -touching + Math.min(0.03, dist);
        target = [c[0] + dx * ahead, c[1] + dy * ahead];
        speed = 0.008;
      } else if (along < -touching + 0.004) {
        target = behind;
      } else {
        // wrong side: go round the cube on the side the finger is on, to a point level with the back face
        const side = perp >= 0 ? 1 : -1;
        const back = Math.hypot(rx, ry) < 0.085 ? -0.035 : 0;
        target = [c[0] + side * nx * 0.075 + dx * back, c[1] + side * ny * 0.075 + dy * back];
      }
      const ex = target[0] - sp[0], ey = target[1] - sp[1];
      const el = Math.hypot(ex, ey);
      const k = el > speed ? speed / el : 1;
      sp = [sp[0] + ex * k, sp[1] + ey * k];
      // keep the setpoint near the real tip so a blocked arm does not wind up
      const lag = Math.hypot(sp[0] - tip[0], sp[1] - tip[1]);
      if (lag > 0.04) sp = [tip[0] + ((sp[0] - tip[0]) * 0.04) / lag, tip[1] + ((sp[1] - tip[1]) * 0.04) / lag];
      return drive.command(s, sp);
    },
  };
}
