// A remote sandbox worker process: `npx tsx autoresearch/remote-worker.ts --url mqtt://host:1883
// [--credentials data/mqtt-credentials.json | --username wmrl-worker (password in $WMRL_MQTT_PASSWORD)]
// [--program PATH#EXPORT]... [--max-timeout-ms N] [--max-memory-mb N] [--max-procs N]
// [--slots N] [--group sandbox] [--id NAME] [--protocol 4|5]`. --protocol 4 (MQTT 3.1.1, the default)
// is what the service's embedded aedes broker speaks, and Mosquitto and EMQX too; 5 only for a broker
// that needs it. It takes sandbox jobs from the
// broker's share group and runs them in its own sandbox pool until SIGINT/SIGTERM; prints
// "ready <id> <slots> network=<on|off>" once subscribed. It runs the built-in research tasks'
// programs and the --program ones, nothing else; a job's limits are cut to the --max-* values
// (default: the sandbox defaults).
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { connector } from '../bridge/mqtt/client.js';
import { serveRemoteSlots } from './remote.js';
import { DEFAULT_LIMITS, SandboxPool, type SandboxLimits, type SandboxProgram } from './sandbox.js';
import { RESEARCH_TASKS } from './tasks/index.js';

const { values } = parseArgs({
  options: {
    url: { type: 'string' },
    slots: { type: 'string', default: '1' },
    group: { type: 'string', default: 'sandbox' },
    id: { type: 'string', default: `${hostname()}-${process.pid}` },
    protocol: { type: 'string', default: '4' },
    credentials: { type: 'string' },
    username: { type: 'string' },
    program: { type: 'string', multiple: true, default: [] },
    'max-timeout-ms': { type: 'string' },
    'max-memory-mb': { type: 'string' },
    'max-procs': { type: 'string' },
  },
});
if (!values.url) throw new Error('--url mqtt://host:port is required');
if (values.protocol !== '4' && values.protocol !== '5') throw new Error(`--protocol ${values.protocol}: expected 4 (MQTT 3.1.1, the default; the embedded broker speaks only this) or 5`);
const protocolVersion = values.protocol === '4' ? 4 : 5;

function login(): { username?: string; password?: string } {
  if (values.credentials) {
    const c = JSON.parse(readFileSync(values.credentials, 'utf8')) as { worker?: { username?: unknown; password?: unknown } };
    if (typeof c.worker?.username !== 'string' || typeof c.worker.password !== 'string') throw new Error(`${values.credentials}: no worker login (worker.username, worker.password)`);
    return { username: c.worker.username, password: c.worker.password };
  }
  if (values.username) {
    const password = process.env.WMRL_MQTT_PASSWORD;
    if (!password) throw new Error('--username needs the password in the WMRL_MQTT_PASSWORD environment variable');
    return { username: values.username, password };
  }
  return {};
}

const programs: SandboxProgram[] = [...RESEARCH_TASKS.values()].map((t) => t.program);
for (const spec of values.program) {
  const m = /^(.+)#([A-Za-z_$][\w$]*)$/.exec(spec);
  if (!m) throw new Error(`--program ${spec}: expected PATH#EXPORT, e.g. autoresearch/tasks/controller.ts#runController`);
  programs.push({ kind: 'module', path: resolve(m[1]!), export: m[2]! });
}

function positive(flag: string, v: string | undefined, fallback: number): number {
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!(n > 0) || !Number.isFinite(n)) throw new Error(`--${flag} ${v}: expected a positive number`);
  return n;
}
const maxLimits: SandboxLimits = {
  timeoutMs: positive('max-timeout-ms', values['max-timeout-ms'], DEFAULT_LIMITS.timeoutMs),
  memoryMb: positive('max-memory-mb', values['max-memory-mb'], DEFAULT_LIMITS.memoryMb),
  maxProcs: positive('max-procs', values['max-procs'], DEFAULT_LIMITS.maxProcs),
};

const pool = SandboxPool.create({ slots: Number(values.slots), limits: maxLimits });
const fail = (e: Error) => console.error(`remote-worker ${values.id}: ${e.message}`);
const served = await serveRemoteSlots({
  connect: connector(values.url, { protocolVersion, reconnectPeriodMs: 500, ...login() }),
  pool,
  programs,
  maxLimits,
  group: values.group,
  workerId: values.id,
  onError: fail,
});
console.log(`ready ${values.id} ${pool.capacity} network=${pool.isolation.network ? 'on' : 'off'}`);
const stop = async () => {
  await served.stop();
  await pool.close();
  process.exit(0);
};
process.once('SIGINT', () => void stop());
process.once('SIGTERM', () => void stop());
