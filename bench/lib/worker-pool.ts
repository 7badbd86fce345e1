// A pool of child processes that run a benchmark's jobs, as many at once as it has slots (one per core): the parent
// queues jobs with a priority and an affinity (what a job loads, a task's setup), each idle slot takes the queued job
// of lowest priority among those of its last job's affinity, else among all, and a slot's process stays up between
// jobs, so what it loaded for one serves the next. `serveJobs` is the child's side.
import { fork, type ChildProcess } from 'node:child_process';

/** What a child sends about the job under way: progress, its result, or its error. */
export type WorkerMessage<R> = { id: number; kind: 'progress'; label: string } | { id: number; kind: 'done'; result: R } | { id: number; kind: 'error'; error: string };

interface Pending<J, R> {
  id: number;
  job: J;
  priority: readonly number[];
  affinity: string;
  resolve: (r: R) => void;
  reject: (e: Error) => void;
}

interface Slot<J, R> {
  child: ChildProcess | null;
  job: Pending<J, R> | null;
  /** The affinity of the slot's last job (what its process has loaded). */
  affinity: string | null;
}

/** Lexicographic order of two priorities (a shorter one that is a prefix comes first). */
const before = (a: readonly number[], b: readonly number[]) => {
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return a[i]! < b[i]!;
  return a.length < b.length;
};

export class WorkerPool<J, R> {
  private readonly slots: Array<Slot<J, R>>;
  private readonly queue: Array<Pending<J, R>> = [];
  private nextId = 0;
  private scheduled = false;
  private closed = false;

  /**
   * `script`: the child's module (run with tsx, its messages in 'advanced' serialization, so NaN and typed arrays
   * survive); `progress(slot, label)`: a child's progress on its job.
   */
  constructor(private readonly script: string, size: number, private readonly progress: (slot: number, label: string) => void = () => {}) {
    if (!(Number.isInteger(size) && size >= 1)) throw new Error(`worker pool: size must be a positive integer, got ${size}`);
    this.slots = Array.from({ length: size }, () => ({ child: null, job: null, affinity: null }));
  }

  /** Runs `job` in a child once a slot takes it (see the pool's order); its result, or its error. */
  run(job: J, priority: readonly number[] = [], affinity = ''): Promise<R> {
    if (this.closed) return Promise.reject(new Error('worker pool: closed'));
    return new Promise<R>((resolve, reject) => {
      this.queue.push({ id: this.nextId++, job, priority, affinity, resolve, reject });
      this.schedule();
    });
  }

  /** Stops every child (a job under way is rejected) and refuses further jobs. */
  close(): void {
    this.closed = true;
    for (const p of this.queue.splice(0)) p.reject(new Error('worker pool: closed before the job started'));
    for (const slot of this.slots) {
      const child = slot.child, job = slot.job;
      slot.child = null;
      slot.job = null;
      job?.reject(new Error('worker pool: closed during the job'));
      if (child && child.exitCode === null && child.signalCode === null) child.kill();
    }
  }

  // Deferred past the microtasks that follow a job's result, so a job queued in reply to it competes for the slot it frees.
  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.dispatch();
    });
  }

  private dispatch(): void {
    for (const [i, slot] of this.slots.entries()) {
      if (slot.job || this.queue.length === 0 || this.closed) continue;
      const own = this.queue.some((p) => p.affinity === slot.affinity);
      let best = -1;
      this.queue.forEach((p, k) => {
        if ((!own || p.affinity === slot.affinity) && (best < 0 || before(p.priority, this.queue[best]!.priority))) best = k;
      });
      const next = this.queue.splice(best, 1)[0]!;
      slot.job = next;
      slot.affinity = next.affinity;
      const child = slot.child ?? this.spawn(i);
      child.send({ id: next.id, job: next.job }, (e) => {
        if (e) this.finish(i, next.id, (p) => p.reject(new Error(`worker pool: the job could not be sent to the child process: ${e.message}`)));
      });
    }
  }

  private spawn(i: number): ChildProcess {
    const child = fork(this.script, [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'], serialization: 'advanced' });
    this.slots[i]!.child = child;
    child.on('message', (m: WorkerMessage<R>) => {
      if (m.kind === 'progress') {
        if (this.slots[i]!.job?.id === m.id) this.progress(i, m.label);
      } else if (m.kind === 'done') this.finish(i, m.id, (p) => p.resolve(m.result));
      else this.finish(i, m.id, (p) => p.reject(new Error(m.error)));
    });
    child.on('exit', (code, signal) => {
      if (this.slots[i]!.child === child) this.slots[i]!.child = null;
      const p = this.slots[i]!.job;
      if (p && !this.closed) this.finish(i, p.id, (x) => x.reject(new Error(`worker pool: the child process exited (${signal ?? `code ${code}`}) during its job`)));
    });
    return child;
  }

  private finish(i: number, id: number, settle: (p: Pending<J, R>) => void): void {
    const slot = this.slots[i]!;
    if (!slot.job || slot.job.id !== id) return;
    const p = slot.job;
    slot.job = null;
    settle(p);
    this.schedule();
  }
}

/**
 * The child's side: runs each job the parent sends with `handle`, one at a time in the order sent, and answers with its
 * result or its error (the child stays up for the next); it exits when the parent goes.
 */
export function serveJobs<J, R>(handle: (job: J, progress: (label: string) => void) => Promise<R>): void {
  if (!process.send) throw new Error('serveJobs: this module runs as a worker pool\'s child process (an IPC channel), not alone');
  const send = (m: WorkerMessage<R>) => new Promise<void>((resolve, reject) => process.send!(m, undefined, {}, (e) => (e ? reject(e) : resolve())));
  let chain = Promise.resolve();
  process.on('message', ({ id, job }: { id: number; job: J }) => {
    chain = chain.then(async () => {
      try {
        const result = await handle(job, (label) => void send({ id, kind: 'progress', label }));
        await send({ id, kind: 'done', result });
      } catch (e) {
        await send({ id, kind: 'error', error: e instanceof Error ? (e.stack ?? e.message) : String(e) });
      }
    });
  });
  process.on('disconnect', () => process.exit());
}
