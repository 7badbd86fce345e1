// The reward service behind the reward API (reward-api.ts): external RL trainers (OpenRLHF, verl)
// send batches of (prompt, response) items; the responses are proposals of a research task. Items
// are grouped into GRPO groups by prompt, scored by the outcome world model, and the wmrl/
// Corrector picks anchor groups that are executed for real in the sandbox pool; their results
// calibrate the world model (Online Debiasing) and train it. Each request has a deadline: an item
// whose real execution is still running then is answered from the calibrated world model and
// marked `pending`; its result joins the calibration when it arrives.
import type { Score } from '../wmrl/advantages.js';
import { Corrector, correctorConfig, type CorrectorOverrides, type StepLog } from '../wmrl/corrector.js';
import type { TrustedScorer } from '../wmrl/trusted.js';
import type { ResearchRollout } from './agent.js';
import { DEFAULT_OUTCOME_CONFIG, EnsembleOutcomeModel, hashedNgrams, structuredDim, structuredFeatures, type OutcomeModelConfig } from './outcome-model.js';
import { OutcomeScorer } from './scorers.js';
import type { Executor, Isolation } from './sandbox.js';
import { checkProposal, execute, type Executed, type Proposal, type ResearchTask } from './task.js';

/** Where an item's score came from. */
export type ItemSource = 'real' | 'wm' | 'pending' | 'excluded' | 'invalid';

export interface GradedItem {
  /** Null when the item is excluded (its real execution timed out or crashed). */
  score: number | null;
  source: ItemSource;
  /** The calibrated world-model score (null for invalid proposals). */
  worldModel: number | null;
  /** Why the item is excluded or invalid. */
  reason: string | null;
}

export interface GradeStats {
  groups: number;
  anchorGroups: number;
  realItems: number;
  pendingItems: number;
  excludedItems: number;
  invalidItems: number;
  calibrated: boolean;
  biasReduction: number | null;
  anchorWeight: number;
  disagreement: number | null;
  realizedAnchorFraction: number;
  realExecutions: number;
  /** Real executions still running (this request's and earlier ones'). */
  inFlight: number;
}

export interface RewardServiceOptions {
  task: ResearchTask;
  executor: Executor;
  /** The correction core's knobs; anchors.maxInFlight defaults to the executor's capacity. */
  corrector?: CorrectorOverrides;
  /** Per request: an item whose real execution is not back by then is answered from the calibrated world model. */
  deadlineMs: number;
  /** Reward of a response that is not a valid proposal (the trainer's format penalty). */
  invalidReward: number;
  /** Training seed every real execution uses. */
  seed?: number;
  outcome?: Partial<OutcomeModelConfig>;
  /** Width of the hashed n-gram features of free-text proposals (tasks without fields). */
  textDim?: number;
  /** Failures of the background learning (world-model fitting): never only swallowed. */
  onError: (e: Error) => void;
  /** Requests being graded at once; past it a request is refused with RewardQueueFull (default 256). */
  maxPendingRequests?: number;
  /** Items being graded at once, over all requests; a request that would pass it is refused (default 65536). */
  maxPendingItems?: number;
}

export const REWARD_QUEUE_DEFAULTS = { maxPendingRequests: 256, maxPendingItems: 65536 } as const;

/** The service already grades as much as it is allowed to: the caller should retry later (HTTP 503 + Retry-After). */
export class RewardQueueFull extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RewardQueueFull';
  }
}

interface Item {
  prompt: string;
  rollout: ResearchRollout | null;
  reason: string | null;
}

/** The first balanced {...} in `text`, parsed; null when there is none or it is not JSON. */
function firstJsonObject(text: string): unknown {
  const start = text.indexOf('{');
  if (start < 0) return null;
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const c = text[i]!;
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{') depth++;
    else if (c === '}' && --depth === 0) {
      try {
        return JSON.parse(text.slice(start, i + 1));
      } catch {
        return null;
      }
    }
  }
  return null;
}

export class RewardService {
  readonly task: ResearchTask;
  private readonly executor: Executor;
  private readonly model: EnsembleOutcomeModel;
  private readonly corrector: Corrector<ResearchRollout>;
  private readonly features: (r: ResearchRollout) => Float32Array;
  /** Real results by rollout (set when the execution finishes). */
  private readonly real = new WeakMap<ResearchRollout, Executed>();
  private readonly launched = new WeakSet<ResearchRollout>();
  /** Background world-model learning, one fit at a time. */
  private learning: Promise<void> = Promise.resolve();
  private pendingData: Array<{ x: Float32Array; y: number }> = [];
  private lastLog: StepLog | null = null;
  private closed = false;
  private pendingRequests = 0;
  private pendingItems = 0;
  private readonly maxPendingRequests: number;
  private readonly maxPendingItems: number;

  constructor(readonly opts: RewardServiceOptions) {
    this.task = opts.task;
    this.executor = opts.executor;
    if (!(opts.deadlineMs > 0)) throw new Error(`reward service deadlineMs ${opts.deadlineMs} must be > 0`);
    this.maxPendingRequests = opts.maxPendingRequests ?? REWARD_QUEUE_DEFAULTS.maxPendingRequests;
    this.maxPendingItems = opts.maxPendingItems ?? REWARD_QUEUE_DEFAULTS.maxPendingItems;
    if (!(Number.isInteger(this.maxPendingRequests) && this.maxPendingRequests >= 1)) throw new Error(`reward service maxPendingRequests ${this.maxPendingRequests} must be an integer >= 1`);
    if (!(Number.isInteger(this.maxPendingItems) && this.maxPendingItems >= 1)) throw new Error(`reward service maxPendingItems ${this.maxPendingItems} must be an integer >= 1`);
    const text = opts.task.fields.length === 0;
    const dim = text ? (opts.textDim ?? 256) : structuredDim(opts.task.fields);
    this.features = text
      ? (r) => hashedNgrams(String(r.proposal.text), dim)
      : (r) => structuredFeatures(opts.task.fields, r.proposal);
    this.model = new EnsembleOutcomeModel(dim, { ...DEFAULT_OUTCOME_CONFIG, stepsPerFit: 50, ...opts.outcome });
    const trusted: TrustedScorer<ResearchRollout> = {
      score: async (rollouts) => {
        for (const r of rollouts) this.launched.add(r);
        const results = await Promise.all(rollouts.map((r) => execute(this.executor, this.task, r.proposal, r.seed)));
        results.forEach((res, i) => {
          this.real.set(rollouts[i]!, res);
          if (res.score !== null) this.pendingData.push({ x: this.features(rollouts[i]!), y: res.score });
        });
        this.learn();
        return results.map((r) => r.score);
      },
    };
    const over = opts.corrector ?? {};
    this.corrector = new Corrector<ResearchRollout>(
      correctorConfig({
        ...over,
        anchors: { maxInFlight: opts.executor.capacity, ...over.anchors },
        // The request's own anchors are waited for until shortly before its deadline.
        anchorWaitMs: Math.max(0, opts.deadlineMs - Math.min(500, opts.deadlineMs / 4)),
        // A burst of crashing proposals is the policy's doing, not a broken sandbox: never stop serving.
        maxFailedAnchors: Number.MAX_SAFE_INTEGER,
      }),
      new OutcomeScorer(this.model, this.features),
      trusted,
      // Proposals' faults are null scores; an exception is a broken sandbox, and every later request fails with it.
      { contextOf: (g) => g[0]!.context },
    );
  }

  /** Parses one response into a proposal: a JSON object of the task's fields, or the text itself for a text task. */
  parse(prompt: string, response: string): Item {
    if (this.task.fields.length === 0) return { prompt, rollout: { context: prompt, proposal: { text: response }, choice: [], seed: this.opts.seed ?? 0 }, reason: null };
    const obj = firstJsonObject(response);
    if (!obj || typeof obj !== 'object' || Array.isArray(obj)) return { prompt, rollout: null, reason: 'the response holds no JSON object of the proposal fields' };
    const proposal = obj as Proposal;
    try {
      checkProposal(this.task, proposal);
    } catch (e) {
      return { prompt, rollout: null, reason: (e as Error).message };
    }
    const choice = this.task.fields.map((f) => f.choices.indexOf(proposal[f.name]!));
    return { prompt, rollout: { context: prompt, proposal, choice, seed: this.opts.seed ?? 0 }, reason: null };
  }

  /**
   * Grades items (prompt, response): grouped by prompt, one Corrector step per call. Refused at once
   * (RewardQueueFull) when the requests or items being graded are at their bound: every request
   * admitted is answered within its deadline, and memory is bounded whatever the callers send.
   */
  async grade(items: ReadonlyArray<{ prompt: string; response: string }>): Promise<{ items: GradedItem[]; stats: GradeStats }> {
    if (this.closed) throw new Error('reward service is closed');
    if (this.pendingRequests >= this.maxPendingRequests) throw new RewardQueueFull(`the reward service is grading ${this.pendingRequests} requests, its bound (maxPendingRequests); retry later`);
    // One request larger than the whole bound is still taken when nothing else is pending.
    if (this.pendingItems > 0 && this.pendingItems + items.length > this.maxPendingItems) throw new RewardQueueFull(`the reward service is grading ${this.pendingItems} items; ${items.length} more would pass its bound of ${this.maxPendingItems} (maxPendingItems); retry later`);
    this.pendingRequests++;
    this.pendingItems += items.length;
    try {
      return await this.gradeNow(items);
    } finally {
      this.pendingRequests--;
      this.pendingItems -= items.length;
    }
  }

  private async gradeNow(items: ReadonlyArray<{ prompt: string; response: string }>): Promise<{ items: GradedItem[]; stats: GradeStats }> {
    const parsed = items.map((it) => this.parse(it.prompt, it.response));
    const byPrompt = new Map<string, ResearchRollout[]>();
    for (const p of parsed) if (p.rollout) byPrompt.set(p.prompt, [...(byPrompt.get(p.prompt) ?? []), p.rollout]);
    const groups = [...byPrompt.values()];
    let log: StepLog | null = null;
    const wmOf = new Map<ResearchRollout, Score>();
    if (groups.length) {
      const res = await this.corrector.step(groups);
      log = res.log;
      this.lastLog = log;
      // res.scores holds real scores for this step's anchors that came back in time and the
      // calibrated world model elsewhere; the calibrated world model of every item is re-read here.
      const pred = await this.model.predict(groups.flat().map(this.features));
      groups.flat().forEach((r, i) => wmOf.set(r, this.corrector.calibrate(pred[i]!.mean)));
    }
    const out = parsed.map((p): GradedItem => {
      if (!p.rollout) return { score: this.opts.invalidReward, source: 'invalid', worldModel: null, reason: p.reason };
      const wm = wmOf.get(p.rollout) ?? null;
      const real = this.real.get(p.rollout);
      if (real) return real.score === null ? { score: null, source: 'excluded', worldModel: wm, reason: real.reason } : { score: real.score, source: 'real', worldModel: wm, reason: null };
      return { score: wm, source: this.launched.has(p.rollout) ? 'pending' : 'wm', worldModel: wm, reason: null };
    });
    const count = (s: ItemSource) => out.filter((o) => o.source === s).length;
    const l = log ?? this.lastLog;
    return {
      items: out,
      stats: {
        groups: groups.length,
        anchorGroups: log?.anchorsLaunched ?? 0,
        realItems: count('real'),
        pendingItems: count('pending'),
        excludedItems: count('excluded'),
        invalidItems: count('invalid'),
        calibrated: l?.calibrated ?? false,
        biasReduction: l?.biasReduction ?? null,
        anchorWeight: l?.anchorWeight ?? 1,
        disagreement: l?.disagreement ?? null,
        realizedAnchorFraction: l?.realizedAnchorFraction ?? 0,
        realExecutions: l?.realExecutions ?? 0,
        inFlight: this.corrector.inFlight,
      },
    };
  }

  health(): { capacity: number; busy: number; queueLength: number; inFlight: number; pendingRequests: number; maxPendingRequests: number; calibrated: boolean; observed: number; isolation: Isolation | null } {
    const ex = this.executor as Executor & { isolation?: Isolation };
    return {
      capacity: ex.capacity,
      busy: ex.busy,
      queueLength: ex.queueLength,
      inFlight: this.corrector.inFlight,
      pendingRequests: this.pendingRequests,
      maxPendingRequests: this.maxPendingRequests,
      calibrated: this.lastLog?.calibrated ?? false,
      observed: this.model.size,
      isolation: ex.isolation ?? null,
    };
  }

  /** Waits for anchors in flight and the world model's learning; then releases the model. */
  async close(): Promise<void> {
    this.closed = true;
    await this.corrector.drain();
    await this.learning;
    await this.model.release();
  }

  /** Adds finished anchors to the world model's data and refits it, one fit at a time. */
  private learn(): void {
    this.learning = this.learning.then(async () => {
      const data = this.pendingData;
      this.pendingData = [];
      if (data.length === 0 || this.closed) return;
      this.model.observe(data.map((d) => d.x), data.map((d) => d.y));
      await this.model.fit();
    }).catch((e: unknown) => this.opts.onError(e instanceof Error ? e : new Error(String(e))));
  }
}
