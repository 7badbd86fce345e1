// Starts the sim stand-in robot as its own process (the real hardware stand-in path) and stops it.
import { spawn, type ChildProcess } from 'node:child_process';

export interface StandInProcess {
  port: number;
  proc: ChildProcess;
  /** Everything the process printed so far. */
  readonly stdout: string;
  /** The operator's action: types "clear" into the stand-in's terminal and waits for its answer. */
  clearEstop(): Promise<string>;
  stop(): Promise<void>;
}

export async function spawnStandIn(args: string[] = [], env: Record<string, string> = {}): Promise<StandInProcess> {
  const proc = spawn(process.execPath, ['--import', 'tsx', 'bin/wmrl.ts', 'sim-robot', '--port', '0', ...args], { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  let out = '';
  let err = '';
  proc.stderr!.on('data', (d) => (err += d));
  proc.stdout!.on('data', (d) => (out += d));
  const port = await new Promise<number>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`stand-in did not start: ${err}`)), 60_000);
    proc.stdout!.on('data', () => {
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
    get stdout() {
      return out;
    },
    async clearEstop() {
      const from = out.length;
      proc.stdin!.write('clear\n');
      const end = Date.now() + 10_000;
      for (;;) {
        const m = /^(e-stop (?:cleared|was not set).*)$/m.exec(out.slice(from));
        if (m) return m[1]!;
        if (Date.now() > end) throw new Error(`stand-in did not answer "clear": ${out.slice(from)}`);
        await new Promise((r) => setTimeout(r, 10));
      }
    },
    stop: () =>
      new Promise<void>((resolve) => {
        if (proc.exitCode !== null) return resolve();
        proc.once('exit', () => resolve());
        proc.kill('SIGTERM');
        setTimeout(() => proc.kill('SIGKILL'), 3000).unref();
      }),
  };
}
