// A robot whose observation also reports the last K commands it was sent. Under actuation latency the commands
// still in flight are part of the robot's state that no sensor shows; a policy trained on the sim with
// `commandHistory: K` (sim/env.ts) reads them, so a real robot must report them the same way. The sim robot
// does this inside its env (its hold before any command is the reset's controls); this wraps any other robot.
import { commandHistoryFeatures, declarationOf, layoutOf, defineLayout } from '../common/layout.js';
import type { RobotDeclaration, RobotObservation } from '../common/robot.js';
import { holdCommand } from './safety.js';
import type { ResetOptions, Robot } from './types.js';

/**
 * `spec` with `k` steps of command history appended to its features (its layout, as a policy trained on it reads
 * it). Each command's unit: normalized commands are dimensionless; a position command is in its joint's unit and a
 * velocity command in that per second (the i-th joint's, as the action spec pairs them).
 */
export function withCommandHistorySpec(spec: RobotDeclaration, k: number): RobotDeclaration {
  const layout = layoutOf(spec), kind = spec.action.kind;
  const unit = (i: number) => (kind === 'normalized' ? '1' : `${layout.joints[i]?.unit ?? 'rad'}${kind === 'joint_velocity' ? '/s' : ''}`);
  const history = commandHistoryFeatures(spec.action.names.map((name, i) => ({ name, unit: unit(i) })), k);
  return k === 0 ? spec : { ...spec, ...declarationOf(defineLayout(layout.joints, [...layout.features, ...history])) };
}

export class CommandHistoryRobot implements Robot {
  readonly spec: RobotDeclaration;
  /** The last k commands sent, newest first. */
  private commands: Float32Array[];
  /** Counts resets: a command still in flight when the robot is reset does not enter the new episode's history. */
  private episode = 0;

  constructor(readonly inner: Robot, readonly k: number) {
    this.spec = withCommandHistorySpec(inner.spec, k);
    if (k < 1) throw new Error(`${inner.spec.name}: a command history of ${k} steps reports nothing; wrap the robot only for k >= 1`);
    this.commands = Array.from({ length: k }, () => holdCommand(inner.spec));
  }

  private report(o: RobotObservation): RobotObservation {
    const n = o.features?.length ?? 0, A = this.spec.action.names.length;
    const features = new Float32Array(n + this.k * A);
    if (o.features) features.set(o.features);
    this.commands.forEach((c, i) => features.set(c, n + i * A));
    return { ...o, features };
  }

  async observe(): Promise<RobotObservation> {
    return this.report(await this.inner.observe());
  }

  /**
   * Records the command as it goes to the robot, within the action range (NaN as 0, as the sim takes it), in the
   * order commands are sent; a command the robot refuses (act throws) is taken back, and one still in flight when
   * the robot is reset stays out of the new episode's history.
   */
  async act(action: Float32Array): Promise<Float32Array> {
    const { low, high } = this.spec.action;
    const sent = Float32Array.from(action, (v, i) => (Number.isNaN(v) ? 0 : v < low[i]! ? low[i]! : v > high[i]! ? high[i]! : v));
    const episode = this.episode, before = this.commands;
    this.commands = [sent, ...this.commands.slice(0, this.k - 1)];
    try {
      return await this.inner.act(action);
    } catch (e) {
      // Refused: the history is as it was, unless later commands or a reset have moved it on since.
      if (this.episode === episode && this.commands[0] === sent) this.commands = before;
      throw e;
    }
  }

  /**
   * Before any command of an episode, every slot holds the command that keeps the robot where it starts
   * (hardware/safety.ts holdCommand: 0 for normalized and velocity commands). The sim's env fills them with the
   * command that holds its reset's controls instead, which is 0 for reach and push but not for pick: for a task
   * whose reset controls are not the hold, the first K steps of an episode differ from the sim's.
   */
  async reset(options?: ResetOptions): Promise<RobotObservation> {
    this.episode++;
    const o = await this.inner.reset(options);
    this.episode++;
    this.commands = Array.from({ length: this.k }, () => holdCommand(this.inner.spec, o.position));
    return this.report(o);
  }

  estop(): Promise<void> {
    return this.inner.estop();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.inner[Symbol.asyncDispose]();
  }
}
