// The robot-side policy node: an exported artifact run on the robot's own ROS 2 machine, over rclnodejs and
// onnxruntime-node, with no bridge or service in between. Everything about the robot comes from the artifact's
// metadata — joints and features (the observation layout), the action and its limits, the control rate, the camera
// size — and only the topic names from the launch file; commands pass the same safety layer as the bridge's, and
// the node's own watchdog holds the robot whenever its joint states stop arriving.
import { readFileSync } from 'node:fs';
import { declarationOf, defineLayout, layoutFromJson, layoutOf } from '../common/layout.js';
import type { RobotDeclaration, RobotObservation } from '../common/robot.js';
import { readModelInfo } from '../nn/index.js';
import { ARTIFACT_KEYS } from '../policies/artifact.js';
import { OnnxPolicy } from '../policies/onnx-policy.js';
import { CommandHistoryRobot, withCommandHistorySpec } from './command-history.js';
import type { RobotConfig, RosCommandConfig } from './config.js';
import { DEFAULT_SAFETY, SafetyLayer, type InterventionEvent, type SafetyConfig } from './safety.js';
import type { Robot } from './types.js';

export interface PolicyNodeTopics {
  state: string;
  command: RosCommandConfig;
  features?: string;
  camera?: string;
  /** png or jpeg: sensor_msgs/CompressedImage; rgb8: sensor_msgs/Image. */
  cameraEncoding?: 'rgb8' | 'png' | 'jpeg';
  instruction?: string;
  estop?: string;
}

const meta = (md: Record<string, string>, key: string, path: string): unknown => {
  const text = md[key];
  if (text === undefined) throw new Error(`${path}: metadata '${key}' is missing: the policy node reads the robot from the artifact (export it with policies/artifact.ts)`);
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new Error(`${path}: metadata '${key}' is not JSON (${(e as Error).message})`);
  }
};

/** The robot an artifact was exported for, from its metadata: what the node checks and limits commands against. */
export function declarationFromArtifact(path: string, cameraEncoding: 'rgb8' | 'png' | 'jpeg' = 'jpeg'): RobotDeclaration {
  const info = readModelInfo(readFileSync(path));
  const md = info.metadata;
  const layout = layoutFromJson(md[ARTIFACT_KEYS.layout] ?? (() => { throw new Error(`${path}: metadata '${ARTIFACT_KEYS.layout}' is missing: the policy node reads the robot from the artifact`); })(), `${path} metadata '${ARTIFACT_KEYS.layout}'`);
  const action = meta(md, ARTIFACT_KEYS.action, path) as RobotDeclaration['action'];
  if (!action || !Array.isArray(action.names) || !Array.isArray(action.low) || !Array.isArray(action.high)) throw new Error(`${path}: metadata '${ARTIFACT_KEYS.action}' is not an action spec (kind, names, low, high)`);
  const controlHz = meta(md, ARTIFACT_KEYS.controlHz, path);
  if (typeof controlHz !== 'number' || !(controlHz > 0)) throw new Error(`${path}: metadata '${ARTIFACT_KEYS.controlHz}' is not a positive rate`);
  const image = info.inputs.find((i) => i.name === 'image');
  const n = layout.joints.length;
  const { features, featureUnits, sceneFeatures } = declarationOf(layout);
  return {
    name: `policy ${md[ARTIFACT_KEYS.policyVersion] ?? path}`,
    joints: layout.joints.map((j) => j.name),
    jointUnits: layout.joints.map((j) => j.unit),
    // The artifact holds no joint limits: the robot's controllers keep theirs; the node limits the action.
    positionLimits: Array.from({ length: n }, () => [-Infinity, Infinity] as [number, number]),
    velocityLimits: new Array<number>(n).fill(Infinity),
    action: { kind: action.kind, names: action.names, low: action.low, high: action.high },
    controlHz,
    ...(layout.features.length ? { features, featureUnits, ...(sceneFeatures ? { sceneFeatures } : {}) } : {}),
    ...(image ? { camera: { width: Number(image.shape[2]), height: Number(image.shape[1]), encoding: cameraEncoding } } : {}),
  };
}

/**
 * The command history an artifact's observation ends with (a policy trained on a robot reporting its last k commands:
 * sim/env.ts commandHistory, hardware/command-history.ts): its steps, and the robot's declaration without it — what the
 * robot's own topics report; the node adds the history from the commands it sends, as a robot YAML's command_history does.
 */
export function splitCommandHistory(spec: RobotDeclaration): { spec: RobotDeclaration; commandHistory: number } {
  const layout = layoutOf(spec), A = spec.action.names.length;
  let trailing = 0;
  while (trailing < layout.features.length && / command t-\d+$/.test(layout.features[layout.features.length - 1 - trailing]!.name)) trailing++;
  for (let k = Math.floor(trailing / A); k >= 1; k--) {
    const kept = layout.features.slice(0, layout.features.length - k * A);
    const { sceneFeatures: _scene, ...rest } = spec;
    const base: RobotDeclaration = { ...rest, ...declarationOf(defineLayout(layout.joints, kept)) };
    if (JSON.stringify(layoutOf(withCommandHistorySpec(base, k))) === JSON.stringify(layout)) return { spec: base, commandHistory: k };
  }
  return { spec, commandHistory: 0 };
}

/**
 * The node's robot config: the artifact's robot on native ROS 2 with the given topics, its safety layer's watchdog
 * at three control periods and set to stop (a node alone on a robot latches rather than holds forever).
 */
export function policyNodeConfig(path: string, topics: PolicyNodeTopics, safety: Partial<SafetyConfig> = {}): RobotConfig {
  const { spec, commandHistory } = splitCommandHistory(declarationFromArtifact(path, topics.cameraEncoding));
  if (spec.camera && !topics.camera) throw new Error(`${path}: the policy reads a camera image; give the camera topic`);
  if (spec.features?.length && !topics.features) throw new Error(`${path}: the policy reads ${spec.features.length} task features (${spec.features.slice(0, 3).join(', ')}…); give the features topic`);
  const period = 1000 / spec.controlHz;
  return {
    spec,
    ...(commandHistory ? { commandHistory } : {}),
    transport: 'ros2',
    url: '',
    command: topics.command,
    stateTopic: topics.state,
    ...(topics.features ? { featuresTopic: topics.features } : {}),
    ...(topics.camera ? { cameraTopic: topics.camera } : {}),
    ...(topics.instruction ? { instructionTopic: topics.instruction } : {}),
    services: topics.estop ? { estop: topics.estop } : {},
    safety: { ...DEFAULT_SAFETY, watchdogMs: Math.ceil(3 * period), watchdogAction: 'stop', maxCommandAgeMs: Math.ceil(3 * period), maxEpisodeSeconds: Infinity, ...safety },
  };
}

export interface PolicyNodeStats {
  steps: number;
  /** Control ticks whose command left later than one period after its due time. */
  late: number;
  /** Ticks on which no new joint state had arrived for the watchdog's time: the robot was held instead. */
  heldStale: number;
  interventions: Record<string, number>;
}

/**
 * Runs the policy at the artifact's rate until `signal` aborts (or `maxSteps`): each tick reads the latest
 * observation, and when its joint state is fresh sends the policy's action through the safety layer, else the
 * hold action. Returns what happened.
 */
export async function runPolicyNode(robot: SafetyLayer, policy: OnnxPolicy, o: { signal?: AbortSignal; maxSteps?: number; onTick?: (stats: PolicyNodeStats) => void } = {}): Promise<PolicyNodeStats> {
  const period = 1000 / robot.spec.controlHz;
  const stats: PolicyNodeStats = { steps: 0, late: 0, heldStale: 0, interventions: robot.counts };
  let lastStamp = NaN, stampSeenAt = performance.now(), due = performance.now();
  while (!o.signal?.aborted && (o.maxSteps === undefined || stats.steps < o.maxSteps) && !robot.isEstopped) {
    const t = robot.now(), obs = await robot.observe();
    const now = performance.now();
    if (obs.stamp !== lastStamp) {
      lastStamp = obs.stamp;
      stampSeenAt = now;
    }
    if (now - stampSeenAt > robot.config.watchdogMs) {
      stats.heldStale++;
      await robot.act(robot.holdAction());
    } else {
      await robot.act(await policy.act(obs), { stamp: t });
    }
    stats.steps++;
    if (performance.now() - due > period) stats.late++;
    o.onTick?.(stats);
    // A late tick moves the schedule rather than bursting to catch up: a burst of commands is not a trajectory.
    due = Math.max(due + period, performance.now());
    await new Promise((r) => setTimeout(r, Math.max(0, due - performance.now())));
  }
  return stats;
}

/**
 * Resolves with the first complete observation (joint state, and the features and camera the policy reads): DDS
 * discovery and a robot's first messages take a moment after the node starts. Fails after `timeoutMs` with the
 * reason the last attempt gave.
 */
export async function firstObservation(robot: Robot, timeoutMs = 10_000): Promise<RobotObservation> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    try {
      return await robot.observe();
    } catch (e) {
      if (performance.now() > deadline) throw new Error(`${robot.spec.name}: no complete observation within ${timeoutMs / 1000} s: ${(e as Error).message}`, { cause: e });
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Loads the artifact against the robot it declares and wraps `raw` (the ROS 2 adapter) in the safety layer, with the
 * command history the artifact reads between them (it records the commands as they leave the safety layer).
 */
export async function startPolicyNode(path: string, raw: Robot, config: RobotConfig, log?: (e: InterventionEvent) => void): Promise<{ robot: SafetyLayer; policy: OnnxPolicy }> {
  const robot = config.commandHistory ? new CommandHistoryRobot(raw, config.commandHistory) : raw;
  const policy = await OnnxPolicy.load(path, robot.spec);
  return { robot: new SafetyLayer(robot, config.safety, { log }), policy };
}
