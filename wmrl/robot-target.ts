// A robot described by a robot YAML as a trainer's robot target: the real path (rosbridge or native ROS 2), where
// episodes run in real time, seeded resets go through `services.reset_seed_topic` and the reward and
// success of each step come from the robot's `outcome_topic`.
import { CommandHistoryRobot } from '../hardware/command-history.js';
import { loadRobotConfig } from '../hardware/config.js';
import { RosRobot } from '../hardware/robots/ros.js';
import { SafetyLayer, type InterventionEvent } from '../hardware/safety.js';
import { robotTarget, type ClosableTarget } from './embodied.js';

export interface YamlRobotTargetOptions {
  /** Path of the robot YAML. */
  config: string;
  /** Control steps per episode (the task's horizon). */
  maxSteps: number;
  store?: string;
  robots: number;
  resetSeconds: number;
  /** Task name recorded with each episode. */
  task?: string;
  log?: (e: InterventionEvent) => void;
  signal?: AbortSignal;
}

export async function yamlRobotTarget(o: YamlRobotTargetOptions): Promise<ClosableTarget> {
  const cfg = loadRobotConfig(o.config);
  if (cfg.transport === 'mqtt') throw new Error(`${o.config}: training on a robot runs over ROS 2 (transport rosbridge or ros2), not yet over MQTT`);
  if (!cfg.outcomeTopic) throw new Error(`${o.config}: training needs the robot's reward and success each step: declare outcome_topic (std_msgs/Float64MultiArray [t, reward, success, terminated, truncated])`);
  if (!cfg.services.resetSeed) throw new Error(`${o.config}: training needs seeded resets (a prompt is a start state the reset reproduces): declare services.reset_seed_topic`);
  const ros = cfg.transport === 'ros2' ? await (await import('../hardware/robots/ros2.js')).Ros2Robot.connect(cfg) : await RosRobot.connect(cfg);
  // The history records the commands as they leave the safety layer, as connectRobot does.
  const robot = new SafetyLayer(cfg.commandHistory ? new CommandHistoryRobot(ros, cfg.commandHistory) : ros, cfg.safety, { log: o.log });
  return robotTarget(robot, {
    outcome: () => ros.outcomeOfLastCommand(),
    maxSteps: o.maxSteps,
    realTime: true,
    store: o.store,
    meta: { robot: robot.spec.name, hardwareProfile: 'real', ...(o.task ? { task: o.task } : {}) },
    robots: o.robots,
    resetSeconds: o.resetSeconds,
    signal: o.signal,
  });
}
