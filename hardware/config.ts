// Robot YAML files: parsed once at the edge into a typed, validated RobotConfig. The schema of the
// file goes through the one config loader (common/config.ts): every error is a ConfigError naming
// the file, the line and the key; unknown keys are errors (a typo must not silently fall back).
import { dirname, resolve } from 'node:path';
import { Type, type TProperties } from '@sinclair/typebox';
import { parseConfig, readConfigFile, type ConfigPath } from '../common/config.js';
import { DEFAULT_SAFETY, type SafetyConfig } from './safety.js';
import type { ActionSpec, RobotDeclaration } from '../common/robot.js';

export interface RosCommandConfig {
  /** forward_command: std_msgs/Float64MultiArray; joint_trajectory: trajectory_msgs/JointTrajectory (one point, hardware/robots/ros-messages.ts). */
  mode: 'forward_command' | 'joint_trajectory';
  topic: string;
  /** For joint_trajectory: what the action is, positions or velocities (sent as the positions one period on); effort is refused at load. */
  trajectoryField: 'positions' | 'velocities' | 'effort';
}

export interface RobotConfig {
  spec: RobotDeclaration;
  transport: 'rosbridge' | 'ros2' | 'mqtt';
  /** rosbridge: ws://…; mqtt: mqtt://broker:1883. */
  url: string;
  /** MQTT: the robot's id in wmrl/robots/{id}/…, the broker's MQTT protocol version, credentials and TLS. */
  mqtt?: MqttRobotConfig;
  /** rosbridge: the environment variable holding the shared secret for the `auth` op (never the secret itself). */
  rosbridge?: { secretEnv: string };
  command: RosCommandConfig;
  stateTopic: string;
  featuresTopic?: string;
  cameraTopic?: string;
  instructionTopic?: string;
  /**
   * std_msgs/msg/Float64MultiArray `[t, reward, success, terminated, truncated]` published each control
   * step: the robot's own outcome signal (a success detector), which training on the robot needs.
   */
  outcomeTopic?: string;
  /**
   * reset, estop: std_srvs/srv/Trigger services. resetSeed: a std_msgs/msg/UInt32 topic (latched) whose last
   * value the robot applies on the next reset call, so a seeded reset reproduces a start state.
   */
  services: { reset?: string; estop?: string; resetSeed?: string };
  /**
   * The robot's home pose and its joint_trajectory_controller: without `services.reset`, reset drives the joints
   * there (hardware/robots/ros-control.ts); `wmrl robot-services` serves its reset from it.
   */
  home?: HomeConfig;
  /** ros2_control's controller manager: without `services.estop`, e-stop deactivates the command controllers. */
  controllerManager?: ControllerManagerConfig;
  /** How `wmrl robot-services` computes the outcome it publishes on `outcomeTopic` (hardware/robot-services.ts). */
  outcomeRule?: OutcomeRuleConfig;
  safety: SafetyConfig;
  /**
   * The observation also reports the last this many commands sent, newest first, after the robot's own features
   * (hardware/command-history.ts): what a policy trained with the sim's `commandHistory` reads. 0: none.
   */
  commandHistory?: number;
  /**
   * The sim task (sim/tasks) the robot performs, whose observation layout it shares: the service draws it in that task's
   * scene and pretrains its training jobs there (the task's expert, the world model, the prompts' start states).
   */
  task?: string;
}

export interface HomeConfig {
  /** One per joint, in `spec.joints` order. */
  positions: number[];
  /** The joint_trajectory_controller's trajectory topic, or (exclusive) its FollowJointTrajectory action. */
  topic?: string;
  action?: string;
  /** The least time the move to home takes; longer when a joint would otherwise pass its velocity limit. */
  minDurationS: number;
  /** How close to home every joint must come (rad or m). */
  tolerance: number;
  /** How long reset waits, from sending the trajectory, for every joint to come within tolerance. */
  timeoutS: number;
}

export interface ControllerManagerConfig {
  /** The controller manager's node name: its services are `<name>/switch_controller`, … */
  name: string;
  /** The controllers the robot's commands go to: the e-stop deactivates them. */
  commandControllers: string[];
  /** A joint_trajectory_controller the home move needs active in their place; reset switches to it and back. */
  homeController?: string;
}

export interface OutcomeRuleConfig {
  /** Success: these entries (feature or joint names) within `tolerance` (Euclidean) of `goal`. */
  success?: { entries: string[]; goal: number[]; tolerance: number };
  /** sparse: 1 on a successful step, else 0; negative_distance: minus the distance of the success rule's entries to its goal. */
  reward: 'sparse' | 'negative_distance';
  /** The episode is truncated this long after the node's last reset. */
  episodeS?: number;
}

export interface MqttRobotConfig {
  robotId: string;
  protocolVersion: 4 | 5;
  username?: string;
  /** Name of the environment variable holding the password (never the password itself). */
  passwordEnv?: string;
  /** PEM files, resolved against the YAML file's folder: the broker's CA, and a client certificate and key for mutual TLS. */
  caFile?: string;
  certFile?: string;
  keyFile?: string;
  /** A state older than this is refused, and the robot shown disconnected: its process stalled or died (default: 10 control periods, at least 500 ms). */
  maxStateAgeMs?: number;
}

// ---------------------------------------------------------------- the file, as written

/** A number; YAML's .inf and -.inf are allowed (an unlimited joint, no episode cap). */
const Real = Type.Union([Type.Number(), Type.Literal(Infinity), Type.Literal(-Infinity)], { errorMessage: 'must be a number' });
const Positive = Type.Union([Type.Number({ exclusiveMinimum: 0 }), Type.Literal(Infinity)], { errorMessage: 'must be a positive number' });
const Reals = Type.Array(Real, { errorMessage: 'must be a list of numbers' });
const Names = Type.Array(Type.String(), { errorMessage: 'must be a list of names' });
const Pixels = Type.Integer({ minimum: 1, maximum: 4096, errorMessage: 'must be an integer pixel count in [1, 4096]' });
const OneOf = <T extends string>(...options: T[]) => Type.Union(options.map((o) => Type.Literal(o)));
const Section = <T extends TProperties>(fields: T) => Type.Optional(Type.Object(fields, { additionalProperties: false }));

const RobotFile = Type.Object(
  {
    name: Type.String(),
    task: Type.Optional(Type.String({ minLength: 1, errorMessage: 'must name a sim task' })),
    transport: Type.Optional(OneOf('rosbridge', 'ros2', 'mqtt')),
    url: Type.Optional(Type.String()),
    mqtt: Section({
      robot_id: Type.String(),
      protocol_version: Type.Optional(Type.Union([Type.Literal(4), Type.Literal(5)])),
      username: Type.Optional(Type.String()),
      password_env: Type.Optional(
        Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]*$', errorMessage: 'must name an environment variable (the password itself never goes in the file)' }),
      ),
      ca_file: Type.Optional(Type.String()),
      cert_file: Type.Optional(Type.String()),
      key_file: Type.Optional(Type.String()),
      max_state_age_ms: Type.Optional(Type.Number({ exclusiveMinimum: 0, errorMessage: 'must be a positive number of milliseconds' })),
    }),
    rosbridge: Section({
      secret_env: Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]*$', errorMessage: 'must name an environment variable (the secret itself never goes in the file)' }),
    }),
    joints: Type.Array(Type.String(), { minItems: 1, errorMessage: 'must name at least one joint' }),
    joint_units: Type.Optional(Type.Array(OneOf('rad', 'm'), { errorMessage: "must be a list of 'rad' or 'm', one per joint" })),
    position_limits: Type.Array(Type.Tuple([Real, Real], { errorMessage: 'must be a [lower, upper] pair' }), { errorMessage: 'must be a list of [lower, upper] pairs' }),
    velocity_limits: Type.Array(Positive, { errorMessage: 'must be a list of positive numbers' }),
    control_hz: Type.Number({ exclusiveMinimum: 0, maximum: 2000, errorMessage: 'must be a rate in (0, 2000] Hz' }),
    action: Type.Object({ kind: OneOf('joint_position', 'joint_velocity', 'normalized'), names: Type.Optional(Names), low: Reals, high: Reals }, { additionalProperties: false }),
    command: Section({ mode: OneOf('forward_command', 'joint_trajectory'), topic: Type.String(), trajectory_field: Type.Optional(OneOf('positions', 'velocities', 'effort')) }),
    state_topic: Type.Optional(Type.String()),
    features: Section({ topic: Type.String(), names: Names, units: Type.Optional(Names), scene: Type.Optional(Names) }),
    camera: Section({ topic: Type.String(), width: Pixels, height: Pixels, encoding: Type.Optional(OneOf('rgb8', 'jpeg', 'png')) }),
    instruction_topic: Type.Optional(Type.String()),
    command_history: Type.Optional(Type.Integer({ minimum: 0, maximum: 64, errorMessage: 'must be a whole number of steps in [0, 64]' })),
    outcome_topic: Type.Optional(Type.String()),
    services: Section({ reset: Type.Optional(Type.String()), estop: Type.Optional(Type.String()), reset_seed_topic: Type.Optional(Type.String()) }),
    home: Section({
      positions: Reals,
      topic: Type.Optional(Type.String({ minLength: 1 })),
      action: Type.Optional(Type.String({ minLength: 1 })),
      min_duration_s: Type.Optional(Type.Number({ exclusiveMinimum: 0, errorMessage: 'must be a positive number of seconds' })),
      tolerance: Type.Optional(Type.Number({ exclusiveMinimum: 0, errorMessage: 'must be a positive distance (rad or m)' })),
      timeout_s: Type.Optional(Type.Number({ exclusiveMinimum: 0, errorMessage: 'must be a positive number of seconds' })),
    }),
    controller_manager: Section({
      name: Type.Optional(Type.String({ pattern: '^/', errorMessage: "must be the controller manager's node name, e.g. /controller_manager" })),
      command_controllers: Type.Array(Type.String({ minLength: 1 }), { minItems: 1, errorMessage: 'must name at least one controller' }),
      home_controller: Type.Optional(Type.String({ minLength: 1 })),
    }),
    outcome_rule: Section({
      success: Type.Optional(Type.Object({ entries: Names, goal: Reals, tolerance: Type.Number({ exclusiveMinimum: 0, errorMessage: 'must be a positive distance' }) }, { additionalProperties: false })),
      reward: Type.Optional(OneOf('sparse', 'negative_distance')),
      episode_s: Type.Optional(Type.Number({ exclusiveMinimum: 0, errorMessage: 'must be a positive number of seconds' })),
    }),
    safety: Section({
      max_delta: Type.Optional(Positive),
      watchdog_ms: Type.Optional(Positive),
      watchdog_action: Type.Optional(OneOf('hold', 'stop')),
      max_command_age_ms: Type.Optional(Positive),
      max_episode_s: Type.Optional(Positive),
    }),
  },
  { additionalProperties: false },
);

// ---------------------------------------------------------------- checks across keys, and the typed config

export function parseRobotConfig(text: string, file = '<robot.yaml>'): RobotConfig {
  const { value: y, fail } = parseConfig(RobotFile, text, file, 'robot config');
  const joints = y.joints;
  if (y.position_limits.length !== joints.length) fail(['position_limits'], `needs one [lower, upper] pair per joint (${joints.length})`);
  const positionLimits = y.position_limits.map(([lo, hi], i): [number, number] => (lo <= hi ? [lo, hi] : fail(['position_limits', i], `lower ${lo} exceeds upper ${hi}`)));
  const count = (key: 'velocity_limits' | 'low' | 'high', vs: number[], n: number, per: string) => {
    if (vs.length !== n) fail(key === 'velocity_limits' ? [key] : ['action', key], `needs ${n} values (one per ${per}), got ${vs.length}`);
    return vs;
  };
  const velocityLimits = count('velocity_limits', y.velocity_limits, joints.length, 'joint');
  if (y.joint_units && y.joint_units.length !== joints.length) fail(['joint_units'], `needs ${joints.length} units (one per joint), got ${y.joint_units.length}`);
  if (y.features?.units && y.features.units.length !== y.features.names.length) fail(['features', 'units'], `needs ${y.features.names.length} units (one per feature), got ${y.features.units.length}`);
  const notFeature = y.features?.scene?.find((n) => !y.features!.names.includes(n));
  if (notFeature !== undefined) fail(['features', 'scene'], `'${notFeature}' is not one of features.names`);
  const names = y.action.names ?? joints;
  const low = count('low', y.action.low, names.length, 'action');
  const high = count('high', y.action.high, names.length, 'action');
  if (low.some((l, i) => !(l <= high[i]!))) fail(['action', 'low'], "must not exceed 'action.high'");
  const action: ActionSpec = { kind: y.action.kind, names, low, high };

  const transport = y.transport ?? 'rosbridge';
  // MQTT robots take commands on their own topic layout; ROS robots need a command section.
  if (transport !== 'mqtt' && !y.command) fail(['command'], `missing (transport ${transport} sends commands to a ROS topic)`);
  const command: RosCommandConfig = y.command
    ? { mode: y.command.mode, topic: y.command.topic, trajectoryField: y.command.trajectory_field ?? 'positions' }
    : { mode: 'forward_command', topic: '', trajectoryField: 'positions' };
  if (command.mode === 'joint_trajectory') {
    if (command.trajectoryField === 'effort') fail(['command', 'trajectory_field'], 'effort cannot be streamed to a joint_trajectory_controller, which tracks positions: use command.mode forward_command with an effort controller (effort_controllers/JointGroupEffortController)');
    const notJoint = names.find((n) => !joints.includes(n));
    if (notJoint !== undefined) fail(['action', 'names'], `${notJoint} is not one of the joints, and a joint trajectory commands joints`);
  }

  let mqtt: MqttRobotConfig | undefined;
  if (y.mqtt) {
    const m = y.mqtt;
    mqtt = { robotId: m.robot_id, protocolVersion: m.protocol_version ?? 5, ...(m.max_state_age_ms !== undefined ? { maxStateAgeMs: m.max_state_age_ms } : {}) };
    if (m.username !== undefined) mqtt.username = m.username;
    if (m.password_env !== undefined) {
      if (m.username === undefined) fail(['mqtt', 'password_env'], "needs 'mqtt.username'");
      mqtt.passwordEnv = m.password_env;
    }
    // Relative PEM paths are read against the YAML's folder, not the working directory.
    const base = file.startsWith('<') ? process.cwd() : dirname(resolve(file));
    for (const [key, field] of [['ca_file', 'caFile'], ['cert_file', 'certFile'], ['key_file', 'keyFile']] as const) {
      if (m[key] !== undefined) mqtt[field] = resolve(base, m[key]);
    }
    if ((m.cert_file === undefined) !== (m.key_file === undefined)) {
      const [given, other] = m.cert_file !== undefined ? ['cert_file', 'key_file'] : ['key_file', 'cert_file'];
      fail(['mqtt', given], `goes with 'mqtt.${other}' (mutual TLS): give both or neither`);
    }
  } else if (transport === 'mqtt') fail(['mqtt'], 'missing (transport mqtt needs robot_id)');

  if (y.rosbridge && transport !== 'rosbridge') fail(['rosbridge'], `is for transport rosbridge, not ${transport}`);
  // rosbridge: a WebSocket (default the local rosbridge_server); MQTT: the broker, always stated.
  if (y.url === undefined && transport === 'mqtt') fail(['url'], 'missing (transport mqtt needs the broker URL)');
  const url = y.url ?? 'ws://127.0.0.1:9090';
  const schemes = transport === 'mqtt' ? ['mqtt:', 'mqtts:', 'ws:', 'wss:'] : ['ws:', 'wss:'];
  if (transport !== 'ros2' && !schemes.includes(URL.canParse(url) ? new URL(url).protocol : '')) {
    fail(['url'], `must be a ${schemes.map((x) => `${x}//`).join(' or ')} URL for transport ${transport}, got '${url}'`);
  }

  const services: RobotConfig['services'] = {};
  if (y.services?.reset !== undefined) services.reset = y.services.reset;
  if (y.services?.estop !== undefined) services.estop = y.services.estop;
  if (y.services?.reset_seed_topic !== undefined) {
    if (services.reset === undefined) fail(['services', 'reset_seed_topic'], "needs 'services.reset' (the seed is applied on the next reset call)");
    services.resetSeed = y.services.reset_seed_topic;
  }
  const home = y.home && homeConfig(y.home, joints, positionLimits, fail);
  let controllerManager: ControllerManagerConfig | undefined;
  if (y.controller_manager) {
    const cm = y.controller_manager;
    if (cm.home_controller !== undefined && cm.command_controllers.includes(cm.home_controller)) fail(['controller_manager', 'home_controller'], `${cm.home_controller} is also a command controller; name the home controller only when the home move needs a different one`);
    if (cm.home_controller !== undefined && !home) fail(['controller_manager', 'home_controller'], "needs 'home' (the pose the home controller drives the joints to)");
    controllerManager = { name: cm.name ?? '/controller_manager', commandControllers: cm.command_controllers, ...(cm.home_controller !== undefined ? { homeController: cm.home_controller } : {}) };
  }
  let outcomeRule: OutcomeRuleConfig | undefined;
  if (y.outcome_rule) {
    const r = y.outcome_rule;
    if (!y.outcome_topic) fail(['outcome_rule'], "needs 'outcome_topic' (where wmrl robot-services publishes the outcome)");
    if (!r.success && r.episode_s === undefined) fail(['outcome_rule'], "needs 'success' or 'episode_s': with neither, no episode would ever end");
    if (r.success) {
      const known = [...(y.features?.names ?? []), ...joints];
      const unknown = r.success.entries.find((n) => !known.includes(n));
      if (unknown !== undefined) fail(['outcome_rule', 'success', 'entries'], `'${unknown}' is neither a feature name (features.names) nor a joint`);
      if (r.success.goal.length !== r.success.entries.length) fail(['outcome_rule', 'success', 'goal'], `needs ${r.success.entries.length} values (one per entry), got ${r.success.goal.length}`);
    }
    if (r.reward === 'negative_distance' && !r.success) fail(['outcome_rule', 'reward'], "negative_distance needs 'success' (the entries and goal it measures)");
    outcomeRule = { reward: r.reward ?? 'sparse', ...(r.success ? { success: r.success } : {}), ...(r.episode_s !== undefined ? { episodeS: r.episode_s } : {}) };
  }
  const sf = y.safety ?? {};
  const safety: SafetyConfig = {
    maxDelta: sf.max_delta ?? DEFAULT_SAFETY.maxDelta,
    watchdogMs: sf.watchdog_ms ?? DEFAULT_SAFETY.watchdogMs,
    watchdogAction: sf.watchdog_action ?? DEFAULT_SAFETY.watchdogAction,
    maxCommandAgeMs: sf.max_command_age_ms ?? DEFAULT_SAFETY.maxCommandAgeMs,
    maxEpisodeSeconds: sf.max_episode_s ?? DEFAULT_SAFETY.maxEpisodeSeconds,
  };
  const camera: RobotDeclaration['camera'] = y.camera && { width: y.camera.width, height: y.camera.height, encoding: y.camera.encoding ?? 'png' };
  return {
    spec: {
      name: y.name,
      joints,
      ...(y.joint_units ? { jointUnits: y.joint_units } : {}),
      positionLimits,
      velocityLimits,
      action,
      controlHz: y.control_hz,
      ...(y.features ? { features: y.features.names } : {}),
      ...(y.features?.units ? { featureUnits: y.features.units } : {}),
      ...(y.features?.scene ? { sceneFeatures: y.features.scene } : {}),
      ...(camera ? { camera } : {}),
    },
    transport,
    ...(mqtt ? { mqtt } : {}),
    ...(y.rosbridge ? { rosbridge: { secretEnv: y.rosbridge.secret_env } } : {}),
    url,
    command,
    stateTopic: y.state_topic ?? '/joint_states',
    featuresTopic: y.features?.topic,
    cameraTopic: y.camera?.topic,
    instructionTopic: y.instruction_topic,
    outcomeTopic: y.outcome_topic,
    services,
    ...(home ? { home } : {}),
    ...(controllerManager ? { controllerManager } : {}),
    ...(outcomeRule ? { outcomeRule } : {}),
    safety,
    commandHistory: y.command_history ?? 0,
    ...(y.task !== undefined ? { task: y.task } : {}),
  };
}

type Fail = (path: ConfigPath, detail: string) => never;

/** The home section: one position per joint within its limits, one way to reach the controller, a timeout the move fits in. */
function homeConfig(h: { positions: number[]; topic?: string; action?: string; min_duration_s?: number; tolerance?: number; timeout_s?: number }, joints: string[], limits: Array<[number, number]>, fail: Fail): HomeConfig {
  if (h.positions.length !== joints.length) fail(['home', 'positions'], `needs ${joints.length} positions (one per joint), got ${h.positions.length}`);
  h.positions.forEach((p, i) => {
    const [lo, hi] = limits[i]!;
    if (!Number.isFinite(p) || p < lo || p > hi) fail(['home', 'positions', i], `${joints[i]}: ${p} is outside its position limits [${lo}, ${hi}]`);
  });
  if ((h.topic === undefined) === (h.action === undefined)) fail(['home'], "needs exactly one of 'topic' (the joint_trajectory_controller's trajectory topic) and 'action' (its FollowJointTrajectory action)");
  const minDurationS = h.min_duration_s ?? 3;
  const timeoutS = h.timeout_s ?? minDurationS + 10;
  if (timeoutS <= minDurationS) fail(['home', 'timeout_s'], `${timeoutS} s leaves no time to settle after a move of at least ${minDurationS} s (min_duration_s)`);
  return { positions: h.positions, ...(h.topic !== undefined ? { topic: h.topic } : { action: h.action! }), minDurationS, tolerance: h.tolerance ?? 0.01, timeoutS };
}

export function loadRobotConfig(path: string): RobotConfig {
  return parseRobotConfig(readConfigFile(path, 'robot config'), path);
}
