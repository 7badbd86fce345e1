// Starts the sim stand-in robot as its own process (the real hardware stand-in path), serving rosbridge or reached
// over MQTT, and stops it.
import { spawn, type ChildProcess } from 'node:child_process';

export interface StandInProcess {
  /** The rosbridge port (0 for the MQTT stand-in). */
  port: number;
  proc: ChildProcess;
  /** Everything the process printed so far. */
  readonly stdout: string;
  /** The operator's action: types "clear" into the stand-in's terminal and waits for its answer. */
  clearEstop(): Promise<string>;
  stop(): Promise<void>;
}

export async function spawnStandIn(args: string[] = [], env: Record<string, string> = {}): Promise<StandInProcess> {
  const { proc, port, output } = await spawnSimRobot(['--port', '0', ...args], env, /serving rosbridge v2 on ws:\/\/[^:]+:(\d+)/);
  return standInProcess(proc, Number(port), output);
}

/** The stand-in reached over MQTT (`sim-robot --transport mqtt`): `args` name its broker, robot id and login. */
export async function spawnMqttStandIn(args: string[], env: Record<string, string> = {}): Promise<StandInProcess> {
  const { proc, output } = await spawnSimRobot(['--transport', 'mqtt', ...args], env, /serving MQTT as robot (\S+)/);
  return standInProcess(proc, 0, output);
}

/** Starts `wmrl sim-robot ARGS` and waits for the line `ready` matches; its first group is returned. */
async function spawnSimRobot(args: string[], env: Record<string, string>, ready: RegExp): Promise<{ proc: ChildProcess; port: string; output: () => string }> {
  const proc = spawn(process.execPath, ['--import', 'tsx', 'bin/wmrl.ts', 'sim-robot', ...args], { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  let out = '';
  let err = '';
  proc.stderr!.on('data', (d) => (err += d));
  proc.stdout!.on('data', (d) => (out += d));
  const port = await new Promise<string>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`stand-in did not start: ${err}`)), 60_000);
    proc.stdout!.on('data', () => {
      const m = ready.exec(out);
      if (m) {
        clearTimeout(t);
        resolve(m[1]!);
      }
    });
    proc.once('exit', (code) => reject(new Error(`stand-in exited (${code}): ${err}`)));
  });
  return { proc, port, output: () => out };
}

function standInProcess(proc: ChildProcess, port: number, output: () => string): StandInProcess {
  return {
    port,
    proc,
    get stdout() {
      return output();
    },
    async clearEstop() {
      const from = output().length;
      proc.stdin!.write('clear\n');
      const end = Date.now() + 10_000;
      for (;;) {
        const m = /^(e-stop (?:cleared|was not set).*)$/m.exec(output().slice(from));
        if (m) return m[1]!;
        if (Date.now() > end) throw new Error(`stand-in did not answer "clear": ${output().slice(from)}`);
        await new Promise((r) => setTimeout(r, 10));
      }
    },
    stop: () =>
      new Promise<void>((resolve) => {
        // Exited already, by itself or by a signal (a test's SIGKILL).
        if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
        proc.once('exit', () => resolve());
        proc.kill('SIGTERM');
        setTimeout(() => proc.kill('SIGKILL'), 3000).unref();
      }),
  };
}
