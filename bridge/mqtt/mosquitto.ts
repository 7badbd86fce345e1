// A real Mosquitto process with a generated config: used by the tests to show the transport
// works against a production broker (and survives it being SIGKILLed), and usable in
// production where no system broker is configured.

import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect as netConnect, createServer, type AddressInfo } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

export const DEFAULT_MOSQUITTO = '/usr/sbin/mosquitto';

export interface MosquittoOptions {
  /** 0 (default) picks a free port once; restarts reuse it. */
  port?: number;
  binary?: string;
  /** Directory for config and persistence; a fresh temp dir when absent (removed by dispose). */
  dir?: string;
  /** Seconds between persistence autosaves; Mosquitto's own default is 1800. */
  autosaveSeconds?: number;
  startTimeoutMs?: number;
  /** Username → password: anonymous clients are refused (password file written with mosquitto_passwd). */
  users?: Record<string, string>;
  /** Mosquitto acl_file text (`user NAME` / `topic read|write|readwrite FILTER`, `%u` = username). */
  acl?: string;
  /** TLS on the listener (URL becomes mqtts://): PEM paths of the CA, the broker's certificate and key. */
  tls?: { cafile: string; certfile: string; keyfile: string; requireCertificate?: boolean };
}

export interface Mosquitto {
  readonly port: number;
  readonly url: string;
  readonly dir: string;
  /** Process id of the running broker, undefined while stopped. */
  readonly pid: number | undefined;
  /** Starts the process (again, on the same port and persistence dir) and waits until it accepts TCP. */
  start(): Promise<void>;
  /** SIGKILL: no persistence save, no clean disconnects. Resolves when the process is gone. */
  kill(): Promise<void>;
  /** SIGTERM (Mosquitto saves its persistence file), SIGKILL after a grace period. */
  stop(graceMs?: number): Promise<void>;
  /** stop() and remove the temp dir when this module created it. */
  dispose(): Promise<void>;
  /** The last lines Mosquitto wrote to stderr, for error messages. */
  log(): string;
}

// Brokers this process started die with it, even when a test or a caller forgets stop().
const live = new Set<ChildProcess>();
let exitHookInstalled = false;
function track(p: ChildProcess): void {
  live.add(p);
  p.once('exit', () => live.delete(p));
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const c of live) c.kill('SIGKILL');
  });
}

/** mosquitto_passwd next to the broker binary (Debian: /usr/bin/mosquitto_passwd, broker in /usr/sbin). */
function passwdBinary(broker?: string): string {
  if (!broker || broker === DEFAULT_MOSQUITTO) return '/usr/bin/mosquitto_passwd';
  return join(broker, '..', 'mosquitto_passwd');
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = netConnect({ port, host: '127.0.0.1' });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

export async function startMosquitto(opts: MosquittoOptions = {}): Promise<Mosquitto> {
  const port = opts.port || (await freePort());
  const ownDir = opts.dir === undefined;
  const dir = opts.dir ?? mkdtempSync(join(tmpdir(), 'wmrl-mosquitto-'));
  const conf = join(dir, 'mosquitto.conf');
  const security: string[] = [];
  if (opts.users) {
    const pw = join(dir, 'passwd');
    writeFileSync(pw, '', { mode: 0o600 });
    for (const [user, password] of Object.entries(opts.users)) {
      if (/[:\s]/.test(user)) throw new Error(`mosquitto user '${user}': no ':' or whitespace allowed`);
      execFileSync(passwdBinary(opts.binary), ['-b', pw, user, password], { stdio: ['ignore', 'ignore', 'pipe'] });
    }
    security.push(`password_file ${pw}`);
  }
  if (opts.acl !== undefined) {
    const acl = join(dir, 'acl');
    writeFileSync(acl, opts.acl, { mode: 0o600 });
    security.push(`acl_file ${acl}`);
  }
  if (opts.tls) {
    security.push(`cafile ${opts.tls.cafile}`, `certfile ${opts.tls.certfile}`, `keyfile ${opts.tls.keyfile}`);
    if (opts.tls.requireCertificate) security.push('require_certificate true');
  }
  writeFileSync(
    conf,
    [
      `listener ${port} 127.0.0.1`,
      `allow_anonymous ${opts.users ? 'false' : 'true'}`,
      // Started as root, Mosquitto would switch to the 'mosquitto' user, which cannot read this private
      // temp dir: persistence would fail with "Permission denied" and the password file not open.
      `user ${userInfo().username}`,
      ...security,
      'persistence true',
      `persistence_location ${dir}/`,
      `autosave_interval ${opts.autosaveSeconds ?? 1800}`,
      // The transport's own limits are tighter; this only stops a runaway publisher.
      'max_packet_size 16777216',
      'max_queued_messages 100000',
      'log_dest stderr',
      'log_type error',
      'log_type warning',
      '',
    ].join('\n'),
  );
  let proc: ChildProcess | undefined;
  let stderr = '';
  const timeoutMs = opts.startTimeoutMs ?? 10_000;

  const exited = (p: ChildProcess): Promise<void> =>
    p.exitCode !== null || p.signalCode !== null ? Promise.resolve() : new Promise((r) => p.once('exit', () => r()));

  const m: Mosquitto = {
    port,
    url: `${opts.tls ? 'mqtts' : 'mqtt'}://127.0.0.1:${port}`,
    dir,
    get pid() {
      return proc && proc.exitCode === null && proc.signalCode === null ? proc.pid : undefined;
    },
    log: () => stderr.split('\n').slice(-20).join('\n'),
    async start() {
      if (m.pid !== undefined) throw new Error(`mosquitto on port ${port} is already running (pid ${m.pid})`);
      const p = spawn(opts.binary ?? DEFAULT_MOSQUITTO, ['-c', conf], { stdio: ['ignore', 'ignore', 'pipe'] });
      proc = p;
      track(p);
      p.stderr?.on('data', (d: Buffer) => {
        stderr = (stderr + d.toString()).slice(-8192);
      });
      const spawnError = new Promise<Error>((r) => p.once('error', r));
      const deadline = Date.now() + timeoutMs;
      while (Date.now() < deadline) {
        const err = await Promise.race([spawnError, new Promise<undefined>((r) => setTimeout(r, 25))]);
        if (err) throw new Error(`cannot start ${opts.binary ?? DEFAULT_MOSQUITTO}: ${err.message}`);
        if (p.exitCode !== null || p.signalCode !== null) {
          throw new Error(`mosquitto exited during start (code ${p.exitCode}, signal ${p.signalCode}): ${m.log()}`);
        }
        if (await canConnect(port)) return;
      }
      p.kill('SIGKILL');
      await exited(p);
      throw new Error(`mosquitto did not accept connections on port ${port} within ${timeoutMs} ms: ${m.log()}`);
    },
    async kill() {
      const p = proc;
      if (!p || m.pid === undefined) return;
      p.kill('SIGKILL');
      await exited(p);
    },
    async stop(graceMs = 3000) {
      const p = proc;
      if (!p || m.pid === undefined) return;
      p.kill('SIGTERM');
      const t = setTimeout(() => p.kill('SIGKILL'), graceMs);
      await exited(p);
      clearTimeout(t);
    },
    async dispose() {
      await m.stop();
      if (ownDir) rmSync(dir, { recursive: true, force: true });
    },
  };
  await m.start();
  return m;
}
