// Sandbox slots on other machines, through the MQTT broker's shared subscriptions
// (bridge/mqtt/jobs.ts): the service side is an Executor that publishes each sandbox job as a
// rollout job (its program, input and limits in `params`); every remote slot is one MQTT client in
// the share group `$share/{group}/wmrl/jobs/rollout` that runs the job in its machine's own sandbox
// pool and answers with the score, or with `ok: false` and the reason (unscored, never 0).
// A job names its program; a worker runs only programs it was started with (the built-in tasks',
// and module paths given to it), never code carried by the message, and caps the job's limits at
// its own maxima. The broker's logins (README, MQTT security) keep others off the jobs topic.
import { isAbsolute, relative, resolve } from 'node:path';
import type { MqttClient } from 'mqtt';
import type { ConnectFn } from '../bridge/mqtt/client.js';
import { endClient } from '../bridge/mqtt/client.js';
import { JobDispatcher, serveRolloutJobs, type RolloutWorker } from '../bridge/mqtt/jobs.js';
import { PACKAGE_ROOT } from '../common/package-root.js';
import type { Executor, FailReason, SandboxJob, SandboxLimits, SandboxOutcome, SandboxPool, SandboxProgram } from './sandbox.js';

type ModuleProgram = Extract<SandboxProgram, { kind: 'module' }>;

const REASONS: readonly FailReason[] = ['timeout', 'memory', 'procs', 'crash', 'error', 'cancelled'];

export interface RemoteSlotsOptions {
  /** Remote slots (worker clients) expected in the share group: jobs in flight at most. */
  capacity: number;
  /** Re-publish a job whose result is this late (default: the job's timeout + 30 s). */
  resultTimeoutMs?: number;
  onError: (e: Error) => void;
}

/** Service side: sandbox jobs published to remote slots. Slot time is the round trip, as seen from here. */
export class RemoteSlots implements Executor {
  readonly capacity: number;
  /** Jobs answered per remote worker id. */
  readonly perWorker = new Map<string, number>();
  private inFlight = 0;
  private readonly waiting: Array<() => void> = [];
  private next = 0;
  private readonly prefix = `ar-${process.pid}-${Date.now().toString(36)}`;

  private constructor(private readonly dispatcher: JobDispatcher, o: RemoteSlotsOptions) {
    if (!(Number.isInteger(o.capacity) && o.capacity >= 1)) throw new Error(`remote capacity ${o.capacity} must be a positive integer`);
    this.capacity = o.capacity;
  }

  static async create(client: MqttClient, o: RemoteSlotsOptions): Promise<RemoteSlots> {
    const d = await JobDispatcher.create(client, { resultTimeoutMs: o.resultTimeoutMs ?? 60_000, onError: o.onError });
    return new RemoteSlots(d, o);
  }

  get queueLength(): number {
    return this.waiting.length;
  }

  get busy(): number {
    return this.inFlight;
  }

  async run(job: SandboxJob, signal?: AbortSignal): Promise<SandboxOutcome> {
    while (this.inFlight >= this.capacity) await new Promise<void>((r) => this.waiting.push(r));
    this.inFlight++;
    const started = performance.now();
    const jobId = `${this.prefix}-${this.next++}`;
    try {
      if (signal?.aborted) return { ok: false, reason: 'cancelled', detail: 'aborted before it started', slotMs: 0, cpuMs: 0, slot: -1 };
      const r = await this.dispatcher.submit({ jobId, policyVersion: 'autoresearch', seed: 0, horizon: 1, params: { program: job.program, input: job.input, limits: job.limits ?? {} } });
      this.perWorker.set(r.workerId, (this.perWorker.get(r.workerId) ?? 0) + 1);
      const slotMs = performance.now() - started;
      // A remote worker reports no CPU time: the run is charged the time it held the slot, as a run that never answered is.
      const cpuMs = slotMs;
      if (r.ok && r.score !== undefined) return { ok: true, value: { score: r.score }, slotMs, cpuMs, slot: -1 };
      const text = r.error ?? 'no score';
      const reason = REASONS.find((x) => text.startsWith(`${x}: `)) ?? 'crash';
      return { ok: false, reason, detail: `remote worker ${r.workerId}: ${text.slice(reason.length + 2) || text}`, slotMs, cpuMs, slot: -1 };
    } finally {
      this.inFlight--;
      this.waiting.shift()?.();
    }
  }

  close(): void {
    this.dispatcher.close();
  }
}

export interface RemoteWorkerOptions {
  /** Opens one MQTT client per slot (clean sessions: a dead slot must not keep its share). */
  connect: ConnectFn;
  pool: SandboxPool;
  /** The only programs this worker runs (module programs): the built-in tasks', and paths it was started with. */
  programs: readonly SandboxProgram[];
  /** The most a job may ask for (default: the pool's own limits); larger requests are cut to these. */
  maxLimits?: SandboxLimits;
  group: string;
  workerId: string;
  onError: (e: Error) => void;
}

/** Worker side: one share-group member per slot of the local pool; each runs one job at a time. */
export async function serveRemoteSlots(o: RemoteWorkerOptions): Promise<{ workers: RolloutWorker[]; stop(): Promise<void> }> {
  const known = o.programs.map((p) => {
    if (p.kind !== 'module') throw new Error('a remote worker runs module programs only (path and export); source code is never taken from a job');
    return p;
  });
  const max = o.maxLimits ?? o.pool.limits;
  const clients: MqttClient[] = [];
  const workers: RolloutWorker[] = [];
  for (let i = 0; i < o.pool.capacity; i++) {
    const client = await o.connect({ clientId: `${o.workerId}-slot${i}`, clean: true, onError: o.onError });
    clients.push(client);
    workers.push(await serveRolloutJobs(client, {
      group: o.group,
      workerId: o.workerId,
      onError: o.onError,
      run: async (job) => {
        const p = job.params as Partial<SandboxJob> | undefined;
        if (!p || typeof p.program !== 'object' || p.program === null) throw new Error('crash: the job carries no sandbox program');
        const program = knownProgram(known, p.program);
        if (!program) throw new Error(`error: ${describe(p.program)} is not a program this worker runs (it runs ${known.map(describe).join(', ') || 'none'})`);
        const out = await o.pool.run({ program, input: p.input, limits: capLimits(p.limits, o.pool.limits, max) });
        if (!out.ok) throw new Error(`${out.reason}: ${out.detail}`);
        const score = (out.value as { score?: unknown } | null)?.score;
        if (typeof score !== 'number' || !Number.isFinite(score)) throw new Error('error: the program returned no finite score');
        return { score, steps: 1 };
      },
    }));
  }
  return {
    workers,
    async stop() {
      for (const w of workers) await w.stop();
      for (const c of clients) await endClient(c);
    },
  };
}

function describe(p: SandboxProgram): string {
  if (p.kind === 'module' && typeof p.path === 'string') return `${p.path}#${String(p.export)}`;
  return `a ${String((p as { kind?: unknown }).kind)} program`;
}

/** A module path without its .ts or .js: a source and its build in dist/ name the same module. */
const stem = (path: string) => path.replace(/\.[jt]s$/, '');

/**
 * The worker's own entry for the program a job names: the same export of the same file, by absolute
 * path or, inside this project, by its path from the project root (the service's checkout may live
 * elsewhere, and either of them may run the sources or the build in dist/). What runs is always the
 * worker's entry, never the message's path.
 */
export function knownProgram(known: readonly ModuleProgram[], asked: SandboxProgram): ModuleProgram | undefined {
  if (asked.kind !== 'module' || typeof asked.path !== 'string' || typeof asked.export !== 'string') return undefined;
  const path = asked.path.replaceAll('\\', '/');
  return known.find((k) => {
    if (k.export !== asked.export) return false;
    const own = resolve(k.path);
    if (path === own) return true;
    const rel = relative(PACKAGE_ROOT, own);
    if (rel.startsWith('..') || isAbsolute(rel)) return false;
    const id = stem(rel.replaceAll('\\', '/')).replace(/^dist\//, '');
    return stem(path).endsWith(`/${id}`);
  });
}

/** Each limit: what the job asks for (else the pool's default), never above the worker's maximum. */
export function capLimits(asked: unknown, defaults: SandboxLimits, max: SandboxLimits): SandboxLimits {
  const a = (typeof asked === 'object' && asked !== null ? asked : {}) as Partial<Record<keyof SandboxLimits, unknown>>;
  const out = {} as SandboxLimits;
  for (const k of ['timeoutMs', 'memoryMb', 'maxProcs'] as const) {
    const v = a[k];
    out[k] = Math.min(typeof v === 'number' && !Number.isNaN(v) ? v : defaults[k], max[k]);
  }
  return out;
}
