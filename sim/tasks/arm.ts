// The planar two-link arm shared by `reach` and `push`: kinematics and the joint-space PD used by experts.
import { defineLayout, type LayoutFeature, type ObservationLayout } from '../../common/layout.js';

export const L1 = 0.2;
export const L2 = 0.2;

export function tipVelocity(q0: number, q1: number, qd0: number, qd1: number): [number, number] {
  const s0 = Math.sin(q0), c0 = Math.cos(q0);
  const s01 = Math.sin(q0 + q1), c01 = Math.cos(q0 + q1);
  return [-L1 * s0 * qd0 - L2 * s01 * (qd0 + qd1), L1 * c0 * qd0 + L2 * c01 * (qd0 + qd1)];
}

const wrap = (a: number) => Math.atan2(Math.sin(a), Math.cos(a));

/**
 * Joint angles that put the tip at (x, y), keeping the elbow on the side it is on now (no flip through
 * the singularity). Targets out of reach are pulled onto the reachable annulus.
 */
export function ik(x: number, y: number, q1Now: number): [number, number] {
  let r = Math.hypot(x, y);
  const rMax = L1 + L2 - 1e-3;
  const rMin = Math.abs(L1 - L2) + 0.03;
  if (r < 1e-6) {
    x = rMin;
    y = 0;
    r = rMin;
  }
  const rc = Math.min(rMax, Math.max(rMin, r));
  x *= rc / r;
  y *= rc / r;
  const c1 = (rc * rc - L1 * L1 - L2 * L2) / (2 * L1 * L2);
  const q1 = (q1Now >= 0 ? 1 : -1) * Math.acos(Math.max(-1, Math.min(1, c1)));
  const q0 = Math.atan2(y, x) - Math.atan2(L2 * Math.sin(q1), L1 + L2 * Math.cos(q1));
  return [wrap(q0), q1];
}

/** Torque command in [-1, 1] from a joint PD; the shoulder error is wrapped (it turns all the way round). */
export function pd(q: [number, number], qd: [number, number], target: [number, number], kp: number, kd: number): Float32Array {
  const e0 = wrap(target[0] - q[0]);
  const e1 = target[1] - q[1];
  const clip = (v: number) => Math.max(-1, Math.min(1, v));
  return Float32Array.of(clip(kp * e0 - kd * qd[0]), clip(kp * e1 - kd * qd[1]));
}

/** The arm's layout: shoulder and elbow, then the tip position and the task's own features. */
export function armLayout(features: LayoutFeature[]): ObservationLayout {
  return defineLayout(
    [{ name: 'shoulder', unit: 'rad' }, { name: 'elbow', unit: 'rad' }],
    [{ name: 'tip x', unit: 'm' }, { name: 'tip y', unit: 'm' }, ...features],
  );
}

/** The two-link arm's part of the state, in armLayout order: joint angles, joint velocities, tip x/y (entries 0..5). */
export function armState(q: Float64Array, qd: Float64Array, siteXpos: Float64Array, tip: number, out: Float32Array): void {
  out[0] = q[0]!;
  out[1] = q[1]!;
  out[2] = qd[0]!;
  out[3] = qd[1]!;
  out[4] = siteXpos[3 * tip]!;
  out[5] = siteXpos[3 * tip + 1]!;
}

/**
 * Cartesian reaching: the joint step that moves the tip by (dx, dy), by damped least squares through
 * the arm's Jacobian (dq = Jᵀ (J Jᵀ + λ² I)⁻¹ dx), turned into a torque by a joint PD. Unlike
 * `ik` + `pd` it is a smooth function of the observation (no angle wrap, no elbow branch), which is what
 * a cloned policy can learn.
 */
export function dlsReach(q0: number, q1: number, qd0: number, qd1: number, dx: number, dy: number, kp: number, kd: number, lambda = 0.05): Float32Array {
  const s0 = Math.sin(q0), c0 = Math.cos(q0), s01 = Math.sin(q0 + q1), c01 = Math.cos(q0 + q1);
  const j00 = -L1 * s0 - L2 * s01, j01 = -L2 * s01, j10 = L1 * c0 + L2 * c01, j11 = L2 * c01;
  const a = j00 * j00 + j01 * j01 + lambda * lambda, b = j00 * j10 + j01 * j11, d = j10 * j10 + j11 * j11 + lambda * lambda;
  const det = a * d - b * b;
  const u = (d * dx - b * dy) / det, v = (a * dy - b * dx) / det;
  const clip = (x: number) => Math.max(-1, Math.min(1, x));
  return Float32Array.of(clip(kp * (j00 * u + j10 * v) - kd * qd0), clip(kp * (j01 * u + j11 * v) - kd * qd1));
}
