// reach: move the arm's tip onto the target of the named colour and hold it there.
import { join } from 'node:path';
import type { SimData, SimModel } from '../mujoco.js';
import type { Rng } from '../rng.js';
import { type BoundTask, type TaskDef } from '../task.js';
import type { Demonstrator, Obs } from '../types.js';
import { e, pick, sub } from '../../common/derived.js';
import { ActuationPredictor, ARM_TIP, armLayout, armState, dlsReach, dlsStep, tipOf, tipVelocity } from './arm.js';
import { COLOURS, spreadPoints } from './layout.js';
import { packagePath } from '../../common/package-root.js';

const ASSETS = packagePath('sim', 'assets', 'reach');
const RADIUS = 0.03;
const MAX_SPEED = 0.1;

export const reach: TaskDef = {
  name: 'reach',
  scene: join(ASSETS, 'scene.xml'),
  substeps: 10,
  horizon: 100,
  camera: 'top',
  bind(model: SimModel): BoundTask {
    const tip = model.id('mjOBJ_SITE', 'tip');
    const mocap = COLOURS.map((c) => (model.raw.body_mocapid as Int32Array)[model.id('mjOBJ_BODY', `target_${c}`)]!);
    // Every feature past the tip measures the world (flagged scene): the targets, the goal's one-hot, its offset from the tip.
    const layout = armLayout([
      ...COLOURS.flatMap((c) => [{ name: `${c} target x`, unit: 'm' }, { name: `${c} target y`, unit: 'm' }]),
      ...COLOURS.map((c) => ({ name: `goal is ${c}`, unit: '1' })),
      { name: 'goal x - tip x', unit: 'm' },
      { name: 'goal y - tip y', unit: 'm' },
    ].map((f) => ({ ...f, scene: true as const })));
    const tipDist = (data: SimData, goal: number) => {
      const sx = data.raw.site_xpos as Float64Array;
      const mp = data.raw.mocap_pos as Float64Array;
      return Math.hypot(sx[3 * tip]! - mp[3 * mocap[goal]!]!, sx[3 * tip + 1]! - mp[3 * mocap[goal]! + 1]!);
    };
    return {
      actuatorNames: ['shoulder', 'elbow'],
      layout,
      instructions: COLOURS.map((c) => `reach the ${c} target`),
      keyframe: 'home',
      // Targets and the goal's one-hot hold still; the tip follows the joints; goal - tip selects the goal's target by the one-hot.
      derived: {
        held: [6, 7, 8, 9, 10, 11, 12, 13, 14],
        computed: [
          ...ARM_TIP,
          { entry: 15, expr: sub(pick(12, 6, 3, 2), e(4)) },
          { entry: 16, expr: sub(pick(12, 7, 3, 2), e(5)) },
        ],
      },
      resetEpisode(data: SimData, rng: Rng): number {
        const mp = data.raw.mocap_pos as Float64Array;
        spreadPoints(rng, 3, 0.12, 0.36, 0.1).forEach(([x, y], i) => {
          mp[3 * mocap[i]!] = x;
          mp[3 * mocap[i]! + 1] = y;
        });
        const q = data.raw.qpos as Float64Array;
        q[0] = rng.uniform(-Math.PI, Math.PI);
        q[1] = rng.uniform(0.3, 2.2) * (rng.next() < 0.5 ? -1 : 1);
        return rng.intIn(0, 2);
      },
      observe(data: SimData, goal: number, out: Float32Array): void {
        const q = data.raw.qpos as Float64Array;
        const qd = data.raw.qvel as Float64Array;
        const sx = data.raw.site_xpos as Float64Array;
        const mp = data.raw.mocap_pos as Float64Array;
        armState(q, qd, sx, tip, out);
        for (let i = 0; i < 3; i++) {
          out[6 + 2 * i] = mp[3 * mocap[i]!]!;
          out[7 + 2 * i] = mp[3 * mocap[i]! + 1]!;
          out[12 + i] = i === goal ? 1 : 0;
        }
        // the goal relative to the tip: what a reaching controller acts on
        out[15] = mp[3 * mocap[goal]!]! - sx[3 * tip]!;
        out[16] = mp[3 * mocap[goal]! + 1]! - sx[3 * tip + 1]!;
      },
      pose(data: SimData, state: Float32Array): void {
        const mp = data.raw.mocap_pos as Float64Array;
        for (let i = 0; i < 3; i++) {
          mp[3 * mocap[i]!] = state[6 + 2 * i]!;
          mp[3 * mocap[i]! + 1] = state[7 + 2 * i]!;
        }
      },
      goalPosition(data: SimData, goal: number): [number, number] {
        const mp = data.raw.mocap_pos as Float64Array;
        return [mp[3 * mocap[goal]!]!, mp[3 * mocap[goal]! + 1]!];
      },
      evaluate(data: SimData, goal: number, action: Float32Array) {
        const q = data.raw.qpos as Float64Array;
        const qd = data.raw.qvel as Float64Array;
        const dist = tipDist(data, goal);
        const [vx, vy] = tipVelocity(q[0]!, q[1]!, qd[0]!, qd[1]!);
        const success = dist < RADIUS && Math.hypot(vx, vy) < MAX_SPEED;
        const effort = action[0]! * action[0]! + action[1]! * action[1]!;
        return { reward: -dist - 0.01 * effort + (success ? 1 : 0), success };
      },
      expert: () => ({
        act(obs: Obs): Float32Array {
          const s = obs.state;
          return dlsReach(s[0]!, s[1]!, s[2]!, s[3]!, s[15]!, s[16]!, 6, 0.4);
        },
      }),
      demonstrator: (o) => reachDemonstrator(o.latencySteps, o.controlDt),
    };
  },
};

/** Actuation gain (rad/s² per unit command) the demonstrator's gains are designed for, and its first guess. */
const REACH_B_REF = 40;

/**
 * The expert's damped-least-squares reach, driven through an ActuationPredictor: it steers the tip the
 * predictor expects when this command takes effect towards the goal (observed tip + observed goal offset),
 * with the joint PD scaled by the identified actuation gain.
 */
function reachDemonstrator(latency: number, dt: number): Demonstrator {
  const pr = new ActuationPredictor(2, latency, dt, REACH_B_REF, REACH_B_REF);
  const KP = 6, KD = 0.4;
  return {
    act(obs: Obs): Float32Array {
      const s = obs.state;
      pr.observe([s[2]!, s[3]!]);
      const { q, qd } = pr.predict([s[0]!, s[1]!], [s[2]!, s[3]!]);
      const tip = tipOf(q[0]!, q[1]!);
      const dq = dlsStep(q[0]!, q[1]!, s[4]! + s[15]! - tip[0], s[5]! + s[16]! - tip[1]);
      const clip = (x: number) => Math.max(-1, Math.min(1, x));
      const a = Float32Array.of(clip(pr.scale(0) * (KP * dq[0] - KD * qd[0]!)), clip(pr.scale(1) * (KP * dq[1] - KD * qd[1]!)));
      pr.record(a);
      return a;
    },
    executed(action: ArrayLike<number>): void {
      pr.record(action, true);
    },
  };
}
