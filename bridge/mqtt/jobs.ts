// Rollout jobs over MQTT: the service publishes jobs on wmrl/jobs/rollout; worker processes
// share them through `$share/{group}/wmrl/jobs/rollout` (each job to one worker) and answer
// on wmrl/jobs/results.
//
// The broker's PUBACK only says the worker's client received the job, not that the rollout ran,
// so the dispatcher re-publishes a job whose result has not arrived in time and takes the first
// result per job id. A job is therefore executed at least once and *counted* exactly once.

import { EventEmitter } from 'node:events';
import type { MqttClient } from 'mqtt';
import { onMessages, publish, subscribe } from './client.js';
import { isRolloutJob, isRolloutResult, type RolloutJobMsg, type RolloutResultMsg } from './messages.js';
import { JOBS_TOPIC, RESULTS_TOPIC, sharedJobsFilter } from './topics.js';

export type RolloutJob = Omit<RolloutJobMsg, 'type'>;
export type RolloutResult = Omit<RolloutResultMsg, 'type'>;

// ---------------------------------------------------------------- worker

export interface WorkerOptions {
  group: string;
  workerId: string;
  /** Runs one rollout. A throw becomes a result with ok=false (an unscored rollout, excluded). */
  run(job: RolloutJob): Promise<{ score?: number; steps: number }>;
  /** A result could not be published (the dispatcher will re-publish the job). */
  onError: (err: Error) => void;
}

export interface RolloutWorker {
  handled: number;
  /** 'invalid' (string): a malformed payload on the jobs topic. */
  events: EventEmitter;
  stop(): Promise<void>;
}

/** Jobs run one at a time per worker, in arrival order: a worker is one environment. */
export async function serveRolloutJobs(client: MqttClient, opts: WorkerOptions): Promise<RolloutWorker> {
  const events = new EventEmitter();
  let chain: Promise<void> = Promise.resolve();
  const w: RolloutWorker = {
    handled: 0,
    events,
    async stop() {
      stopRouting();
      await chain;
    },
  };
  const runOne = async (job: RolloutJob) => {
    let result: RolloutResultMsg;
    try {
      const r = await opts.run(job);
      result = { type: 'rollout_result', jobId: job.jobId, workerId: opts.workerId, ok: true, steps: r.steps };
      if (r.score !== undefined) result.score = r.score;
    } catch (e) {
      result = { type: 'rollout_result', jobId: job.jobId, workerId: opts.workerId, ok: false, steps: 0, error: (e as Error).message ?? String(e) };
    }
    w.handled++;
    await publish(client, RESULTS_TOPIC, result, { qos: 1 });
  };
  const stopRouting = onMessages(client, (t) => t === JOBS_TOPIC, (_t, r) => {
    if (!r.ok) return void events.emit('invalid', r.error);
    if (!isRolloutJob(r.msg)) return;
    const { type: _type, ...job } = r.msg;
    chain = chain.then(() => runOne(job)).catch(opts.onError);
  });
  await subscribe(client, sharedJobsFilter(opts.group), 1);
  return w;
}

// ---------------------------------------------------------------- dispatcher (service side)

export interface DispatcherOptions {
  /** Re-publish a job whose result has not arrived after this long (default 30 s). */
  resultTimeoutMs?: number;
  /** Give up (reject) after this many publications (default 3). */
  maxAttempts?: number;
  /** A job publish failed; it is retried at the next timeout. */
  onError: (err: Error) => void;
}

interface Waiting {
  job: RolloutJob;
  attempts: number;
  timer: NodeJS.Timeout;
  resolve: (r: RolloutResult) => void;
  reject: (e: Error) => void;
}

export class JobDispatcher {
  /** Results that arrived for a job already answered (re-published jobs finishing twice). */
  duplicateResults = 0;
  readonly events = new EventEmitter();
  private readonly waiting = new Map<string, Waiting>();
  private readonly done = new Set<string>();
  private readonly stopRouting: () => void;
  private readonly timeoutMs: number;
  private readonly maxAttempts: number;
  private readonly onError: (err: Error) => void;

  private constructor(
    private readonly client: MqttClient,
    opts: DispatcherOptions,
  ) {
    this.timeoutMs = opts.resultTimeoutMs ?? 30_000;
    this.maxAttempts = opts.maxAttempts ?? 3;
    this.onError = opts.onError;
    this.stopRouting = onMessages(client, (t) => t === RESULTS_TOPIC, (_t, r) => {
      if (!r.ok) return void this.events.emit('invalid', r.error);
      if (isRolloutResult(r.msg)) this.onResult(r.msg);
    });
  }

  static async create(client: MqttClient, opts: DispatcherOptions): Promise<JobDispatcher> {
    const d = new JobDispatcher(client, opts);
    await subscribe(client, RESULTS_TOPIC, 1);
    return d;
  }

  /** Publishes the job and resolves with its first result. Job ids must be unique. */
  submit(job: RolloutJob): Promise<RolloutResult> {
    if (this.waiting.has(job.jobId) || this.done.has(job.jobId)) return Promise.reject(new Error(`job id ${job.jobId} already submitted`));
    return new Promise((resolve, reject) => {
      const w: Waiting = { job, attempts: 0, timer: undefined as unknown as NodeJS.Timeout, resolve, reject };
      this.waiting.set(job.jobId, w);
      this.attempt(w);
    });
  }

  close(): void {
    this.stopRouting();
    for (const w of this.waiting.values()) {
      clearTimeout(w.timer);
      w.reject(new Error(`dispatcher closed before job ${w.job.jobId} finished`));
    }
    this.waiting.clear();
  }

  private attempt(w: Waiting): void {
    if (w.attempts >= this.maxAttempts) {
      this.waiting.delete(w.job.jobId);
      w.reject(new Error(`job ${w.job.jobId}: no result after ${w.attempts} attempts of ${this.timeoutMs} ms`));
      return;
    }
    w.attempts++;
    w.timer = setTimeout(() => this.attempt(w), this.timeoutMs);
    publish(this.client, JOBS_TOPIC, { type: 'rollout_job', ...w.job }, { qos: 1 }).catch(this.onError);
  }

  private onResult(r: RolloutResultMsg): void {
    const w = this.waiting.get(r.jobId);
    if (!w) {
      if (this.done.has(r.jobId)) this.duplicateResults++;
      return;
    }
    clearTimeout(w.timer);
    this.waiting.delete(r.jobId);
    this.done.add(r.jobId);
    // Remember recent ids only: late duplicates of old jobs are rare and merely uncounted.
    if (this.done.size > 100_000) this.done.delete(this.done.values().next().value as string);
    const { type: _type, ...result } = r;
    w.resolve(result);
  }
}
