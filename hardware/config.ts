// Robot YAML files: parsed once at the edge into a typed, validated RobotConfig. Every error names
// the file, the key and its line; unknown keys are errors (a typo must not silently fall back).
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { isMap, isScalar, isSeq, LineCounter, parseDocument, type Node as YamlNode } from 'yaml';
import { DEFAULT_SAFETY, type SafetyConfig } from './safety.js';
import type { ActionSpec, RobotDeclaration } from '../common/robot.js';

export interface RosCommandConfig {
  /** forward_command: std_msgs/Float64MultiArray; joint_trajectory: trajectory_msgs/JointTrajectory (one point). */
  mode: 'forward_command' | 'joint_trajectory';
  topic: string;
  /** For joint_trajectory: the point field that carries the action. */
  trajectoryField: 'positions' | 'velocities' | 'effort';
}

export interface RobotConfig {
  spec: RobotDeclaration;
  transport: 'rosbridge' | 'ros2' | 'mqtt';
  /** rosbridge: ws://…; mqtt: mqtt://broker:1883. */
  url: string;
  /** MQTT: the robot's id in wmrl/robots/{id}/…, the broker's MQTT protocol version, credentials and TLS. */
  mqtt?: MqttRobotConfig;
  command: RosCommandConfig;
  stateTopic: string;
  featuresTopic?: string;
  cameraTopic?: string;
  instructionTopic?: string;
  services: { reset?: string; estop?: string };
  safety: SafetyConfig;
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
}

export class ConfigError extends Error {
  constructor(file: string, line: number | undefined, message: string) {
    super(`${file}${line ? `:${line}` : ''}: ${message}`);
    this.name = 'ConfigError';
  }
}

class Reader {
  constructor(private readonly file: string, private readonly lc: LineCounter) {}

  line(n: YamlNode | null | undefined): number | undefined {
    const r = n?.range;
    return r ? this.lc.linePos(r[0]).line : undefined;
  }

  fail(n: YamlNode | null | undefined, msg: string): never {
    throw new ConfigError(this.file, this.line(n), msg);
  }

  /** The mapping node each `map()` result came from: a missing key is reported at its line. */
  private readonly owner = new WeakMap<Map<string, YamlNode | null>, YamlNode>();

  /** The entries of a mapping, refusing keys outside `allowed`. */
  map(n: YamlNode | null | undefined, path: string, allowed: readonly string[]): Map<string, YamlNode | null> {
    if (!isMap(n)) this.fail(n, `${path || 'the file'} must be a mapping`);
    const out = new Map<string, YamlNode | null>();
    this.owner.set(out, n);
    for (const item of n.items) {
      const key = isScalar(item.key) ? String(item.key.value) : '?';
      if (!allowed.includes(key)) this.fail(item.key as YamlNode, `unknown key '${path ? `${path}.` : ''}${key}' (allowed: ${allowed.join(', ')})`);
      out.set(key, item.value as YamlNode | null);
    }
    return out;
  }

  /** The node under `key`; a missing key is an error at the mapping's line. */
  need(m: Map<string, YamlNode | null>, key: string, path: string): YamlNode | null {
    const n = m.get(key);
    if (n === undefined) this.fail(this.owner.get(m), `missing key '${path}${key}'`);
    return n;
  }

  str(m: Map<string, YamlNode | null>, key: string, path: string, dflt?: string): string {
    const n = m.get(key);
    if (n === undefined) return dflt ?? this.fail(this.owner.get(m), `missing key '${path}${key}'`);
    if (!isScalar(n) || typeof n.value !== 'string') this.fail(n, `'${path}${key}' must be a string`);
    return n.value;
  }

  num(m: Map<string, YamlNode | null>, key: string, path: string, dflt?: number, check?: (v: number) => boolean, what = 'a number'): number {
    const n = m.get(key);
    if (n === undefined) return dflt ?? this.fail(this.owner.get(m), `missing key '${path}${key}'`);
    if (!isScalar(n) || typeof n.value !== 'number' || Number.isNaN(n.value) || (check && !check(n.value))) this.fail(n, `'${path}${key}' must be ${what}`);
    return n.value;
  }

  oneOf<T extends string>(m: Map<string, YamlNode | null>, key: string, path: string, options: readonly T[], dflt?: T): T {
    const v = this.str(m, key, path, dflt);
    if (!options.includes(v as T)) this.fail(m.get(key), `'${path}${key}' must be one of ${options.join(', ')}, got '${v}'`);
    return v as T;
  }

  nums(n: YamlNode | null | undefined, path: string, len?: number): number[] {
    if (!isSeq(n)) this.fail(n, `'${path}' must be a list of numbers`);
    const vs = n.items.map((x) => (isScalar(x) && typeof x.value === 'number' && !Number.isNaN(x.value) ? x.value : this.fail(x as YamlNode, `'${path}' must hold numbers`)));
    if (len !== undefined && vs.length !== len) this.fail(n, `'${path}' needs ${len} values (one per joint/action), got ${vs.length}`);
    return vs;
  }

  strs(n: YamlNode | null | undefined, path: string): string[] {
    if (!isSeq(n)) this.fail(n, `'${path}' must be a list of names`);
    return n.items.map((x) => (isScalar(x) && typeof x.value === 'string' ? x.value : this.fail(x as YamlNode, `'${path}' must hold strings`)));
  }
}

const TOP = ['name', 'transport', 'url', 'mqtt', 'joints', 'position_limits', 'velocity_limits', 'control_hz', 'action', 'command', 'state_topic', 'features', 'camera', 'instruction_topic', 'services', 'safety'] as const;

export function parseRobotConfig(text: string, file = '<robot.yaml>'): RobotConfig {
  const lc = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lc, prettyErrors: false });
  if (doc.errors.length) {
    const e = doc.errors[0]!;
    throw new ConfigError(file, lc.linePos(e.pos[0]).line, `YAML syntax: ${e.message.split('\n')[0]}`);
  }
  const r = new Reader(file, lc);
  const top = r.map(doc.contents as YamlNode, '', TOP);
  const joints = r.strs(r.need(top, 'joints', ''), 'joints');
  if (!joints.length) r.fail(top.get('joints'), "'joints' must name at least one joint");
  const limSeq = top.get('position_limits');
  if (!isSeq(limSeq) || limSeq.items.length !== joints.length) return r.fail(limSeq, `'position_limits' needs one [lower, upper] pair per joint (${joints.length})`);
  const positionLimits = limSeq.items.map((p: unknown, i: number) => {
    const [lo, hi] = r.nums(p as YamlNode, `position_limits[${i}]`, 2) as [number, number];
    if (!(lo <= hi)) r.fail(p as YamlNode, `position_limits[${i}]: lower ${lo} exceeds upper ${hi}`);
    return [lo, hi] as [number, number];
  });
  const velocityLimits = r.nums(r.need(top, 'velocity_limits', ''), 'velocity_limits', joints.length);
  if (velocityLimits.some((v) => !(v > 0))) r.fail(top.get('velocity_limits'), "'velocity_limits' must be positive");
  const controlHz = r.num(top, 'control_hz', '', undefined, (v) => v > 0 && v <= 2000, 'a rate in (0, 2000] Hz');

  const am = r.map(top.get('action'), 'action', ['kind', 'names', 'low', 'high']);
  const kind = r.oneOf(am, 'kind', 'action.', ['joint_position', 'joint_velocity', 'normalized'] as const);
  const names = am.has('names') ? r.strs(r.need(am, 'names', 'action.'), 'action.names') : joints;
  const low = r.nums(r.need(am, 'low', 'action.'), 'action.low', names.length);
  const high = r.nums(r.need(am, 'high', 'action.'), 'action.high', names.length);
  if (low.some((l, i) => !(l <= high[i]!))) r.fail(am.get('low'), "'action.low' must not exceed 'action.high'");
  const action: ActionSpec = { kind, names, low, high };

  const transport = r.oneOf(top, 'transport', '', ['rosbridge', 'ros2', 'mqtt'] as const, 'rosbridge');
  // MQTT robots take commands on their own topic layout; ROS robots need a command section.
  let command: RosCommandConfig = { mode: 'forward_command', topic: '', trajectoryField: 'positions' };
  if (transport !== 'mqtt' || top.has('command')) {
    const cm = r.map(top.get('command'), 'command', ['mode', 'topic', 'trajectory_field']);
    command = {
      mode: r.oneOf(cm, 'mode', 'command.', ['forward_command', 'joint_trajectory'] as const),
      topic: r.str(cm, 'topic', 'command.'),
      trajectoryField: r.oneOf(cm, 'trajectory_field', 'command.', ['positions', 'velocities', 'effort'] as const, 'positions'),
    };
  }
  let features: string[] | undefined, featuresTopic: string | undefined;
  if (top.has('features')) {
    const fm = r.map(top.get('features'), 'features', ['topic', 'names']);
    featuresTopic = r.str(fm, 'topic', 'features.');
    features = r.strs(r.need(fm, 'names', 'features.'), 'features.names');
  }
  let camera: RobotDeclaration['camera'], cameraTopic: string | undefined;
  if (top.has('camera')) {
    const cam = r.map(top.get('camera'), 'camera', ['topic', 'width', 'height', 'encoding']);
    cameraTopic = r.str(cam, 'topic', 'camera.');
    const px = (k: string) => r.num(cam, k, 'camera.', undefined, (v) => Number.isInteger(v) && v > 0 && v <= 4096, 'an integer pixel count');
    camera = { width: px('width'), height: px('height'), encoding: r.oneOf(cam, 'encoding', 'camera.', ['rgb8', 'jpeg', 'png'] as const, 'png') };
  }
  let mqtt: RobotConfig['mqtt'];
  if (top.has('mqtt')) {
    const mm = r.map(top.get('mqtt'), 'mqtt', ['robot_id', 'protocol_version', 'username', 'password_env', 'ca_file', 'cert_file', 'key_file']);
    mqtt = { robotId: r.str(mm, 'robot_id', 'mqtt.'), protocolVersion: r.num(mm, 'protocol_version', 'mqtt.', 5, (v) => v === 4 || v === 5, '4 or 5') as 4 | 5 };
    if (mm.has('username')) mqtt.username = r.str(mm, 'username', 'mqtt.');
    if (mm.has('password_env')) {
      if (!mqtt.username) r.fail(mm.get('password_env'), "'mqtt.password_env' needs 'mqtt.username'");
      mqtt.passwordEnv = r.str(mm, 'password_env', 'mqtt.');
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(mqtt.passwordEnv)) r.fail(mm.get('password_env'), "'mqtt.password_env' must name an environment variable (the password itself never goes in the file)");
    }
    // Relative PEM paths are read against the YAML's folder, not the working directory.
    const base = file.startsWith('<') ? process.cwd() : dirname(resolve(file));
    for (const [key, field] of [['ca_file', 'caFile'], ['cert_file', 'certFile'], ['key_file', 'keyFile']] as const) {
      if (mm.has(key)) mqtt[field] = resolve(base, r.str(mm, key, 'mqtt.'));
    }
    if (mm.has('cert_file') !== mm.has('key_file')) r.fail(mm.get('cert_file') ?? mm.get('key_file'), "'mqtt.cert_file' and 'mqtt.key_file' go together (mutual TLS)");
  } else if (transport === 'mqtt') r.fail(doc.contents as YamlNode, "transport: mqtt needs an 'mqtt' section with robot_id");
  // rosbridge: a WebSocket (default the local rosbridge_server); MQTT: the broker, always stated.
  const url = r.str(top, 'url', '', transport === 'mqtt' ? undefined : 'ws://127.0.0.1:9090');
  const schemes = transport === 'mqtt' ? ['mqtt:', 'mqtts:', 'ws:', 'wss:'] : ['ws:', 'wss:'];
  let scheme = '';
  try {
    scheme = new URL(url).protocol;
  } catch {
    // reported below
  }
  if (transport !== 'ros2' && !schemes.includes(scheme)) r.fail(top.get('url'), `'url' for transport ${transport} must be a ${schemes.map((x) => `${x}//`).join(' or ')} URL, got '${url}'`);
  const services: RobotConfig['services'] = {};
  if (top.has('services')) {
    const sm = r.map(top.get('services'), 'services', ['reset', 'estop']);
    if (sm.has('reset')) services.reset = r.str(sm, 'reset', 'services.');
    if (sm.has('estop')) services.estop = r.str(sm, 'estop', 'services.');
  }
  const safety = { ...DEFAULT_SAFETY };
  if (top.has('safety')) {
    const sf = r.map(top.get('safety'), 'safety', ['max_delta', 'watchdog_ms', 'watchdog_action', 'max_command_age_ms', 'max_episode_s']);
    const pos = (v: number) => v > 0;
    safety.maxDelta = r.num(sf, 'max_delta', 'safety.', safety.maxDelta, pos, 'a positive number');
    safety.watchdogMs = r.num(sf, 'watchdog_ms', 'safety.', safety.watchdogMs, pos, 'a positive number of ms');
    safety.watchdogAction = r.oneOf(sf, 'watchdog_action', 'safety.', ['hold', 'stop'] as const, safety.watchdogAction);
    safety.maxCommandAgeMs = r.num(sf, 'max_command_age_ms', 'safety.', safety.maxCommandAgeMs, pos, 'a positive number of ms');
    safety.maxEpisodeSeconds = r.num(sf, 'max_episode_s', 'safety.', safety.maxEpisodeSeconds, pos, 'a positive number of seconds');
  }
  return {
    spec: { name: r.str(top, 'name', ''), joints, positionLimits, velocityLimits, action, controlHz, ...(features ? { features } : {}), ...(camera ? { camera } : {}) },
    transport,
    ...(mqtt ? { mqtt } : {}),
    url,
    command,
    stateTopic: r.str(top, 'state_topic', '', '/joint_states'),
    featuresTopic,
    cameraTopic,
    instructionTopic: top.has('instruction_topic') ? r.str(top, 'instruction_topic', '') : undefined,
    services,
    safety,
  };
}

export function loadRobotConfig(path: string): RobotConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new ConfigError(path, undefined, `cannot read: ${(e as Error).message}`);
  }
  return parseRobotConfig(text, path);
}
