// The sandbox pool: N exclusive slots, each running one proposal at a time in a fresh Node.js
// subprocess (sandbox-runner.ts), with a wall-clock timeout, a memory limit, a process limit and
// no network. Jobs beyond N wait in a FIFO queue. A proposal that times out, crashes, runs out of
// memory or forks too much comes back unscored (`ok: false` with its reason), never as a score 0.
//
// What is enforced where (probed once, at `SandboxPool.create`, and reported as `isolation`):
//
// | limit        | how                                                                                  | without it                  |
// |--------------|--------------------------------------------------------------------------------------|-----------------------------|
// | network      | `unshare --net`: a fresh network namespace with only a down loopback (ENETUNREACH)   | NOT enforced (reported)     |
// | processes    | `unshare --pid --fork --kill-child`: the whole tree dies with the slot; plus the      | process-group kill          |
// |              | watchdog (count of the tree's processes > maxProcs → killed, reason `procs`) and     |                             |
// |              | RLIMIT_NPROC (prlimit; it binds only a non-root uid, so as root the child drops to   |                             |
// |              | uid/gid 65534 with `setpriv`, which also keeps it from writing the service's files)   |                             |
// | memory       | V8 heap cap (`--max-old-space-size`), RLIMIT_DATA (prlimit) per process, and the      | heap cap + watchdog only    |
// |              | watchdog on the tree's summed RSS (→ reason `memory`)                                |                             |
// | time         | wall-clock timer in this process: SIGKILL to the tree (→ reason `timeout`)           | always                      |
//
// Without `unshare` (refused by the OS, e.g. user namespaces disabled) the pool still runs, with
// `isolation.network = false`; callers that need a network-free sandbox must check it.
// A proposal runs in the same process as the program that scores it, so *code* proposals could
// tamper with their own reported score; the built-in tasks' proposals are data (structured fields)
// run by the project's own programs.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync, readdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..');
const RUNNER = join(HERE, 'sandbox-runner.ts');
/** Bundles live inside node_modules so that their bare imports (onnxruntime-node, ...) resolve. */
const BUNDLES = join(ROOT, 'node_modules', '.cache', 'wmrl-sandbox');

/** What a slot runs: an exported function of a module file, or ES-module source whose default export is the function. */
export type SandboxProgram =
  | {
      kind: 'module';
      path: string;
      export: string;
      /**
       * Bundle the module (and the runner) with esbuild into plain ES modules once per pool, so a run
       * starts in plain node (~0.2 s) instead of under tsx (~0.7 s). Only for programs that do not
       * find files relative to their own source (`import.meta.url` then names the bundle).
       */
      bundle?: boolean;
    }
  | { kind: 'source'; code: string };

export interface SandboxLimits {
  /** Wall-clock limit of one run, spawn to exit. */
  timeoutMs: number;
  /** Summed resident memory of the run's processes, and each process's data segment. */
  memoryMb: number;
  /** Processes the run may have at once (the node process itself counts). */
  maxProcs: number;
}

export const DEFAULT_LIMITS: SandboxLimits = { timeoutMs: 30_000, memoryMb: 1024, maxProcs: 8 };

export interface SandboxJob {
  program: SandboxProgram;
  /** JSON-serializable input handed to the program's function. */
  input: unknown;
  limits?: Partial<SandboxLimits>;
}

/** Why a run came back unscored. */
export type FailReason = 'timeout' | 'memory' | 'procs' | 'crash' | 'error' | 'cancelled';

export type SandboxOutcome =
  | { ok: true; value: unknown; slotMs: number; slot: number }
  | { ok: false; reason: FailReason; detail: string; slotMs: number; slot: number };

/** Which limits this machine lets the pool enforce. */
export interface Isolation {
  /** No network inside the sandbox (network namespace). */
  network: boolean;
  /** The run's processes live in their own PID namespace and all die with it. */
  pidNamespace: boolean;
  /** RLIMIT_NPROC and RLIMIT_DATA set with prlimit. */
  rlimits: boolean;
  /** The uid the run executes as when the service runs as root (dropped with setpriv); null otherwise. */
  droppedToUid: number | null;
  /** The command prefix, for the record. */
  prefix: string[];
}

/** Anything that runs sandbox jobs: the local pool, or remote slots over MQTT (remote.ts). */
export interface Executor {
  run(job: SandboxJob, signal?: AbortSignal): Promise<SandboxOutcome>;
  readonly capacity: number;
  readonly queueLength: number;
  readonly busy: number;
}

export interface PoolOptions {
  slots: number;
  limits?: Partial<SandboxLimits>;
  /** Watchdog period. */
  pollMs?: number;
  /** Force the fallback (no namespaces), e.g. to test it; default: probe. */
  noNamespaces?: boolean;
}

export interface PoolStats {
  capacity: number;
  busy: number;
  queueLength: number;
  completed: number;
  failed: Record<FailReason, number>;
  /** Summed slot time of finished runs, ms. */
  slotMs: number;
}

const NOBODY = 65534;

const works = (cmd: string[]): boolean => spawnSync(cmd[0]!, cmd.slice(1), { stdio: 'ignore', timeout: 10_000 }).status === 0;

/** Probes which isolation this machine allows; the command prefix that sets it up. */
export function probeIsolation(noNamespaces = false): Isolation {
  const root = process.getuid?.() === 0;
  const drop = root && works(['setpriv', '--reuid', String(NOBODY), '--regid', String(NOBODY), '--clear-groups', 'true']);
  const dropCmd = drop ? ['setpriv', '--reuid', String(NOBODY), '--regid', String(NOBODY), '--clear-groups'] : [];
  const rlimits = works(['prlimit', '--nproc=1024', 'true']);
  // As root no user namespace is needed (and it would keep uid 0 mapped); otherwise -r maps us to root inside.
  const ns = ['unshare', ...(root ? [] : ['--map-root-user']), '--net', '--pid', '--fork', '--kill-child'];
  const nsOk = !noNamespaces && works([...ns, ...dropCmd, 'true']);
  return {
    network: nsOk,
    pidNamespace: nsOk,
    rlimits,
    droppedToUid: drop ? NOBODY : null,
    prefix: [...(nsOk ? ns : []), ...dropCmd],
  };
}

/**
 * Processes of the tree under `pid`, with their summed RSS in kB; `pid` itself counts when `self`
 * (without a PID namespace the spawned process is node itself; with one it is the small `unshare`).
 */
function tree(pid: number, self: boolean): { count: number; rssKb: number } {
  let count = 0;
  let rssKb = 0;
  const stack = [pid];
  const seen = new Set<number>();
  while (stack.length) {
    const p = stack.pop()!;
    if (seen.has(p)) continue;
    seen.add(p);
    if (p !== pid || self) {
      count++;
      try {
        const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${p}/status`, 'utf8'));
        if (m) rssKb += Number(m[1]);
      } catch {
        continue; // exited between listing and reading: nothing to count
      }
    }
    let tasks: string[];
    try {
      tasks = readdirSync(`/proc/${p}/task`);
    } catch {
      continue;
    }
    for (const t of tasks) {
      try {
        for (const c of readFileSync(`/proc/${p}/task/${t}/children`, 'utf8').split(' ')) if (c.trim()) stack.push(Number(c));
      } catch {
        // the thread ended while we walked
      }
    }
  }
  return { count, rssKb };
}

// V8's heap cap, an ArrayBuffer refused under RLIMIT_DATA, malloc failures in native code.
const MEMORY_TEXT = /heap limit|out of memory|allocation failed|Cannot allocate memory|ENOMEM|std::bad_alloc/i;

interface Pending {
  job: SandboxJob;
  resolve: (o: SandboxOutcome) => void;
  reject: (e: Error) => void;
  signal?: AbortSignal;
}

export class SandboxPool implements Executor {
  private readonly queue: Pending[] = [];
  private readonly free: number[];
  private readonly running = new Set<ChildProcess>();
  private closed = false;
  private readonly stats_: PoolStats;
  /** Entry (the runner, a module) → its bundle, built once per pool. */
  private readonly bundles = new Map<string, Promise<string>>();
  readonly limits: SandboxLimits;

  private constructor(readonly isolation: Isolation, readonly capacity: number, limits: SandboxLimits, private readonly pollMs: number) {
    this.free = Array.from({ length: capacity }, (_, i) => capacity - 1 - i);
    this.limits = limits;
    this.stats_ = { capacity, busy: 0, queueLength: 0, completed: 0, failed: { timeout: 0, memory: 0, procs: 0, crash: 0, error: 0, cancelled: 0 }, slotMs: 0 };
  }

  static create(o: PoolOptions): SandboxPool {
    if (!(Number.isInteger(o.slots) && o.slots >= 1)) throw new Error(`sandbox slots ${o.slots} must be a positive integer`);
    const limits = { ...DEFAULT_LIMITS, ...o.limits };
    checkLimits(limits);
    return new SandboxPool(probeIsolation(o.noNamespaces), o.slots, limits, o.pollMs ?? 50);
  }

  get queueLength(): number {
    return this.queue.length;
  }

  get busy(): number {
    return this.capacity - this.free.length;
  }

  stats(): PoolStats {
    return { ...this.stats_, failed: { ...this.stats_.failed }, busy: this.busy, queueLength: this.queueLength };
  }

  /**
   * Runs one job when a slot is free. The job's own faults are outcomes (`ok: false`); it rejects
   * only for faults of the pool (closed, a program that cannot be bundled, a spawn failure).
   */
  run(job: SandboxJob, signal?: AbortSignal): Promise<SandboxOutcome> {
    if (this.closed) return Promise.reject(new Error('sandbox pool is closed'));
    const limits = { ...this.limits, ...job.limits };
    checkLimits(limits);
    return new Promise((resolve, reject) => {
      this.queue.push({ job: { ...job, limits }, resolve, reject, signal });
      this.pump();
    });
  }

  /** Kills running jobs (their outcome: cancelled) and refuses new ones. */
  async close(): Promise<void> {
    this.closed = true;
    for (const p of this.queue.splice(0)) p.resolve({ ok: false, reason: 'cancelled', detail: 'pool closed', slotMs: 0, slot: -1 });
    const exits = [...this.running].map((c) => new Promise<void>((r) => { if (c.exitCode !== null || c.signalCode !== null) r(); else c.once('exit', () => r()); }));
    for (const c of this.running) killTree(c);
    await Promise.all(exits);
    // This pool's bundles (a build that failed left nothing to remove).
    const files = await Promise.all([...this.bundles.values()].map((b) => b.catch(() => null)));
    for (const f of files) if (f) rmSync(f, { force: true });
  }

  private pump(): void {
    while (this.free.length && this.queue.length) {
      const p = this.queue.shift()!;
      if (p.signal?.aborted) {
        p.resolve({ ok: false, reason: 'cancelled', detail: 'aborted before it started', slotMs: 0, slot: -1 });
        continue;
      }
      const slot = this.free.pop()!;
      // The slot is free again before the caller hears the outcome (stats read right after are exact).
      const release = () => {
        this.free.push(slot);
        if (!this.closed) queueMicrotask(() => this.pump());
      };
      this.execute(p, slot).then(
        (o) => {
          release();
          this.stats_.slotMs += o.slotMs;
          if (o.ok) this.stats_.completed++;
          else this.stats_.failed[o.reason]++;
          p.resolve(o);
        },
        (e: unknown) => {
          release();
          p.reject(e instanceof Error ? e : new Error(String(e)));
        },
      );
    }
  }

  /**
   * esbuild (tsx's own compiler; tsx runs the service) bundles `entry` into one ES module under
   * node_modules/.cache, once per pool; imported only when a run needs a bundle.
   */
  private bundle(entry: string): Promise<string> {
    let b = this.bundles.get(entry);
    if (!b) {
      b = (async () => {
        const esbuild = await import('esbuild');
        const outfile = join(BUNDLES, `${process.pid}-${this.bundles.size}-${Date.now()}.mjs`);
        try {
          await esbuild.build({ entryPoints: [entry], bundle: true, platform: 'node', format: 'esm', target: 'node20', packages: 'external', outfile, logLevel: 'silent' });
        } catch (e) {
          throw new Error(`sandbox: could not bundle ${entry}: ${(e as Error).message}`, { cause: e });
        }
        return outfile;
      })();
      this.bundles.set(entry, b);
    }
    return b;
  }

  /** Source programs and bundled modules start in plain node with the bundled runner; other modules under tsx. */
  private async execute(p: Pending, slot: number): Promise<SandboxOutcome> {
    const started = performance.now();
    const prog = p.job.program;
    if (prog.kind === 'module' && !prog.bundle) return this.spawnRun(p, slot, ['--import', 'tsx', RUNNER], prog, started);
    const runner = await this.bundle(RUNNER);
    const program = prog.kind === 'module' ? { ...prog, path: await this.bundle(prog.path) } : prog;
    return this.spawnRun(p, slot, [runner], program, started);
  }

  private spawnRun(p: Pending, slot: number, runner: string[], program: SandboxProgram, started: number): Promise<SandboxOutcome> {
    const limits = p.job.limits as SandboxLimits;
    const iso = this.isolation;
    const rl = iso.rlimits
      ? ['prlimit', `--nproc=${iso.droppedToUid !== null || process.getuid?.() !== 0 ? 256 * this.capacity : 4096}`, `--data=${limits.memoryMb * 1024 * 1024}`, '--core=0', '--']
      : [];
    const node = [process.execPath, `--max-old-space-size=${Math.max(16, Math.floor(limits.memoryMb * 0.75))}`, ...runner];
    const cmd = [...iso.prefix, ...rl, ...node];
    const child = spawn(cmd[0]!, cmd.slice(1), {
      cwd: ROOT,
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe', 'pipe'],
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/tmp', TMPDIR: '/tmp', LANG: 'C.UTF-8' },
    });
    this.running.add(child);
    let killedFor: { reason: FailReason; detail: string } | null = null;
    const kill = (reason: FailReason, detail: string) => {
      killedFor ??= { reason, detail };
      killTree(child);
    };
    const stderrTail: string[] = [];
    let resultText = '';
    (child.stderr as Readable).on('data', (d: Buffer) => {
      stderrTail.push(d.toString('utf8'));
      if (stderrTail.length > 20) stderrTail.shift();
    });
    (child.stdout as Readable).resume();
    (child.stdio[3] as Readable).on('data', (d: Buffer) => {
      if (resultText.length < 16 * 1024 * 1024) resultText += d.toString('utf8');
    });
    const stdin = child.stdin as Writable;
    stdin.on('error', () => {}); // a child that died before reading its job: its exit is the outcome
    stdin.end(JSON.stringify({ program, input: p.job.input }));

    const timer = setTimeout(() => kill('timeout', `no result within ${limits.timeoutMs} ms`), limits.timeoutMs);
    const watchdog = setInterval(() => {
      if (child.pid === undefined) return;
      const t = tree(child.pid, !iso.pidNamespace);
      if (t.count > limits.maxProcs) kill('procs', `${t.count} processes exceed the limit of ${limits.maxProcs}`);
      else if (t.rssKb > limits.memoryMb * 1024) kill('memory', `resident memory ${(t.rssKb / 1024).toFixed(0)} MB exceeds the limit of ${limits.memoryMb} MB`);
    }, this.pollMs);
    const onAbort = () => kill('cancelled', 'aborted by the caller');
    p.signal?.addEventListener('abort', onAbort, { once: true });

    return new Promise<SandboxOutcome>((resolve, reject) => {
      let done = false;
      const finish = (code: number | null, sig: NodeJS.Signals | null, spawnError?: Error) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        clearInterval(watchdog);
        p.signal?.removeEventListener('abort', onAbort);
        // Whatever the program left running (it answered, or died) goes with it.
        killTree(child);
        this.running.delete(child);
        const slotMs = performance.now() - started;
        const base = { slotMs, slot };
        if (killedFor) return resolve({ ok: false, ...killedFor, ...base });
        if (spawnError) return reject(new Error(`sandbox: could not start ${cmd[0]}: ${spawnError.message}`, { cause: spawnError }));
        const line = resultText.split('\n').find((l) => l.trim());
        if (line) {
          let msg: { ok?: unknown; value?: unknown; error?: unknown };
          try {
            msg = JSON.parse(line) as typeof msg;
          } catch {
            return resolve({ ok: false, reason: 'crash', detail: `unreadable result: ${line.slice(0, 200)}`, ...base });
          }
          if (msg.ok === true) return resolve({ ok: true, value: msg.value, ...base });
          const detail = String(msg.error);
          return resolve({ ok: false, reason: MEMORY_TEXT.test(detail) ? 'memory' : 'error', detail, ...base });
        }
        const err = stderrTail.join('').slice(-2000);
        const how = sig ? `signal ${sig}` : `exit code ${code}`;
        return resolve({ ok: false, reason: MEMORY_TEXT.test(err) ? 'memory' : 'crash', detail: `died without a result (${how}): ${err.trim().split('\n').slice(-3).join(' | ')}`, ...base });
      };
      child.once('error', (e) => finish(null, null, e));
      // 'close' waits for the result pipe to drain; it fires once the tree is gone.
      child.once('close', (code, sig) => finish(code, sig));
      child.once('exit', () => {
        // In the fallback (no PID namespace) stragglers could hold the pipes open: kill them.
        killTree(child);
      });
    });
  }
}

function killTree(c: ChildProcess): void {
  if (c.pid === undefined) return;
  try {
    process.kill(-c.pid, 'SIGKILL');
  } catch {
    // the group is already gone
  }
}

function checkLimits(l: SandboxLimits): void {
  if (!(l.timeoutMs > 0)) throw new Error(`sandbox timeoutMs ${l.timeoutMs} must be > 0`);
  if (!(l.memoryMb >= 64)) throw new Error(`sandbox memoryMb ${l.memoryMb} must be ≥ 64`);
  if (!(Number.isInteger(l.maxProcs) && l.maxProcs >= 1)) throw new Error(`sandbox maxProcs ${l.maxProcs} must be a positive integer`);
}
