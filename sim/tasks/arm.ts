// The planar two-link arm shared by `reach` and `push`: kinematics and the joint-space PD used by experts.
import { c, cosOf, e, prod, sinOf, sum, type DerivedExpr } from '../../common/derived.js';
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

/** The tip position (armLayout entries 4, 5) from the joint angles (entries 0, 1): `tipOf` as expressions a world model's graph evaluates. */
export const ARM_TIP: ReadonlyArray<{ entry: number; expr: DerivedExpr }> = [
  { entry: 4, expr: sum(prod(c(L1), cosOf(e(0))), prod(c(L2), cosOf(sum(e(0), e(1))))) },
  { entry: 5, expr: sum(prod(c(L1), sinOf(e(0))), prod(c(L2), sinOf(sum(e(0), e(1))))) },
];

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
  const [dq0, dq1] = dlsStep(q0, q1, dx, dy, lambda);
  const clip = (x: number) => Math.max(-1, Math.min(1, x));
  return Float32Array.of(clip(kp * dq0 - kd * qd0), clip(kp * dq1 - kd * qd1));
}

/** The joint step of `dlsReach` that moves the tip by (dx, dy): dq = Jᵀ (J Jᵀ + λ² I)⁻¹ dx. */
export function dlsStep(q0: number, q1: number, dx: number, dy: number, lambda = 0.05): [number, number] {
  const s0 = Math.sin(q0), c0 = Math.cos(q0), s01 = Math.sin(q0 + q1), c01 = Math.cos(q0 + q1);
  const j00 = -L1 * s0 - L2 * s01, j01 = -L2 * s01, j10 = L1 * c0 + L2 * c01, j11 = L2 * c01;
  const a = j00 * j00 + j01 * j01 + lambda * lambda, b = j00 * j10 + j01 * j11, d = j10 * j10 + j11 * j11 + lambda * lambda;
  const det = a * d - b * b;
  const u = (d * dx - b * dy) / det, v = (a * dy - b * dx) / det;
  return [j00 * u + j10 * v, j01 * u + j11 * v];
}

/** Tip position of joint angles (forward kinematics). */
export function tipOf(q0: number, q1: number): [number, number] {
  return [L1 * Math.cos(q0) + L2 * Math.cos(q0 + q1), L1 * Math.sin(q0) + L2 * Math.sin(q0 + q1)];
}

/**
 * What a demonstrator on a laggy, heavier or weaker robot does about it, per joint, from the observations
 * the robot reports and the commands it sent:
 * - gain identification through feedback: each joint's response qdd = b u − c qd, fitted online by
 *   recursive least squares (forgetting 0.995) from consecutive velocity observations and the command
 *   that was acting between them (the one sent `latency` steps earlier);
 * - latency compensation (a Smith predictor): the joint state `latency` steps ahead, when the next command
 *   takes effect, integrated from the observed state through the commands still in flight;
 * - gain compensation: `scale(j)` = bRef / b̂ⱼ turns a torque designed for actuation gain bRef into one for
 *   the gain identified.
 */
export class ActuationPredictor {
  private readonly sent: Float32Array[] = [];
  private readonly theta: Array<[number, number]>;
  private readonly cov: Array<[[number, number], [number, number]]>;
  private prevQd: number[] | null = null;

  constructor(readonly joints: number, readonly latency: number, readonly dt: number, b0: number, readonly bRef: number) {
    if (!(Number.isInteger(latency) && latency >= 0)) throw new Error(`ActuationPredictor: latency must be a whole number of control steps >= 0, got ${latency}`);
    if (!(dt > 0)) throw new Error(`ActuationPredictor: control period must be > 0 s, got ${dt}`);
    this.theta = Array.from({ length: joints }, () => [b0, 1]);
    this.cov = Array.from({ length: joints }, () => [[b0 * b0, 0], [0, 1]]);
  }

  /** The command acting during control step k (sent at step k − latency; the reset hold, zero, before any). */
  private acting(k: number): Float32Array | null {
    const i = k - this.latency;
    return i >= 0 ? this.sent[i] ?? null : null;
  }

  /** A new observed joint velocity (at step `sent.length`): one least-squares update per joint. */
  observe(qd: ArrayLike<number>): void {
    const k = this.sent.length;
    if (this.prevQd && k > 0) {
      const u = this.acting(k - 1);
      for (let j = 0; j < this.joints; j++) {
        const x0 = u ? u[j]! : 0, x1 = -this.prevQd[j]!;
        const y = (qd[j]! - this.prevQd[j]!) / this.dt;
        const P = this.cov[j]!, th = this.theta[j]!, lam = 0.995;
        const p0 = P[0][0] * x0 + P[0][1] * x1, p1 = P[1][0] * x0 + P[1][1] * x1;
        const den = lam + x0 * p0 + x1 * p1;
        const k0 = p0 / den, k1 = p1 / den, err = y - (th[0] * x0 + th[1] * x1);
        th[0] = Math.max(0.1 * this.bRef, th[0] + k0 * err);
        th[1] = Math.max(0, th[1] + k1 * err);
        const p = [p0, p1];
        for (let a = 0; a < 2; a++) for (let b = 0; b < 2; b++) P[a as 0 | 1][b as 0 | 1] = (P[a as 0 | 1][b as 0 | 1] - [k0, k1][a]! * p[b]!) / lam;
      }
    }
    this.prevQd = Array.from(qd);
  }

  /** The joint state when the next command takes effect: the observed one carried through the commands in flight. */
  predict(q: ArrayLike<number>, qd: ArrayLike<number>): { q: number[]; qd: number[] } {
    const pq = Array.from(q), pv = Array.from(qd), k = this.sent.length;
    for (let step = k; step < k + this.latency; step++) {
      const u = this.acting(step);
      for (let j = 0; j < this.joints; j++) {
        const [b, c] = this.theta[j]!;
        pv[j]! += (b * (u ? u[j]! : 0) - c * pv[j]!) * this.dt;
        pq[j]! += pv[j]! * this.dt;
      }
    }
    return { q: pq, qd: pv };
  }

  /** Multiplier that turns a torque designed for actuation gain bRef into one for joint j's identified gain. */
  scale(j: number): number {
    return this.bRef / this.theta[j]![0];
  }

  /** The identified gain b̂ (rad/s² per unit command) and damping ĉ (1/s) of joint j. */
  identified(j: number): { gain: number; damping: number } {
    return { gain: this.theta[j]![0], damping: this.theta[j]![1] };
  }

  /** Records the command sent this step (after act); `replace` corrects it when another command was executed instead. */
  record(a: ArrayLike<number>, replace = false): void {
    const v = Float32Array.from(a, (x) => Math.max(-1, Math.min(1, x)));
    if (replace && this.sent.length) this.sent[this.sent.length - 1] = v;
    else this.sent.push(v);
  }
}
