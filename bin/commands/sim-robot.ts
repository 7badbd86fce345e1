// `wmrl sim-robot`: the hardware stand-in as its own process, serving rosbridge v2.
import { startStandIn } from '../../hardware/standin.js';

export interface SimRobotCommandOptions {
  task: string;
  profile: string;
  host: string;
  port: number;
  seed: number;
  cameraHz: number;
  image: number;
}

export async function simRobot(values: SimRobotCommandOptions): Promise<void> {
  const standIn = await startStandIn(values);
  const s = standIn.robot.spec;
  console.log(`sim robot '${s.name}' (${s.joints.join(', ')}; ${s.controlHz} Hz) serving rosbridge v2 on ws://${values.host}:${standIn.port}`);
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  await standIn.stop();
  console.log(`stopped after ${standIn.counters.steps} control steps, ${standIn.counters.commands} commands`);
}

