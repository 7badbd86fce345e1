// Robots by transport. Optional, heavy dependencies load only in their own branch.
import { readFileSync } from 'node:fs';
import type { MqttTls } from '../../bridge/mqtt/client.js';
import type { MqttRobotConfig, RobotConfig } from '../config.js';
import { CommandHistoryRobot } from '../command-history.js';
import { SafetyLayer, type InterventionEvent } from '../safety.js';
import type { RobotDeclaration } from '../../common/robot.js';
import { layoutMismatch, layoutOf } from '../../common/layout.js';
import type { ResetOptions, Robot } from '../types.js';

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

const FACTORIES: Record<RobotConfig['transport'], (cfg: RobotConfig) => Promise<Robot>> = {
  rosbridge: async (cfg) => (await import('./ros.js')).RosRobot.connect(cfg),
  ros2: async (cfg) => (await import('./ros2.js')).Ros2Robot.connect(cfg),
  mqtt: async (cfg) => {
    const { connect, endClient } = await import('../../bridge/mqtt/client.js');
    const { MqttRobot } = await import('./mqtt.js');
    const m = cfg.mqtt!;
    const security = mqttSecurity(cfg.spec.name, m);
    if (security.tls && !cfg.url.startsWith('mqtts://')) throw new Error(`${cfg.spec.name}: mqtt TLS files are set but url ${cfg.url} is not mqtts://`);
    const client = await connect({ url: cfg.url, clientId: `wmrl-${m.robotId}-${process.pid}`, protocolVersion: m.protocolVersion, clean: true, ...security, onError: (e) => process.emitWarning(e) });
    // safety.max_command_age_ms is also each command's lifetime on the link: the robot refuses it
    // after that, and act() fails when the broker has not acknowledged it by then.
    const robot = await MqttRobot.connect(client, m.robotId, { commandTtlMs: cfg.safety.maxCommandAgeMs });
    // The operator's YAML, not the robot's own announcement, sets the limits the safety layer enforces.
    // A YAML that lists no features takes the ones the robot announces; otherwise the layouts must agree.
    const spec: RobotDeclaration = cfg.spec.features ? cfg.spec : { ...cfg.spec, features: robot.spec.features, featureUnits: robot.spec.featureUnits };
    const mismatch = layoutMismatch(layoutOf(spec), layoutOf(robot.spec), 'the YAML', `robot '${m.robotId}'`);
    if (mismatch) {
      await robot[Symbol.asyncDispose]();
      await endClient(client, true);
      throw new Error(`${cfg.spec.name}: observation layouts differ: ${mismatch}`);
    }
    return new WithSpec(robot, spec, () => endClient(client, true));
  },
};

/** Connects to the robot a config describes, always behind the safety layer it configures. */
export async function connectRobot(cfg: RobotConfig, log?: (e: InterventionEvent) => void): Promise<SafetyLayer> {
  const raw = await FACTORIES[cfg.transport](cfg);
  // The history records the commands as they leave the safety layer, so it is what the robot was sent.
  const inner = cfg.commandHistory ? new CommandHistoryRobot(raw, cfg.commandHistory) : raw;
  return new SafetyLayer(inner, cfg.safety, { log });
}
