// Reset and e-stop as a ros2_control robot has them, whatever the transport (rosbridge, rclnodejs, the robot-side
// services node): reset drives the joints to the robot YAML's home pose with one trajectory a stock
// joint_trajectory_controller accepts (its topic or its FollowJointTrajectory action), then waits until every joint
// is there; e-stop deactivates the command controllers through the controller manager's SwitchController, STRICT.
import { toRosTime } from '../../bridge/ros/msgs.js';
import { trajectoryRefusal, type JointTrajectoryMsg } from '../../bridge/ros/trajectory.js';
import type { HomeConfig, RobotConfig } from '../config.js';

export const JOINT_TRAJECTORY = 'trajectory_msgs/msg/JointTrajectory';
export const FOLLOW_JOINT_TRAJECTORY = 'control_msgs/action/FollowJointTrajectory';
export const SWITCH_CONTROLLER = 'controller_manager_msgs/srv/SwitchController';
/** SwitchController's strictness constants. */
export const BEST_EFFORT = 1;
export const STRICT = 2;

export interface SwitchControllerRequest {
  activate_controllers: string[];
  deactivate_controllers: string[];
  strictness: number;
  activate_asap: boolean;
  timeout: { sec: number; nanosec: number };
}
/** `message` arrived after Humble; older controller managers answer `ok` alone. */
export interface SwitchControllerResponse {
  ok: boolean;
  message?: string;
}
export interface FollowJointTrajectoryResult {
  error_code: number;
  error_string?: string;
}

/** control_msgs/action/FollowJointTrajectory's result codes. */
const FJT_ERRORS: Record<number, string> = { [-1]: 'INVALID_GOAL', [-2]: 'INVALID_JOINTS', [-3]: 'OLD_HEADER_TIMESTAMP', [-4]: 'PATH_TOLERANCE_VIOLATED', [-5]: 'GOAL_TOLERANCE_VIOLATED' };

/** What a transport gives this module: the controller's topic, action and services, and the robot's joint states. */
export interface ControllerLink {
  publishTrajectory(topic: string, msg: JointTrajectoryMsg): void;
  /** Sends the goal; resolves with the action's result, rejects when the goal is refused, aborted or times out. */
  followTrajectory(action: string, goal: { trajectory: JointTrajectoryMsg }, timeoutMs: number): Promise<FollowJointTrajectoryResult>;
  switchControllers(service: string, req: SwitchControllerRequest): Promise<SwitchControllerResponse>;
  /** The latest joint positions in `spec.joints` order, or undefined before the first joint state. */
  positions(): ArrayLike<number> | undefined;
  /** Resolves once `cond` holds (checked at least on every joint state); rejects after `timeoutMs`. */
  until(cond: () => boolean, timeoutMs: number, what: string): Promise<void>;
}

export const switchRequest = (activate: string[], deactivate: string[], strictness = STRICT): SwitchControllerRequest => ({
  activate_controllers: activate,
  deactivate_controllers: deactivate,
  strictness,
  activate_asap: false,
  timeout: { sec: 0, nanosec: 0 },
});

/**
 * A joint that may turn without end (no position limits, in radians): a joint_trajectory_controller with angle
 * wraparound takes the short way round, so its distance from home counts modulo a turn.
 */
const continuous = (c: RobotConfig, j: number) => {
  const [lo, hi] = c.spec.positionLimits[j] ?? [-Infinity, Infinity];
  return lo === -Infinity && hi === Infinity && (c.spec.jointUnits?.[j] ?? 'rad') === 'rad';
};
function offset(c: RobotConfig, j: number, q: number, home: number): number {
  const d = q - home;
  return continuous(c, j) ? Math.abs(d - 2 * Math.PI * Math.round(d / (2 * Math.PI))) : Math.abs(d);
}

/** The joints not within tolerance of home, described (`elbow at 0.530, home 0.000`); empty when all are home. */
export function jointsNotHome(c: RobotConfig, q: ArrayLike<number>): string[] {
  const h = c.home!;
  return c.spec.joints.flatMap((name, j) => (offset(c, j, q[j]!, h.positions[j]!) <= h.tolerance ? [] : [`${name} at ${q[j]!.toFixed(3)}, home ${h.positions[j]!.toFixed(3)}`]));
}

/**
 * The time the move from `q` to home takes: `min_duration_s`, or longer where a joint would pass its velocity limit
 * (a rest-to-rest cubic, which the controller interpolates from positions and zero velocities, peaks at 1.5 times
 * the mean speed).
 */
export function homeDuration(c: RobotConfig, q: ArrayLike<number>): number {
  const h = c.home!;
  let t = h.minDurationS;
  c.spec.joints.forEach((_, j) => {
    const v = c.spec.velocityLimits[j] ?? Infinity;
    if (Number.isFinite(v)) t = Math.max(t, (1.5 * Math.abs(q[j]! - h.positions[j]!)) / v);
  });
  return t;
}

/**
 * The home move as one trajectory point: every joint by name, zero stamp (started on receipt, whatever the clocks'
 * skew), positions with zero velocities reached after `durationS`. Checked against the controller's rules first.
 */
export function homeTrajectory(c: RobotConfig, durationS: number): JointTrajectoryMsg {
  const h: HomeConfig = c.home!;
  const msg: JointTrajectoryMsg & { header: { stamp: { sec: number; nanosec: number }; frame_id: string } } = {
    header: { stamp: { sec: 0, nanosec: 0 }, frame_id: '' },
    joint_names: [...c.spec.joints],
    points: [{ positions: [...h.positions], velocities: h.positions.map(() => 0), accelerations: [], effort: [], time_from_start: toRosTime(durationS) }],
  };
  const refusal = trajectoryRefusal(msg, { joints: c.spec.joints, now: Date.now() / 1000 });
  if (refusal) throw new Error(`${c.spec.name}: the home trajectory would be refused by a joint_trajectory_controller: ${refusal}`);
  return msg;
}

/** Reset through the home pose and e-stop through the controller manager, for one robot over one link. */
export class RosControl {
  /** The home move in progress: an e-stop ends it, and it then switches nothing back on. */
  private homing: { aborted: boolean } | null = null;

  constructor(private readonly config: RobotConfig, private readonly link: ControllerLink) {}

  private get name(): string {
    return this.config.spec.name;
  }

  private get switchService(): string {
    return `${this.config.controllerManager!.name}/switch_controller`;
  }

  private async switchOrFail(activate: string[], deactivate: string[], what: string): Promise<void> {
    const r = await this.link.switchControllers(this.switchService, switchRequest(activate, deactivate));
    if (!r.ok) throw new Error(`${this.name}: ${what}: the controller manager refused (STRICT) to activate [${activate.join(', ')}] and deactivate [${deactivate.join(', ')}]${r.message ? `: ${r.message}` : ''}`);
  }

  /**
   * Drives the joints home and resolves once every one is within tolerance; with a home controller, switches to
   * it first and back to the command controllers after (unless an e-stop came in between).
   */
  async home(): Promise<void> {
    const h = this.config.home;
    if (!h) throw new Error(`${this.name}: its robot config declares no home pose`);
    const cm = this.config.controllerManager;
    const run = { aborted: false };
    this.homing = run;
    try {
      if (cm?.homeController) {
        await this.switchOrFail([cm.homeController], cm.commandControllers, `reset: switching to ${cm.homeController} (after an e-stop the operator reactivates ${cm.commandControllers.join(', ')} first)`);
      }
      let moveError: Error | undefined;
      try {
        await this.move(h, run);
      } catch (e) {
        moveError = e as Error;
      }
      if (cm?.homeController && !run.aborted) {
        try {
          await this.switchOrFail(cm.commandControllers, [cm.homeController], `reset: switching back from ${cm.homeController}`);
        } catch (e) {
          throw new Error(moveError ? `${moveError.message}; then ${(e as Error).message}` : (e as Error).message, { cause: moveError ?? e });
        }
      }
      if (moveError) throw moveError;
    } finally {
      if (this.homing === run) this.homing = null;
    }
  }

  private async move(h: HomeConfig, run: { aborted: boolean }): Promise<void> {
    const q = this.link.positions();
    if (!q) throw new Error(`${this.name}: no joint state yet, so the home move cannot be planned`);
    const duration = homeDuration(this.config, q);
    if (duration >= h.timeoutS) throw new Error(`${this.name}: the move home from here takes ${duration.toFixed(1)} s at the joints' velocity limits, not less than home.timeout_s (${h.timeoutS} s)`);
    const msg = homeTrajectory(this.config, duration);
    const deadline = performance.now() + h.timeoutS * 1000;
    if (h.topic) this.link.publishTrajectory(h.topic, msg);
    else {
      const r = await this.link.followTrajectory(h.action!, { trajectory: msg }, h.timeoutS * 1000);
      if (r.error_code !== 0) throw new Error(`${this.name}: reset: ${h.action} answered ${FJT_ERRORS[r.error_code] ?? 'error'} (${r.error_code})${r.error_string ? `: ${r.error_string}` : ''}`);
    }
    // Home means staying within tolerance for a few control periods: a joint swinging through home is not there.
    const settleMs = Math.max(100, 5000 / this.config.spec.controlHz);
    let since = Infinity;
    const home = () => {
      if (run.aborted) return true;
      if (jointsNotHome(this.config, this.link.positions()!).length > 0) since = Infinity;
      else since = Math.min(since, performance.now());
      return performance.now() - since >= settleMs;
    };
    try {
      await this.link.until(home, Math.max(0, deadline - performance.now()), 'the joints home');
    } catch (e) {
      const off = jointsNotHome(this.config, this.link.positions()!);
      throw new Error(`${this.name}: reset: not home within ${h.timeoutS} s (tolerance ${h.tolerance}): ${off.join('; ') || (e as Error).message}${h.topic ? ` — is the controller on ${h.topic} active? An e-stop through the controller manager deactivates it until the operator reactivates it` : ''}`, { cause: e });
    }
    if (run.aborted) throw new Error(`${this.name}: reset: the home move was interrupted by an e-stop`);
  }

  /** Deactivates the command controllers (the home controller while it drives the joints home), STRICT. */
  async estop(): Promise<void> {
    const cm = this.config.controllerManager;
    if (!cm) throw new Error(`${this.name}: its robot config declares no controller_manager`);
    if (this.homing) this.homing.aborted = true;
    const active = this.homing && cm.homeController ? [cm.homeController] : cm.commandControllers;
    const r = await this.link.switchControllers(this.switchService, switchRequest([], active));
    if (r.ok) return;
    // A refused STRICT switch changes nothing: stop whatever of them runs, then still report the refusal.
    const all = [...cm.commandControllers, ...(cm.homeController ? [cm.homeController] : [])];
    const r2 = await this.link.switchControllers(this.switchService, switchRequest([], all, BEST_EFFORT));
    throw new Error(`${this.name}: e-stop: the controller manager refused (STRICT) to deactivate [${active.join(', ')}]${r.message ? `: ${r.message}` : ''}; a BEST_EFFORT deactivation of [${all.join(', ')}] then ${r2.ok ? 'answered ok' : `failed too${r2.message ? `: ${r2.message}` : ''}`}`);
  }

  /** The operator's clear: the command controllers active again, STRICT. */
  async reactivate(): Promise<void> {
    const cm = this.config.controllerManager;
    if (!cm) throw new Error(`${this.name}: its robot config declares no controller_manager`);
    await this.switchOrFail(cm.commandControllers, [], 'clear');
  }
}
