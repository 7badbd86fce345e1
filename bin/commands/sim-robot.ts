// `wmrl sim-robot`: the hardware stand-in as its own process, serving rosbridge v2.
import { parseArgs } from 'node:util';
import { startStandIn } from '../../hardware/standin.js';

export async function simRobot(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      task: { type: 'string', default: 'reach' },
      profile: { type: 'string', default: 'nominal' },
      host: { type: 'string', default: '127.0.0.1' },
      port: { type: 'string', default: '9090' },
      seed: { type: 'string', default: '0' },
      'camera-hz': { type: 'string', default: '0' },
      image: { type: 'string', default: '64' },
    },
  });
  const num = (k: keyof typeof values, ok: (v: number) => boolean) => {
    const v = Number(values[k]);
    if (!ok(v)) throw new Error(`--${k} has an invalid value '${values[k]}'`);
    return v;
  };
  const standIn = await startStandIn({
    task: values.task!,
    profile: values.profile!,
    host: values.host!,
    port: num('port', (v) => Number.isInteger(v) && v >= 0 && v < 65536),
    seed: num('seed', Number.isInteger),
    cameraHz: num('camera-hz', (v) => v >= 0 && v <= 60),
    image: num('image', (v) => Number.isInteger(v) && v >= 8 && v <= 512),
  });
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

