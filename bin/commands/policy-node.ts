// `wmrl policy-node`: the robot-side policy node (hardware/policy-node.ts) on native ROS 2 — an artifact run on the
// robot's own machine at its rate, limits and layout, the topics given as flags (the ROS 2 package's launch file
// passes them). Runs until Ctrl-C or --steps; the robot is held, then the node exits.
import { firstObservation, policyNodeConfig, runPolicyNode, startPolicyNode } from '../../hardware/policy-node.js';

export interface PolicyNodeOptions {
  policy: string;
  stateTopic: string;
  commandTopic: string;
  commandMode: 'forward_command' | 'joint_trajectory';
  trajectoryField: 'positions' | 'velocities';
  featuresTopic?: string;
  cameraTopic?: string;
  cameraEncoding: 'rgb8' | 'png' | 'jpeg';
  instructionTopic?: string;
  estopService?: string;
  steps?: number;
}

/** An optional topic given empty is not given: the launch file passes every one, empty when unused. */
const given = (s?: string) => (s ? s : undefined);

export async function policyNode(o: PolicyNodeOptions): Promise<void> {
  const config = policyNodeConfig(o.policy, {
    state: o.stateTopic,
    command: { mode: o.commandMode, topic: o.commandTopic, trajectoryField: o.trajectoryField },
    features: given(o.featuresTopic),
    camera: given(o.cameraTopic),
    cameraEncoding: o.cameraEncoding,
    instruction: given(o.instructionTopic),
    estop: given(o.estopService),
  });
  const { Ros2Robot } = await import('../../hardware/robots/ros2.js');
  const raw = await Ros2Robot.connect(config);
  // Before the safety layer: its watchdog, set to stop, would latch while the first messages are on their way.
  try {
    await firstObservation(raw);
  } catch (e) {
    await raw[Symbol.asyncDispose]();
    throw e;
  }
  const { robot, policy } = await startPolicyNode(o.policy, raw, config, (e) => console.error(`safety: ${e.kind}: ${e.detail}`));
  const stop = new AbortController();
  process.once('SIGINT', () => stop.abort());
  process.once('SIGTERM', () => stop.abort());
  console.error(`policy-node: ${o.policy} on ${config.spec.joints.length} joints at ${config.spec.controlHz} Hz → ${o.commandTopic}`);
  try {
    const s = await runPolicyNode(robot, policy, { signal: stop.signal, maxSteps: o.steps });
    await robot.act(robot.holdAction());
    console.log(JSON.stringify({ steps: s.steps, late: s.late, heldStale: s.heldStale, estopped: robot.isEstopped, interventions: Object.fromEntries(Object.entries(s.interventions).filter(([, v]) => v > 0)) }));
  } finally {
    await robot[Symbol.asyncDispose]();
  }
}
