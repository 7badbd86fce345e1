// Starts the sim stand-in robot as its own process (the real hardware stand-in path) and stops it.
import { spawn, type ChildProcess } from 'node:child_process';

export interface StandInProcess {
  port: number;
  proc: ChildProcess;
  stop(): Promise<void>;
}

export async function spawnStandIn(args: string[] = []): Promise<StandInProcess> {
  const proc = spawn(process.execPath, ['--import', 'tsx', 'bin/wmrl.ts', 'sim-robot', '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  proc.stderr!.on('data', (d) => (err += d));
  const port = await new Promise<number>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`stand-in did not start: ${err}`)), 60_000);
    proc.stdout!.on('data', (d) => {
      out += d;
      const m = /serving rosbridge v2 on ws:\/\/[^:]+:(\d+)/.exec(out);
      if (m) {
        clearTimeout(t);
        resolve(Number(m[1]));
      }
    });
    proc.once('exit', (code) => reject(new Error(`stand-in exited (${code}): ${err}`)));
  });
  return {
    port,
    proc,
    stop: () =>
      new Promise<void>((resolve) => {
        if (proc.exitCode !== null) return resolve();
        proc.once('exit', () => resolve());
        proc.kill('SIGTERM');
        setTimeout(() => proc.kill('SIGKILL'), 3000).unref();
      }),
  };
}
