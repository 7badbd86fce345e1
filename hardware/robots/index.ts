// Robots by transport. Optional, heavy dependencies load only in their own branch.
import { readFileSync } from 'node:fs';
import type { MqttTls } from '../../bridge/mqtt/client.js';
import type { MqttRobotConfig, RobotConfig } from '../config.js';
import { CommandHistoryRobot } from '../command-history.js';
import { SafetyLayer, type InterventionEvent } from '../safety.js';
import type { RobotDeclaration } from '../../common/robot.js';
import { layoutMismatch, layoutOf } from '../../common/layout.js';
import type { ResetOptions, Robot } from '../types.js';
import type { Scorer } from '../record.js';

/** A robot seen through a locally declared spec (the operator's limits, not the robot's own claim). */
class WithSpec implements Robot {
  constructor(private readonly inner: Robot, readonly spec: RobotDeclaration, private readonly onDispose: () => Promise<void>) {}
  observe = () => this.inner.observe();
  act = (a: Float32Array) => this.inner.act(a);
  reset = (options?: ResetOptions) => this.inner.reset(options);
  estop = () => this.inner.estop();
  [Symbol.asyncDispose] = async () => {
    await this.inner[Symbol.asyncDispose]();
    await this.onDispose();
  };
}

/**
 * Credentials and TLS material of an MQTT robot config, read now: the password from the environment
 * variable the YAML names, the PEM files from disk. Errors name the key and what is missing.
 */
export function mqttSecurity(name: string, m: MqttRobotConfig, env: NodeJS.ProcessEnv = process.env): { username?: string; password?: string; tls?: MqttTls } {
  const out: { username?: string; password?: string; tls?: MqttTls } = {};
  if (m.username !== undefined) out.username = m.username;
  if (m.passwordEnv !== undefined) {
    const pw = env[m.passwordEnv];
    if (pw === undefined || pw === '') throw new Error(`${name}: mqtt.password_env names ${m.passwordEnv}, which is not set in the environment`);
    out.password = pw;
  }
  const pem = (key: string, path: string | undefined) => {
    if (path === undefined) return undefined;
    try {
      return readFileSync(path);
    } catch (e) {
      throw new Error(`${name}: cannot read mqtt.${key} ${path}: ${(e as Error).message}`);
    }
  };
  const ca = pem('ca_file', m.caFile);
  const cert = pem('cert_file', m.certFile);
  const key = pem('key_file', m.keyFile);
  if (ca || cert || key) out.tls = { ...(ca ? { ca } : {}), ...(cert ? { cert } : {}), ...(key ? { key } : {}) };
  return out;
}

/**
 * A robot's link as its transport sees it. `connected`: the link is up and the robot's state arrives (rosbridge: the
 * WebSocket, which reconnects by itself; MQTT: the broker connection and a state newer than the adapter's age limit,
 * since a robot process that dies leaves the broker up; native ROS 2 has no link to lose and reports true).
 * `outcome`: the robot's reward, success and episode end for the step its last command started (its outcome_topic;
 * over MQTT its outcome channel, where its spec announces one), null for a robot that reports none.
 */
export interface RobotLink {
  connected(): boolean;
  outcome: Scorer | null;
}

export interface OpenedRobot {
  /** The transport's robot (with its command history, when the config asks for one), not yet behind a safety layer. */
  robot: Robot;
  link: RobotLink;
}

const FACTORIES: Record<RobotConfig['transport'], (cfg: RobotConfig) => Promise<OpenedRobot>> = {
  rosbridge: async (cfg) => {
    const r = await (await import('./ros.js')).RosRobot.connect(cfg);
    return { robot: r, link: { connected: () => r.isConnected, outcome: cfg.outcomeTopic ? () => r.outcomeOfLastCommand() : null } };
  },
  ros2: async (cfg) => {
    const r = await (await import('./ros2.js')).Ros2Robot.connect(cfg);
    return { robot: r, link: { connected: () => true, outcome: cfg.outcomeTopic ? () => r.outcomeOfLastCommand() : null } };
  },
  mqtt: async (cfg) => {
    const { connect, endClient } = await import('../../bridge/mqtt/client.js');
    const { MqttRobot } = await import('./mqtt.js');
    const m = cfg.mqtt!;
    const security = mqttSecurity(cfg.spec.name, m);
    if (security.tls && !cfg.url.startsWith('mqtts://')) throw new Error(`${cfg.spec.name}: mqtt TLS files are set but url ${cfg.url} is not mqtts://`);
    const client = await connect({ url: cfg.url, clientId: `wmrl-${m.robotId}-${process.pid}`, protocolVersion: m.protocolVersion, clean: true, ...security, onError: (e) => process.emitWarning(e) });
    // safety.max_command_age_ms is also each command's lifetime on the link: the robot refuses it
    // after that, and act() fails when the broker has not acknowledged it by then.
    const robot = await MqttRobot.connect(client, m.robotId, { commandTtlMs: cfg.safety.maxCommandAgeMs, ...(m.maxStateAgeMs !== undefined ? { maxStateAgeMs: m.maxStateAgeMs } : {}) });
    // The operator's YAML, not the robot's own announcement, sets the limits the safety layer enforces.
    // A YAML that lists no features takes the ones the robot announces; otherwise the layouts must agree.
    const spec: RobotDeclaration = cfg.spec.features ? cfg.spec : { ...cfg.spec, features: robot.spec.features, featureUnits: robot.spec.featureUnits, sceneFeatures: robot.spec.sceneFeatures };
    const mismatch = layoutMismatch(layoutOf(spec), layoutOf(robot.spec), 'the YAML', `robot '${m.robotId}'`);
    if (mismatch) {
      await robot[Symbol.asyncDispose]();
      await endClient(client, true);
      throw new Error(`${cfg.spec.name}: observation layouts differ: ${mismatch}`);
    }
    // A robot that announces no outcomes has its episodes recorded unscored.
    return { robot: new WithSpec(robot, spec, () => endClient(client, true)), link: { connected: () => robot.isConnected, outcome: robot.reportsOutcome ? () => robot.outcomeOfLastCommand() : null } };
  },
};

/** Connects to the robot a config describes, not yet behind its safety layer (connectRobot puts it there). */
export async function openRobot(cfg: RobotConfig): Promise<OpenedRobot> {
  const { robot, link } = await FACTORIES[cfg.transport](cfg);
  // The history records the commands as they leave the safety layer, so it is what the robot was sent.
  return { robot: cfg.commandHistory ? new CommandHistoryRobot(robot, cfg.commandHistory) : robot, link };
}

/** Connects to the robot a config describes, always behind the safety layer it configures. */
export async function connectRobot(cfg: RobotConfig, log?: (e: InterventionEvent) => void): Promise<SafetyLayer> {
  return new SafetyLayer((await openRobot(cfg)).robot, cfg.safety, { log });
}
