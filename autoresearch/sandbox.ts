// The sandbox pool: N exclusive slots, each running one proposal at a time in a fresh Node.js
// subprocess (sandbox-runner.ts) inside a bubblewrap (`bwrap`) sandbox, with a wall-clock timeout,
// a memory limit, a process limit, no network and no view of the service's files. Jobs beyond N
// wait in a FIFO queue. A proposal that times out, crashes, runs out of memory, forks too much or
// leaves processes behind comes back unscored (`ok: false` with its reason), never as a score 0.
//
// What is enforced where (checked once, at `SandboxPool.create`, and reported as `isolation`):
//
// | limit        | how                                                                                      |
// |--------------|------------------------------------------------------------------------------------------|
// | network      | bwrap `--unshare-net`: a fresh network namespace with only a down loopback (ENETUNREACH) |
// | files        | bwrap mount namespace: read-only /usr (+ /lib*, /bin links), a few /etc files, the node  |
// |              | binary, and of the repository only package.json, tsconfig.json, node_modules and the     |
// |              | source folders tsconfig.json includes, and dist/ when the code runs from the build       |
// |              | (never data/, runs/, .git, ...); a private tmpfs /tmp (HOME, TMPDIR, cwd) of a quarter   |
// |              | of the memory limit                                                                      |
// | uid          | as root: bwrap keeps only CAP_SETUID/SETGID, and setpriv drops to uid/gid 65534 with     |
// |              | no-new-privs; otherwise a user namespace (nested ones disabled)                          |
// | user ns      | a seccomp filter (bwrap `--seccomp`): unshare/clone with CLONE_NEWUSER → EPERM, clone3   |
// |              | → ENOSYS (libc falls back to clone), other ABIs (i386, x32) killed; x64 and arm64 only   |
// |              | (as root elsewhere `create` throws); not root: also bwrap `--disable-userns`             |
// | open fds     | only 0-2 and the result pipe (3): bwrap's init closes the rest, the runner closes those  |
// |              | it inherited without close-on-exec before it reads its job                               |
// | processes    | bwrap `--unshare-pid --die-with-parent`: when the runner answers or is killed the        |
// |              | namespace's init dies and takes every process with it (`setsid` included); one that      |
// |              | left its tree (setsid, orphaned) when the runner answered fails the run (`procs`); the   |
// |              | watchdog (tree's processes > maxProcs → `procs`) and RLIMIT_NPROC (prlimit; it binds     |
// |              | only a non-root uid, hence the drop to 65534)                                            |
// | memory       | V8 heap cap (`--max-old-space-size`), RLIMIT_DATA (prlimit) per process, and the         |
// |              | watchdog on the tree's summed RSS (→ `memory`)                                           |
// | time         | wall-clock timer in this process: SIGKILL to the tree (→ `timeout`)                      |
// | error text   | `detail` is cut to DETAIL_MAX_BYTES (2 KiB) of UTF-8                                     |
//
// It fails closed: without a working bwrap (Debian's `bubblewrap`), prlimit, or (as root) setpriv
// and a seccomp table for this CPU, `create` throws. `unsafeNoIsolation: true` (CLI `--unsafe-no-sandbox`) runs proposals as plain
// child processes instead, with this machine's network and files, and says so loudly.
// A proposal runs in the same process as the program that scores it, so *code* proposals could
// tamper with their own reported score; the built-in tasks' proposals are data (structured fields)
// run by the project's own programs.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, realpathSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { endianness } from 'node:os';
import { dirname, extname, join, relative, sep } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { PACKAGE_ROOT } from '../common/package-root.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = PACKAGE_ROOT;
/** The runner beside this module: sandbox-runner.ts from the sources, sandbox-runner.js from the build. */
const RUNNER = join(HERE, `sandbox-runner${extname(fileURLToPath(import.meta.url))}`);
/** The top folder of the package this code runs from when it is not the sources' (dist/ for the build), which runs must see. */
const CODE = relative(ROOT, dirname(HERE)).split(sep)[0] ?? '';
/** Bundles live inside node_modules so that their bare imports (onnxruntime-node, ...) resolve. */
const BUNDLES = join(ROOT, 'node_modules', '.cache', 'wmrl-sandbox');
/** A TypeScript file, which node runs only under tsx's loader. */
const TYPESCRIPT = /\.[cm]?tsx?$/;

/** tsx's loader by absolute URL: the sandbox's cwd is its private /tmp, where a bare `tsx` would not resolve. */
function tsxLoader(forWhat: string): string {
  try {
    return pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
  } catch (e) {
    throw new Error(`sandbox: ${forWhat} is TypeScript, which runs under tsx, and tsx is not installed (${(e as Error).message.split('\n')[0]}); install the dev dependencies or run the build in dist/`, { cause: e });
  }
}
/** The most an outcome's `detail` carries back (it may quote what the proposal printed or threw). */
export const DETAIL_MAX_BYTES = 2048;

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

/**
 * A run's result. `slotMs`: wall time it held its slot (spawn to exit). `cpuMs`: CPU time its process used as it
 * reported on answering (user + system, every thread); a run that never answered (killed, crashed) is charged its
 * slot time instead, since what it burned cannot be read back.
 */
export type SandboxOutcome =
  | { ok: true; value: unknown; slotMs: number; cpuMs: number; slot: number }
  | { ok: false; reason: FailReason; detail: string; slotMs: number; cpuMs: number; slot: number };

/** What the pool enforces (all true with bwrap; all false under `unsafeNoIsolation`). */
export interface Isolation {
  /** No network inside the sandbox (network namespace). */
  network: boolean;
  /** The run's processes live in their own PID namespace and all die with it. */
  pidNamespace: boolean;
  /** The run sees only a read-only view of the code it needs and a private /tmp (mount namespace). */
  filesystem: boolean;
  /** RLIMIT_NPROC and RLIMIT_DATA set with prlimit. */
  rlimits: boolean;
  /** The run cannot make user namespaces (seccomp filter, and bwrap --disable-userns when not root). */
  noUserNamespaces: boolean;
  /** The uid the run executes as when the service runs as root (dropped with setpriv); null otherwise. */
  droppedToUid: number | null;
  /** The launcher and its fixed arguments, for the record (each run adds its /tmp and limits). */
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
  /** The bubblewrap binary; default `bwrap` on PATH. */
  bwrap?: string;
  /**
   * Run proposals as plain child processes, with this machine's network, files and (without
   * setpriv) uid: only for machines without bubblewrap, never for untrusted proposals.
   */
  unsafeNoIsolation?: boolean;
}

export interface PoolStats {
  capacity: number;
  busy: number;
  queueLength: number;
  completed: number;
  failed: Record<FailReason, number>;
  /** Summed slot time of finished runs, ms. */
  slotMs: number;
  /** Summed CPU time of finished runs, ms (SandboxOutcome.cpuMs). */
  cpuMs: number;
}

const NOBODY = 65534;

/** How a spawned run is laid out: how many launcher processes sit above the runner in its tree. */
interface Launch {
  isolation: Isolation;
  /** bwrap's outer process and the namespace's init (2), or none (0: the spawned process is node). */
  depth: number;
  /** Builds one run's command line around `node`; bwrap reads `filter` from fd `filterFd`. */
  command(node: string[], limits: SandboxLimits, program: SandboxProgram, filterFd: number): string[];
  env: NodeJS.ProcessEnv;
  /** The seccomp program the command reads, or null (no bwrap, or an architecture without a table). */
  filter: Buffer | null;
}

const OPT_OUT = 'pass unsafeNoIsolation: true to SandboxPool.create (CLI: --unsafe-no-sandbox) to run proposals WITHOUT isolation, with this machine\'s network and files';

/** Runs `cmd` once (`input` on its stdin); the failure's text, or null when it exited 0. */
function failure(cmd: string[], input: Buffer | null = null): string | null {
  const r = spawnSync(cmd[0]!, cmd.slice(1), { stdio: [input ? 'pipe' : 'ignore', 'ignore', 'pipe'], input: input ?? undefined, timeout: 10_000 });
  if (r.error) return r.error.message;
  if (r.status === 0) return null;
  const err = r.stderr.toString('utf8').trim();
  return `${r.signal ? `signal ${r.signal}` : `exit code ${r.status}`}${err ? `: ${err.slice(0, 500)}` : ''}`;
}

function need(tool: string, pkg: string, why: string, err: string): Error {
  return new Error(`sandbox: ${tool} does not run (${err}); the sandbox needs it ${why}. Install Debian's ${pkg} (apt-get install ${pkg}), or ${OPT_OUT}`);
}

/** The repository entries a run may read: the project's code, never its data folders. */
function repoView(): string[] {
  const ts = JSON.parse(readFileSync(join(ROOT, 'tsconfig.json'), 'utf8')) as { include?: string[] };
  const folders = (ts.include ?? []).filter((e) => /^[\w.-]+$/.test(e) && !e.startsWith('.'));
  const code = CODE && !CODE.startsWith('.') && !folders.includes(CODE) ? [CODE] : [];
  return ['package.json', 'tsconfig.json', 'node_modules', ...folders, ...code].filter((e) => existsSync(join(ROOT, e)));
}

/** bwrap's arguments for /usr, the /lib and /bin links (or folders), the /etc files node reads, and the node binary. */
function systemView(): string[] {
  const args = ['--ro-bind', '/usr', '/usr'];
  for (const d of ['/bin', '/sbin', '/lib', '/lib32', '/lib64']) {
    if (!existsSync(d)) continue;
    const real = realpathSync(d);
    args.push(...(real !== d && real.startsWith('/usr/') ? ['--symlink', real.slice(1), d] : ['--ro-bind', d, d]));
  }
  // Created first with their modes: bwrap makes the parents of a bound file 0700, unreadable to nobody.
  args.push('--perms', '0755', '--dir', '/etc', '--perms', '0755', '--dir', '/etc/ssl');
  for (const f of ['/etc/ld.so.cache', '/etc/ld.so.conf', '/etc/passwd', '/etc/group', '/etc/nsswitch.conf', '/etc/localtime', '/etc/ssl/openssl.cnf']) {
    args.push('--ro-bind-try', f, f);
  }
  const node = realpathSync(process.execPath);
  if (!node.startsWith('/usr/')) args.push('--ro-bind', dirname(node), dirname(node));
  return args;
}

// The seccomp filter (classic BPF over struct seccomp_data: nr at 0, arch at 4, args[0] at 16).
const SECCOMP_ARCH: Partial<Record<NodeJS.Architecture, { audit: number; clone: number; unshare: number; clone3: number }>> = {
  x64: { audit: 0xc000003e, clone: 56, unshare: 272, clone3: 435 },
  arm64: { audit: 0xc00000b7, clone: 220, unshare: 97, clone3: 435 },
};
const CLONE_NEWUSER = 0x10000000;

/**
 * The filter bwrap loads before it runs the command: unshare and clone with CLONE_NEWUSER fail
 * with EPERM, clone3 with ENOSYS (its flags sit in memory a filter cannot read; libc then falls back
 * to clone), and a syscall of another ABI (i386 `int 0x80`, x32) kills the process, since its
 * numbers differ. Null where this architecture has no table.
 */
export function userNamespaceFilter(arch: NodeJS.Architecture = process.arch): Buffer | null {
  const a = SECCOMP_ARCH[arch];
  if (!a || endianness() !== 'LE') return null;
  const LD_ABS = 0x20, JEQ = 0x15, JGE = 0x35, JSET = 0x45, RET = 0x06;
  const ALLOW = 0x7fff0000, ERRNO = 0x00050000, KILL_PROCESS = 0x80000000, EPERM = 1, ENOSYS = 38;
  // [code, jt, jf, k]; a jump skips jt/jf instructions.
  const prog: [number, number, number, number][] = [
    [LD_ABS, 0, 0, 4], //             0: arch
    [JEQ, 0, 10, a.audit], //         1: another ABI → 12
    [LD_ABS, 0, 0, 0], //             2: syscall number
    [JGE, 8, 0, 0x40000000], //       3: x32 → 12
    [JEQ, 6, 0, a.clone3], //         4: → 11
    [JEQ, 1, 0, a.unshare], //        5: → 7
    [JEQ, 0, 2, a.clone], //          6: neither → 9
    [LD_ABS, 0, 0, 16], //            7: flags (args[0], low half)
    [JSET, 1, 0, CLONE_NEWUSER], //   8: → 10
    [RET, 0, 0, ALLOW], //            9
    [RET, 0, 0, ERRNO | EPERM], //    10
    [RET, 0, 0, ERRNO | ENOSYS], //   11
    [RET, 0, 0, KILL_PROCESS], //     12
  ];
  const b = Buffer.alloc(prog.length * 8);
  prog.forEach(([code, jt, jf, k], i) => {
    b.writeUInt16LE(code, i * 8);
    b.writeUInt8(jt, i * 8 + 2);
    b.writeUInt8(jf, i * 8 + 3);
    b.writeUInt32LE(k, i * 8 + 4);
  });
  return b;
}

/**
 * The launcher for this machine. Throws, naming the missing tool and the opt-out, when the
 * isolation cannot be set up (unless `unsafeNoIsolation`).
 */
function launcher(o: PoolOptions): Launch {
  const root = process.getuid?.() === 0;
  const dropArgs = ['setpriv', '--reuid', String(NOBODY), '--regid', String(NOBODY), '--clear-groups', '--inh-caps=-all', '--no-new-privs'];
  const rlimits = (limits: SandboxLimits, capacity: number, nonRoot: boolean) =>
    ['prlimit', `--nproc=${nonRoot ? 256 * capacity : 4096}`, `--data=${limits.memoryMb * 1024 * 1024}`, '--core=0', '--'];
  if (o.unsafeNoIsolation) {
    const drop = root && failure([...dropArgs, 'true']) === null;
    const rl = failure(['prlimit', '--nproc=1024', 'true']) === null;
    const prefix = drop ? dropArgs : [];
    console.error(
      `WARNING: sandbox isolation is OFF (unsafeNoIsolation): proposals run with this machine's network and files` +
        `${root && !drop ? ' and AS ROOT' : ''}, and processes they detach outlive them. Never run untrusted proposals like this.`,
    );
    return {
      isolation: { network: false, pidNamespace: false, filesystem: false, rlimits: rl, noUserNamespaces: false, droppedToUid: drop ? NOBODY : null, prefix },
      depth: 0,
      filter: null,
      command: (node, limits) => [...prefix, ...(rl ? rlimits(limits, o.slots, drop || !root) : []), ...node],
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/tmp', TMPDIR: '/tmp', LANG: 'C.UTF-8' },
    };
  }
  const bwrap = o.bwrap ?? 'bwrap';
  const missing = failure([bwrap, '--version']);
  if (missing !== null) throw need(`bubblewrap (${bwrap})`, 'bubblewrap', 'for the network, PID and mount namespaces', missing);
  const noPrlimit = failure(['prlimit', '--version']);
  if (noPrlimit !== null) throw need('prlimit', 'util-linux', 'for the process and memory limits', noPrlimit);
  if (root) {
    const noSetpriv = failure(['setpriv', '--version']);
    if (noSetpriv !== null) throw need('setpriv', 'util-linux', 'to run proposals as nobody rather than root', noSetpriv);
  }
  // Without it, as root, nobody could make a user namespace and be root (mount, ...) inside it.
  const filter = userNamespaceFilter();
  if (root && !filter) throw new Error(`sandbox: no seccomp filter for ${process.arch} (${endianness()}), which stops proposals run from root from making user namespaces; ${OPT_OUT}`);
  // As root bwrap makes the namespaces itself and keeps only what setpriv needs to drop to nobody
  // (a user namespace would map nobody to uid 0 outside); otherwise a user namespace is required.
  const namespaces = root
    ? ['--unshare-net', '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try', '--cap-add', 'CAP_SETUID', '--cap-add', 'CAP_SETGID']
    : ['--unshare-user', '--unshare-net', '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try', '--disable-userns'];
  const view = repoView();
  const repo = ['--tmpfs', ROOT, ...view.flatMap((e) => ['--ro-bind', join(ROOT, e), join(ROOT, e)]), '--remount-ro', ROOT];
  const prefix = [bwrap, ...namespaces, '--die-with-parent', '--new-session', ...systemView(), '--dev', '/dev', '--proc', '/proc'];
  const inner = root ? dropArgs : [];
  const command = (node: string[], limits: SandboxLimits, program: SandboxProgram, filterFd: number) => {
    const extra = program.kind === 'module' ? moduleView(program.path, view) : [];
    const tmpBytes = Math.max(16, Math.floor(limits.memoryMb / 4)) * 1024 * 1024;
    // /tmp first: a repository below /tmp is bound on top of it.
    return [...prefix, '--size', String(tmpBytes), '--perms', '1777', '--tmpfs', '/tmp', ...repo, ...extra, '--chdir', '/tmp', ...(filter ? ['--seccomp', String(filterFd)] : []), '--', ...inner, ...rlimits(limits, o.slots, true), ...node];
  };
  const probe = failure(command([process.execPath, '--version'], DEFAULT_LIMITS, { kind: 'source', code: '' }, 0), filter);
  if (probe !== null) throw need(`bubblewrap (${bwrap})`, 'bubblewrap', 'for the network, PID and mount namespaces, and could not set up the sandbox', probe);
  return {
    isolation: { network: true, pidNamespace: true, filesystem: true, rlimits: true, noUserNamespaces: true, droppedToUid: root ? NOBODY : null, prefix },
    depth: 2,
    command,
    filter,
    env: { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: '/tmp', TMPDIR: '/tmp', LANG: 'C.UTF-8' },
  };
}

/**
 * bwrap's arguments that show a module program: none inside the repository's view (bundles live in
 * node_modules); its own folder, read-only, outside the repository. Throws for the rest of the
 * repository (data/, runs/, ...), which the sandbox never shows.
 */
function moduleView(path: string, view: string[]): string[] {
  const rel = relative(ROOT, path);
  if (rel.startsWith('..') || rel.startsWith(sep)) return ['--ro-bind', dirname(path), dirname(path)];
  const top = rel.split(sep)[0]!;
  if (view.includes(top)) return [];
  throw new Error(`sandbox: program ${path} is in ${top}/, which the sandbox does not show (of the repository only ${view.join(', ')})`);
}

interface Proc {
  pid: number;
  /** Generations below the spawned process (0: itself). */
  depth: number;
  state: string;
  session: number;
  startTicks: number;
  rssKb: number;
}

/** The processes of the tree under `pid` (itself included); ones that exit while it is read are left out. */
function tree(pid: number): Proc[] {
  const out: Proc[] = [];
  const stack: [number, number][] = [[pid, 0]];
  const seen = new Set<number>();
  while (stack.length) {
    const [p, depth] = stack.pop()!;
    if (seen.has(p)) continue;
    seen.add(p);
    let stat: string, status: string;
    try {
      stat = readFileSync(`/proc/${p}/stat`, 'utf8');
      status = readFileSync(`/proc/${p}/status`, 'utf8');
    } catch {
      continue; // exited between listing and reading: nothing to count
    }
    // After the command name (which may hold spaces and parentheses): state ppid pgrp session ... starttime (22nd field).
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const rss = /VmRSS:\s+(\d+)/.exec(status);
    out.push({ pid: p, depth, state: f[0]!, session: Number(f[3]), startTicks: Number(f[19]), rssKb: rss ? Number(rss[1]) : 0 });
    let tasks: string[];
    try {
      tasks = readdirSync(`/proc/${p}/task`);
    } catch {
      continue;
    }
    for (const t of tasks) {
      try {
        for (const c of readFileSync(`/proc/${p}/task/${t}/children`, 'utf8').split(' ')) if (c.trim()) stack.push([Number(c), depth + 1]);
      } catch {
        // the thread ended while we walked
      }
    }
  }
  return out;
}

/**
 * Processes that left the runner's tree or session (setsid, or orphaned to the namespace's init):
 * `procs` are the run's processes, `depth` the runner's generation.
 */
function detached(procs: Proc[], depth: number): Proc[] {
  const live = procs.filter((p) => p.depth >= depth && p.state !== 'Z');
  const top = live.filter((p) => p.depth === depth);
  if (!top.length) return [];
  const runner = top.reduce((a, b) => (b.startTicks < a.startTicks ? b : a));
  return live.filter((p) => p !== runner && (p.depth === depth || p.session !== runner.session));
}

/** `s` cut to at most DETAIL_MAX_BYTES of UTF-8, saying how much was cut. */
export function boundDetail(s: string): string {
  const bytes = Buffer.from(s, 'utf8');
  if (bytes.length <= DETAIL_MAX_BYTES) return s;
  const note = ` … (${bytes.length} bytes, cut to ${DETAIL_MAX_BYTES})`;
  // Decoding a cut buffer may end in U+FFFD (3 bytes) where a character was split: leave room, then trim it.
  const head = bytes.subarray(0, DETAIL_MAX_BYTES - Buffer.byteLength(note) - 3).toString('utf8').replace(/\uFFFD$/, '');
  return head + note;
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

  readonly isolation: Isolation;

  private constructor(private readonly launch: Launch, readonly capacity: number, limits: SandboxLimits, private readonly pollMs: number) {
    this.isolation = launch.isolation;
    this.free = Array.from({ length: capacity }, (_, i) => capacity - 1 - i);
    this.limits = limits;
    this.stats_ = { capacity, busy: 0, queueLength: 0, completed: 0, failed: { timeout: 0, memory: 0, procs: 0, crash: 0, error: 0, cancelled: 0 }, slotMs: 0, cpuMs: 0 };
  }

  /** Throws when this machine cannot isolate proposals (bwrap, prlimit or setpriv missing), unless `unsafeNoIsolation`. */
  static create(o: PoolOptions): SandboxPool {
    if (!(Number.isInteger(o.slots) && o.slots >= 1)) throw new Error(`sandbox slots ${o.slots} must be a positive integer`);
    const limits = { ...DEFAULT_LIMITS, ...o.limits };
    checkLimits(limits);
    return new SandboxPool(launcher(o), o.slots, limits, o.pollMs ?? 50);
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
    for (const p of this.queue.splice(0)) p.resolve({ ok: false, reason: 'cancelled', detail: 'pool closed', slotMs: 0, cpuMs: 0, slot: -1 });
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
        p.resolve({ ok: false, reason: 'cancelled', detail: 'aborted before it started', slotMs: 0, cpuMs: 0, slot: -1 });
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
          this.stats_.cpuMs += o.cpuMs;
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

  /**
   * Source programs and bundled modules start in plain node with the bundled runner; other modules with
   * the runner beside this module, under tsx where the runner or the module is TypeScript.
   */
  private async execute(p: Pending, slot: number): Promise<SandboxOutcome> {
    const started = performance.now();
    const prog = p.job.program;
    if (prog.kind === 'module' && !prog.bundle) {
      const ts = [RUNNER, prog.path].find((f) => TYPESCRIPT.test(f));
      return this.spawnRun(p, slot, [...(ts ? ['--import', tsxLoader(ts)] : []), RUNNER], prog, started);
    }
    const runner = await this.bundle(RUNNER);
    const program = prog.kind === 'module' ? { ...prog, path: await this.bundle(prog.path) } : prog;
    return this.spawnRun(p, slot, [runner], program, started);
  }

  private spawnRun(p: Pending, slot: number, runner: string[], program: SandboxProgram, started: number): Promise<SandboxOutcome> {
    const limits = p.job.limits as SandboxLimits;
    const { depth } = this.launch;
    const node = [process.execPath, `--max-old-space-size=${Math.max(16, Math.floor(limits.memoryMb * 0.75))}`, ...runner];
    const { filter } = this.launch;
    const cmd = this.launch.command(node, limits, program, 4);
    const child = spawn(cmd[0]!, cmd.slice(1), { cwd: '/tmp', detached: true, stdio: ['pipe', 'pipe', 'pipe', 'pipe', filter ? 'pipe' : 'ignore'], env: this.launch.env });
    this.running.add(child);
    let killedFor: { reason: FailReason; detail: string } | null = null;
    const kill = (reason: FailReason, detail: string) => {
      killedFor ??= { reason, detail };
      killTree(child);
    };
    const stderrTail: string[] = [];
    let resultText = '';
    let answered = false;
    // Decoded across chunks: a character split between two reads stays whole.
    (child.stderr as Readable).setEncoding('utf8');
    (child.stderr as Readable).on('data', (d: string) => {
      stderrTail.push(d);
      if (stderrTail.length > 20) stderrTail.shift();
    });
    (child.stdout as Readable).resume();
    const stdin = child.stdin as Writable;
    stdin.on('error', () => {}); // a child that died before reading its job: its exit is the outcome
    stdin.end(JSON.stringify({ program, input: p.job.input }));
    if (filter) {
      const f = child.stdio[4] as Writable;
      f.on('error', () => {}); // bwrap died before reading it: its exit is the outcome
      f.end(filter);
    }

    const timer = setTimeout(() => kill('timeout', `no result within ${limits.timeoutMs} ms`), limits.timeoutMs);
    const watchdog = setInterval(() => {
      if (child.pid === undefined) return;
      const t = tree(child.pid).filter((q) => q.depth >= depth);
      const rssKb = t.reduce((a, q) => a + q.rssKb, 0);
      if (t.length > limits.maxProcs) kill('procs', `${t.length} processes exceed the limit of ${limits.maxProcs}`);
      else if (rssKb > limits.memoryMb * 1024) kill('memory', `resident memory ${(rssKb / 1024).toFixed(0)} MB exceeds the limit of ${limits.memoryMb} MB`);
    }, this.pollMs);
    const onAbort = () => kill('cancelled', 'aborted by the caller');
    p.signal?.addEventListener('abort', onAbort, { once: true });

    // The runner answers, then waits to be killed: what else is running at that moment is still
    // there to see, and a process that left its tree is a fault of the proposal.
    (child.stdio[3] as Readable).on('data', (d: Buffer) => {
      if (resultText.length < 16 * 1024 * 1024) resultText += d.toString('utf8');
      if (answered || !d.includes(10) || child.pid === undefined) return;
      answered = true;
      clearTimeout(timer);
      clearInterval(watchdog);
      const gone = detached(tree(child.pid), depth);
      if (gone.length) kill('procs', `${gone.length} process(es) left the run's process tree (setsid or orphaned) and were still running when it answered`);
      else killTree(child);
    });

    return new Promise<SandboxOutcome>((resolve, reject) => {
      let done = false;
      let grace: NodeJS.Timeout | undefined;
      const finish = (code: number | null, sig: NodeJS.Signals | null, spawnError?: Error) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        clearInterval(watchdog);
        clearTimeout(grace);
        p.signal?.removeEventListener('abort', onAbort);
        // Whatever the program left running (it answered, or died) goes with it.
        killTree(child);
        this.running.delete(child);
        const slotMs = performance.now() - started;
        let base = { slotMs, cpuMs: slotMs, slot };
        const fail = (reason: FailReason, detail: string) => resolve({ ok: false, reason, detail: boundDetail(detail), ...base });
        if (killedFor) return fail(killedFor.reason, killedFor.detail);
        if (spawnError) return reject(new Error(`sandbox: could not start ${cmd[0]}: ${spawnError.message}`, { cause: spawnError }));
        const line = resultText.split('\n').find((l) => l.trim());
        if (line) {
          let msg: { ok?: unknown; value?: unknown; error?: unknown; cpuMs?: unknown };
          try {
            msg = JSON.parse(line) as typeof msg;
          } catch {
            return fail('crash', `unreadable result: ${line.slice(0, 200)}`);
          }
          if (typeof msg.cpuMs === 'number' && Number.isFinite(msg.cpuMs) && msg.cpuMs >= 0) base = { ...base, cpuMs: msg.cpuMs };
          if (msg.ok === true) return resolve({ ok: true, value: msg.value, ...base });
          const detail = String(msg.error);
          return fail(MEMORY_TEXT.test(detail) ? 'memory' : 'error', detail);
        }
        const err = stderrTail.join('').slice(-2000).replace(/^[\uDC00-\uDFFF]/, ''); // no half of a surrogate pair
        const how = sig ? `signal ${sig}` : `exit code ${code}`;
        return fail(MEMORY_TEXT.test(err) ? 'memory' : 'crash', `died without a result (${how}): ${err.trim().split('\n').slice(-3).join(' | ')}`);
      };
      child.once('error', (e) => finish(null, null, e));
      // 'close' waits for the result pipe to drain; it fires once the tree is gone.
      child.once('close', (code, sig) => finish(code, sig));
      child.once('exit', (code, sig) => {
        killTree(child);
        // Without a PID namespace a detached process can hold the pipes open for ever: it must not hold the slot.
        grace = setTimeout(() => {
          for (const s of child.stdio) s?.destroy();
          finish(code, sig);
        }, 1000).unref();
      });
    });
  }
}

/**
 * SIGKILL to the spawned process's group and to every process of its tree: the namespace's init
 * (its own session) dies with bwrap through --die-with-parent anyway, and its death ends the rest.
 */
function killTree(c: ChildProcess): void {
  if (c.pid === undefined) return;
  // Once reaped its pid may name another process; its group id cannot be reused while the group lives.
  const procs = c.exitCode === null && c.signalCode === null ? tree(c.pid) : [];
  try {
    process.kill(-c.pid, 'SIGKILL');
  } catch {
    // the group is already gone
  }
  for (const p of procs) {
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      // exited meanwhile
    }
  }
}

function checkLimits(l: SandboxLimits): void {
  if (!(l.timeoutMs > 0)) throw new Error(`sandbox timeoutMs ${l.timeoutMs} must be > 0`);
  if (!(l.memoryMb >= 64)) throw new Error(`sandbox memoryMb ${l.memoryMb} must be ≥ 64`);
  if (!(Number.isInteger(l.maxProcs) && l.maxProcs >= 1)) throw new Error(`sandbox maxProcs ${l.maxProcs} must be a positive integer`);
}
