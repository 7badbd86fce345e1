// `wmrl robot-services`: the robot-side services node (hardware/robot-services.ts) on native ROS 2 — reset to the
// robot YAML's home pose, e-stop through its controller manager (latched until the operator calls the clear service)
// and the outcome of each control step from its outcome_rule. Runs until Ctrl-C.
import { loadRobotConfig } from '../../hardware/config.js';
import { RobotServices } from '../../hardware/robot-services.js';

export interface RobotServicesCliOptions {
  robot: string;
  clearService: string;
}

export async function robotServices(o: RobotServicesCliOptions): Promise<void> {
  const config = loadRobotConfig(o.robot);
  const node = await RobotServices.start(config, { clear: o.clearService, log: (line) => console.error(`robot-services: ${line}`) });
  // Listening before the lines below are printed: whoever waits for them may stop the node at once.
  const stopped = new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  const { reset, estop, clear, outcome } = node.offer;
  console.error(`robot-services: ${config.spec.name}:`);
  if (reset) console.error(`  ${reset} (std_srvs/srv/Trigger): to home ${JSON.stringify(config.home!.positions)} through ${config.home!.topic ?? config.home!.action}`);
  if (estop) console.error(`  ${estop} (std_srvs/srv/Trigger): deactivates ${config.controllerManager!.commandControllers.join(', ')}, latched`);
  if (clear) console.error(`  ${clear} (std_srvs/srv/Trigger): the operator's clear: the controllers active again, the latch released`);
  if (outcome) console.error(`  ${outcome} (std_msgs/msg/Float64MultiArray): [t, reward, success, terminated, truncated] each control step`);
  await stopped;
  await node[Symbol.asyncDispose]();
}
