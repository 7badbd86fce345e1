// `wmrl sim-robot`: the hardware stand-in as its own process, serving rosbridge v2.
import { createInterface } from 'node:readline';
import { startStandIn } from '../../hardware/standin.js';

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
}

export async function simRobot(values: SimRobotCommandOptions): Promise<void> {
  let secret: string | undefined;
  if (values.secretEnv !== undefined) {
    secret = process.env[values.secretEnv];
    if (!secret) throw new Error(`sim-robot: --secret-env ${values.secretEnv}: the environment variable ${values.secretEnv} is not set or empty`);
  }
  const { secretEnv: _, allowedHost, allowedOrigin, ...opts } = values;
  const standIn = await startStandIn({ ...opts, secret, allowedHosts: allowedHost, allowedOrigins: allowedOrigin });
  const s = standIn.robot.spec;
  console.log(`sim robot '${s.name}' (${s.joints.join(', ')}; ${s.controlHz} Hz) serving rosbridge v2 on ws://${values.host}:${standIn.port}${secret ? ' (auth required)' : ''}`);
  console.log('type "clear" and Enter here to clear an e-stop (the operator\'s action; /wmrl/reset does not clear it)');
  // The operator's console: the one place an e-stop is released, as on a real robot's controller.
  const rl = createInterface({ input: process.stdin, terminal: false });
  rl.on('line', (line) => {
    const cmd = line.trim();
    if (cmd === 'clear') {
      const was = standIn.isEstopped;
      standIn.clearEstop();
      console.log(was ? 'e-stop cleared by the operator; call /wmrl/reset to start an episode' : 'e-stop was not set');
    } else if (cmd) console.log(`unknown command '${cmd}'; the one command is "clear" (clear the e-stop)`);
  });
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  rl.close();
  await standIn.stop();
  console.log(`stopped after ${standIn.counters.steps} control steps, ${standIn.counters.commands} commands`);
}
