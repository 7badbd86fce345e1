// Robots by transport. Optional, heavy dependencies load only in their own branch.
import type { RobotConfig } from '../config.js';
import { SafetyLayer, type InterventionEvent } from '../safety.js';
import type { Robot } from '../types.js';

const FACTORIES: Record<RobotConfig['transport'], (cfg: RobotConfig) => Promise<Robot>> = {
  rosbridge: async (cfg) => (await import('./ros.js')).RosRobot.connect(cfg),
  ros2: async (cfg) => (await import('./ros2.js')).Ros2Robot.connect(cfg),
};

/** Connects to the robot a config describes, always behind the safety layer it configures. */
export async function connectRobot(cfg: RobotConfig, log?: (e: InterventionEvent) => void): Promise<SafetyLayer> {
  const inner = await FACTORIES[cfg.transport](cfg);
  return new SafetyLayer(inner, cfg.safety, { log });
}
