// Robots described by robot YAMLs as a trainer's robot target: the real path (rosbridge, native ROS 2 or MQTT), where
// episodes run in real time, seeded resets go through `services.reset_seed_topic` (over MQTT the reset request
// carries the seed) and the reward and success of each step come from the robot's `outcome_topic` (over MQTT its
// outcome channel, which its spec announces). Several YAMLs make a fleet (wmrl/fleet.ts): its robots run episodes at once.
import { loadRobotConfig, type RobotConfig } from '../hardware/config.js';
import type { Scorer } from '../hardware/record.js';
import { openRobot } from '../hardware/robots/index.js';
import { SafetyLayer, type InterventionEvent } from '../hardware/safety.js';
import { fleetRobots, fleetTarget, robotTarget, type ClosableTarget } from './embodied.js';
import type { TargetRobot } from './fleet.js';

export interface YamlRobotTargetOptions {
  /** Path of the robot YAML; several: a fleet of those robots. */
  config: string | readonly string[];
  /** Control steps per episode (the task's horizon). */
  maxSteps: number;
  store?: string;
  /** Robots the accounting stands one robot in for (a fleet's robots are its own: 1 there). */
  robots: number;
  resetSeconds: number;
  /** Task name recorded with each episode. */
  task?: string;
  log?: (e: InterventionEvent) => void;
  signal?: AbortSignal;
  /** A fleet's robot lost mid-run (its episode runs again on another). */
  onLost?: (robot: TargetRobot, error: Error, left: number) => void;
}

/** Why a robot YAML cannot train before connecting to it, or null: the outcome topic and seeded resets a ROS robot declares. */
function configProblem(path: string, cfg: RobotConfig): string | null {
  if (cfg.transport === 'mqtt') return null;
  if (!cfg.outcomeTopic) return `${path}: training needs the robot's reward and success each step: declare outcome_topic (std_msgs/Float64MultiArray [t, reward, success, terminated, truncated])`;
  if (!cfg.services.resetSeed) return `${path}: training needs seeded resets (a prompt is a start state the reset reproduces): declare services.reset_seed_topic`;
  return null;
}

/** The robot a YAML declares, connected behind the safety layer it configures, with its outcome signal. */
async function trainingRobot(path: string, cfg: RobotConfig, log: YamlRobotTargetOptions['log']): Promise<{ robot: SafetyLayer; outcome: Scorer }> {
  const { robot, link } = await openRobot(cfg);
  if (!link.outcome) {
    await robot[Symbol.asyncDispose]();
    throw new Error(`${path}: robot '${cfg.mqtt?.robotId ?? cfg.spec.name}' reports no outcome of its steps, which training scores episodes by: its robot side publishes each control step's outcome on wmrl/robots/{id}/outcome and announces it in its spec (serveRobotOverMqtt reportsOutcome; \`wmrl sim-robot --transport mqtt\` does)`);
  }
  return { robot: new SafetyLayer(robot, cfg.safety, { log }), outcome: link.outcome };
}

export async function yamlRobotTarget(o: YamlRobotTargetOptions): Promise<ClosableTarget> {
  const paths = typeof o.config === 'string' ? [o.config] : [...o.config];
  if (paths.length === 0) throw new Error('yamlRobotTarget: no robot YAML');
  if (paths.length > 1 && o.robots !== 1) throw new Error(`robots ${o.robots} stands one robot in for several in the robot-time accounting; a fleet of ${paths.length} robot YAMLs is its own robots`);
  const cfgs = paths.map((p) => ({ path: p, cfg: loadRobotConfig(p) }));
  for (const { path, cfg } of cfgs) {
    const problem = configProblem(path, cfg);
    if (problem) throw new Error(problem);
  }
  const names = cfgs.map((c) => c.cfg.spec.name);
  const twice = names.find((n, i) => names.indexOf(n) !== i);
  if (twice !== undefined) throw new Error(`${paths.join(', ')}: two robot YAMLs name robot '${twice}'; a fleet's episodes are recorded by robot name`);
  const meta = (robot: SafetyLayer) => ({ robot: robot.spec.name, hardwareProfile: 'real', ...(o.task ? { task: o.task } : {}) });
  const opened: Array<{ robot: SafetyLayer; outcome: Scorer }> = [];
  try {
    for (const { path, cfg } of cfgs) opened.push(await trainingRobot(path, cfg, o.log));
  } catch (e) {
    await Promise.allSettled(opened.map((r) => r.robot[Symbol.asyncDispose]()));
    throw e;
  }
  if (opened.length === 1) {
    const { robot, outcome } = opened[0]!;
    return robotTarget(robot, { outcome, maxSteps: o.maxSteps, realTime: true, store: o.store, meta: meta(robot), robots: o.robots, resetSeconds: o.resetSeconds, signal: o.signal });
  }
  try {
    return fleetTarget(fleetRobots(opened.map((r) => ({ ...r, meta: meta(r.robot) }))), { maxSteps: o.maxSteps, realTime: true, store: o.store, resetSeconds: o.resetSeconds, signal: o.signal, onLost: o.onLost });
  } catch (e) {
    await Promise.allSettled(opened.map((r) => r.robot[Symbol.asyncDispose]()));
    throw e;
  }
}
