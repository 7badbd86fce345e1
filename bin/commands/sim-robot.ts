// `wmrl sim-robot`: the hardware stand-in as its own process, serving rosbridge v2 (the default) or reached over MQTT
// through a broker, as a fleet robot is.
import { createInterface } from 'node:readline';
import { readMqttCredentials, robotLogin, type MqttLogin } from '../../bridge/mqtt/auth.js';

export interface SimRobotCommandOptions {
  task: string;
  profile: string;
  host: string;
  port: number;
  seed: number;
  cameraHz: number;
  image: number;
  /** Name of the environment variable holding the rosbridge shared secret (never the secret itself). */
  secretEnv?: string;
  /** Host names the stand-in is reached by (--allowed-host, repeatable). */
  allowedHost?: string[];
  /** Browser origins that may connect (--allowed-origin, repeatable). */
  allowedOrigin?: string[];
  transport?: 'rosbridge' | 'mqtt';
  /** MQTT: the broker's URL. */
  broker?: string;
  /** MQTT: the robot's id in wmrl/robots/{id}/… (default sim-TASK). */
  robotId?: string;
  /** MQTT protocol version: 4 (3.1.1, every broker, the embedded one included) or 5. */
  protocol?: string;
  /** MQTT: the service's mqtt-credentials.json: the robot logs in as robot:{id} with the password derived from its robotKey. */
  credentials?: string;
  /** MQTT: a broker login of its own (Mosquitto's password_file), the password in the environment variable `passwordEnv`. */
  username?: string;
  passwordEnv?: string;
}

/** How the stand-in logs in to the broker: as robot:{id} from the service's credentials, as a named user, or not at all. */
export function standInLogin(o: Pick<SimRobotCommandOptions, 'credentials' | 'username' | 'passwordEnv'>, robotId: string, env: NodeJS.ProcessEnv = process.env): MqttLogin | Record<string, never> {
  if (o.credentials !== undefined && o.username !== undefined) throw new Error('sim-robot: --credentials and --username are two ways to log in to the broker: give one');
  if (o.credentials !== undefined) {
    if (o.passwordEnv !== undefined) throw new Error('sim-robot: --password-env goes with --username; --credentials derives the robot\'s password itself');
    return robotLogin(readMqttCredentials(o.credentials), robotId);
  }
  if (o.username !== undefined) {
    if (o.passwordEnv === undefined) throw new Error(`sim-robot: --username ${o.username} needs --password-env VAR, the environment variable holding its password`);
    const password = env[o.passwordEnv];
    if (!password) throw new Error(`sim-robot: --password-env ${o.passwordEnv}: the environment variable ${o.passwordEnv} is not set or empty`);
    return { username: o.username, password };
  }
  if (o.passwordEnv !== undefined) throw new Error('sim-robot: --password-env needs --username');
  return {};
}

/** The operator's console: the one place an e-stop is released, as on a real robot's controller. */
function operatorConsole(stand: { readonly isEstopped: boolean; clearEstop(): void }, resetHow: string) {
  console.log(`type "clear" and Enter here to clear an e-stop (the operator's action; ${resetHow} does not clear it)`);
  const rl = createInterface({ input: process.stdin, terminal: false });
  rl.on('line', (line) => {
    const cmd = line.trim();
    if (cmd === 'clear') {
      const was = stand.isEstopped;
      stand.clearEstop();
      console.log(was ? `e-stop cleared by the operator; ${resetHow} starts an episode` : 'e-stop was not set');
    } else if (cmd) console.log(`unknown command '${cmd}'; the one command is "clear" (clear the e-stop)`);
  });
  return rl;
}

const stopSignal = () =>
  new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });

export async function simRobot(values: SimRobotCommandOptions): Promise<void> {
  if ((values.transport ?? 'rosbridge') === 'mqtt') return simRobotOverMqtt(values);
  for (const [flag, given] of [['--broker', values.broker], ['--robot-id', values.robotId], ['--credentials', values.credentials], ['--username', values.username], ['--password-env', values.passwordEnv], ['--protocol', values.protocol]] as const) {
    if (given !== undefined) throw new Error(`sim-robot: ${flag} is for --transport mqtt; this stand-in serves rosbridge`);
  }
  let secret: string | undefined;
  if (values.secretEnv !== undefined) {
    secret = process.env[values.secretEnv];
    if (!secret) throw new Error(`sim-robot: --secret-env ${values.secretEnv}: the environment variable ${values.secretEnv} is not set or empty`);
  }
  const { secretEnv: _, allowedHost, allowedOrigin, transport: _t, ...opts } = values;
  const { startStandIn } = await import('../../hardware/standin.js');
  const standIn = await startStandIn({ ...opts, secret, allowedHosts: allowedHost, allowedOrigins: allowedOrigin });
  const s = standIn.robot.spec;
  console.log(`sim robot '${s.name}' (${s.joints.join(', ')}; ${s.controlHz} Hz) serving rosbridge v2 on ws://${values.host}:${standIn.port}${secret ? ' (auth required)' : ''}`);
  const rl = operatorConsole(standIn, '/wmrl/reset');
  await stopSignal();
  rl.close();
  await standIn.stop();
  console.log(`stopped after ${standIn.counters.steps} control steps, ${standIn.counters.commands} commands`);
}

async function simRobotOverMqtt(values: SimRobotCommandOptions): Promise<void> {
  if (values.broker === undefined) throw new Error('sim-robot: --transport mqtt needs --broker URL (mqtt://host:1883), the broker the service reaches the robot through');
  if (values.secretEnv !== undefined || values.allowedHost?.length || values.allowedOrigin?.length) throw new Error('sim-robot: --secret-env, --allowed-host and --allowed-origin are the rosbridge server\'s; over MQTT the broker\'s logins guard the robot (--credentials or --username)');
  if (values.cameraHz > 0) throw new Error('sim-robot: --camera-hz: the MQTT stand-in sends no camera frames (serve rosbridge for a camera)');
  const protocol = values.protocol ?? '4';
  if (protocol !== '4' && protocol !== '5') throw new Error(`sim-robot: --protocol must be 4 (MQTT 3.1.1, every broker) or 5, got '${protocol}'`);
  const robotId = values.robotId ?? `sim-${values.task}`;
  const login = standInLogin(values, robotId);
  const { connect, endClient } = await import('../../bridge/mqtt/client.js');
  const { startMqttStandIn } = await import('../../hardware/standin-mqtt.js');
  const fail = (e: Error) => console.error(`sim-robot ${robotId}: ${e.message}`);
  // A clean session: commands queued for a robot that was away are stale by the time it is back.
  const client = await connect({ url: values.broker, clientId: `wmrl-robot-${robotId}`, protocolVersion: protocol === '4' ? 4 : 5, clean: true, reconnectPeriodMs: 500, ...login, onError: fail });
  const stand = await startMqttStandIn({ task: values.task, profile: values.profile, seed: values.seed, client, robotId, onError: fail }).catch(async (e: unknown) => {
    await endClient(client, true);
    throw e;
  });
  const s = stand.robot.spec;
  console.log(`sim robot '${s.name}' (${s.joints.join(', ')}; ${s.controlHz} Hz) serving MQTT as robot ${robotId} on ${values.broker}${'username' in login ? ` (logged in as ${login.username})` : ''}`);
  const rl = operatorConsole(stand, 'a reset request');
  await stopSignal();
  rl.close();
  await stand.stop();
  await endClient(client, false);
  const st = stand.served.stats;
  console.log(`stopped after ${stand.robot.steps} control steps, ${st.applied} commands applied, ${Object.values(st.refused).reduce((a, b) => a + b, 0)} refused`);
}
