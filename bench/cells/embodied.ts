// The cells of `bench embodied`: at one (task, RL seed), the behaviour-cloned start measured on the split's
// evaluation start states, and each variant post-trained from it on the `gap` robot and measured on the same states.
// Their code and options make the bench's computation key (bench/lib/protocol.ts protocolKeys), so nothing here
// imports the report's code (bench/embodied.ts, stats, report).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClippedPolicyGradient } from '../../policies/pg.js';
import { embodiedPretrain } from '../../recipes/embodied.js';
import { correctorConfig, type CorrectorConfig } from '../../wmrl/corrector.js';
import { evaluateSuccess, type Evaluation } from '../../wmrl/embodied.js';
import type { Policy } from '../../policies/types.js';
import { POST_TRAIN_PG, SimPrompts, simRobotTarget, type Pretrained, type PretrainOptions } from '../../wmrl/sim-setup.js';
import { trainStandard } from '../../wmrl/train_standard.js';
import { DEFAULT_WMRL, trainWmrl } from '../../wmrl/train_wmrl.js';

/** WMRL imagines IMAGINED times the groups standard GRPO executes per update: imagination costs compute, not robot time, and more groups give a less noisy gradient from the same robot episodes. */
export const IMAGINED = 4;
/** Anchor groups per update on average, with no per-update floor: the imagined updates between anchors are where WMRL saves robot time. */
export const ANCHORS_PER_UPDATE = 0.5;
/** The robot: the sim under this hardware profile (the reality gap), its reset charged this many robot seconds. */
export const PROFILE = 'gap';
const RESET_SECONDS = 5;

/** Start states come in blocks of this many seeds; a run's prompts at RL seed s are block 10 + s (seeds from 1,000,000 + s·100,000). */
export const START_BLOCK = 100_000;
export const promptBlock = (seed: number) => 10 + seed;

/** A full run's sizes and a quick run's (a smoke test of the code: its figures mean nothing). */
export const SIZES = {
  full: { updates: 20, prompts: 8, groupSize: 8, evalEvery: 4, evalEpisodes: 200, pretrain: {} as Partial<PretrainOptions> },
  quick: {
    updates: 3, prompts: 4, groupSize: 4, evalEvery: 3, evalEpisodes: 10,
    pretrain: { bcEpisodes: 10, bcEpochs: 20, daggerRounds: 1, daggerEpisodes: 5, daggerEpochs: 10, wmEpisodes: 12, wmEpochs: 3, wmHidden: [64, 64], wmMembers: 3 } as Partial<PretrainOptions>,
  },
};

/** What every cell of a run depends on besides its code: its JSON is the computation key's options. */
export function cellOptions(o: { quick: boolean; split: 'train' | 'validation' | 'test'; evalSeed0: number }) {
  const sz = o.quick ? SIZES.quick : SIZES.full;
  const opts = { split: o.split, ...sz, evalSeed0: o.evalSeed0, imagined: IMAGINED, anchorsPerUpdate: ANCHORS_PER_UPDATE, profile: PROFILE, resetSeconds: RESET_SECONDS };
  // Every variant's prompts of a run stay inside its own block of start states.
  const most = Math.max(...Object.values(variants(opts.prompts)).map((v) => v.prompts));
  if (opts.updates * most > START_BLOCK) throw new Error(`bench embodied: ${opts.updates} updates × ${most} prompts overflow a block of ${START_BLOCK} start states`);
  return opts;
}
export type CellOptions = ReturnType<typeof cellOptions>;

export const VARIANT_NAMES = ['standard', 'anchors_only', 'pure_wm', 'debias', 'denoise', 'full', 'full_active'] as const;
export type VariantName = (typeof VARIANT_NAMES)[number];

export interface Variant {
  label: string;
  /** false: pure world model; 'standard': every group on the robot (wmrl/train_standard.ts). */
  corrector: CorrectorConfig | false | 'standard';
  /** Groups per update. */
  prompts: number;
}

/**
 * The variants for standard GRPO's B groups per update. 'anchors_only' is standard GRPO on one group per update —
 * twice the robot episodes WMRL's anchors spend — without any imagined group: what the imagined groups add beyond
 * the anchors.
 */
export function variants(B: number): Record<VariantName, Variant> {
  const imagined = IMAGINED * B;
  const base = correctorConfig({ anchors: { fraction: ANCHORS_PER_UPDATE / imagined, floor: 0 } }, DEFAULT_WMRL.corrector as CorrectorConfig);
  return {
    standard: { label: 'standard GRPO on the robot', corrector: 'standard', prompts: B },
    anchors_only: { label: 'standard GRPO, 1 group per update (the anchors alone)', corrector: 'standard', prompts: 1 },
    pure_wm: { label: 'pure world model', corrector: false, prompts: imagined },
    debias: { label: '+ debias', corrector: correctorConfig({ denoise: false }, base), prompts: imagined },
    denoise: { label: '+ denoise', corrector: correctorConfig({ debias: false }, base), prompts: imagined },
    full: { label: 'full WMRL', corrector: base, prompts: imagined },
    full_active: { label: 'full WMRL, active anchors', corrector: correctorConfig({ anchors: { mode: 'active' } }, base), prompts: imagined },
  };
}

/** The behaviour-cloned start on the split's evaluation start states. */
export interface StartCell {
  success: number;
  /** Per start state, in order: 1 success, 0 not. */
  outcomes: number[];
}

/** One variant post-trained from the start at one seed. */
export interface VariantCell {
  /** (robot hours, success on the split's evaluation start states) at every evaluation: every evalEvery updates and the last. */
  points: Array<[number, number]>;
  /** The last evaluation per start state, in order: 1 success, 0 not (the same states for every variant of a seed). */
  outcomes: number[];
  robotHours: number;
  robotEpisodes: number;
  /** Compute wall-clock seconds of the training run (its evaluations included). */
  computeSeconds: number;
  /** Groups per update, and per update the groups that ran on the robot (anchors for WMRL). */
  groups: number;
  realGroups: number[];
  /** Variants with the Corrector, per update: the denoiser's anchor weight (1: not up-weighted), whether a debias map calibrated the scores, the map's held-out bias reduction; null without the Corrector. */
  anchorWeight: number[] | null;
  calibrated: boolean[] | null;
  biasReduction: Array<number | null> | null;
  /** Updates on which the reward-hacking alarm was raised. */
  alarms: number;
  imaginedTransitions: number;
  imagineSeconds: number;
}

const copyOf = (xs: ReadonlyArray<{ data: Float32Array }>) => xs.map((t) => Float32Array.from(t.data));

/** A task at one RL seed: pretrained once (behaviour cloning, world model); each variant starts from the same parameters. */
export class SeedSetup {
  private constructor(
    readonly task: string,
    readonly seed: number,
    private readonly o: CellOptions,
    private readonly pre: Pretrained,
    private readonly policy0: Float32Array[],
    private readonly model0: Float32Array[],
  ) {}

  static async create(task: string, seed: number, o: CellOptions): Promise<SeedSetup> {
    const pre = await embodiedPretrain({ task, seed, quick: false, commandHistory: 0, sizes: o.pretrain });
    return new SeedSetup(task, seed, o, pre, copyOf(pre.policy.paramNames().map((n) => pre.policy.store.get(n))), copyOf(pre.model.store.names().map((n) => pre.model.store.get(n))));
  }

  /** The split's evaluation: the policy's mean action on `evalEpisodes` start states from `evalSeed0`, on the robot's profile. */
  private async evaluate(policy: Policy): Promise<Evaluation & { outcomes: number[] }> {
    const ev = await evaluateSuccess(policy, this.task, PROFILE, this.o.evalEpisodes, this.o.evalSeed0);
    if (!ev.outcomes) throw new Error('bench embodied: the evaluation kept no per-episode outcomes');
    return { ...ev, outcomes: ev.outcomes };
  }

  private reset(): void {
    const p = this.pre;
    p.policy.paramNames().forEach((n, i) => p.policy.store.set(n, this.policy0[i]!));
    p.model.store.names().forEach((n, i) => p.model.store.set(n, this.model0[i]!));
  }

  async start(): Promise<StartCell> {
    this.reset();
    const ev = await this.evaluate(this.pre.policy);
    return { success: ev.success, outcomes: ev.outcomes };
  }

  async train(name: VariantName): Promise<VariantCell> {
    this.reset();
    const { task, seed, o, pre: p } = this;
    const v = variants(o.prompts)[name];
    const tmp = mkdtempSync(join(tmpdir(), 'bench-embodied-'));
    // The trainers evaluate every evalEvery updates and after the last: the last evaluation is the cell's.
    const seen: { last: (Evaluation & { outcomes: number[] }) | null } = { last: null };
    const evaluate = async (policy: Policy) => (seen.last = await this.evaluate(policy));
    try {
      // The store is this cell's scratch file, deleted with it: no fsync per step.
      const target = await simRobotTarget({ task, profile: PROFILE, robots: 1, resetSeconds: o.resetSeconds, seed, store: join(tmp, 'episodes.db'), storeSync: 'NORMAL' });
      try {
        using prompts = await SimPrompts.create(task);
        const pg = await ClippedPolicyGradient.create(p.policy, POST_TRAIN_PG);
        const common = { updates: o.updates, prompts: v.prompts, groupSize: o.groupSize, evalEvery: o.evalEvery, promptSeed0: promptBlock(seed) * START_BLOCK, seed };
        const state = v.corrector === 'standard'
          ? await trainStandard({ config: common, policy: p.policy, pg, target, prompts, evaluate })
          // The alarm's warnings are counted from the rows (hackingAlarm), not printed over the progress bar.
          // A cell reads nothing of the world model after the run: no refit at the last update.
          : await trainWmrl({ config: { ...DEFAULT_WMRL, ...common, corrector: v.corrector, horizon: target.maxSteps, refitAtEnd: false }, policy: p.policy, pg, model: p.model, simData: p.simData, target, prompts, evaluate, warn: () => {} });
        await pg.release();
        const rows = state.rows;
        const end = rows[o.updates - 1];
        if (!end || end.evalSuccess === undefined || !seen.last) throw new Error(`bench embodied: ${task} seed ${seed} ${name} has no evaluation at update ${o.updates}`);
        const corrected = v.corrector !== 'standard' && v.corrector !== false;
        return {
          points: rows.filter((r) => r.evalSuccess !== undefined).map((r): [number, number] => [r.robotSeconds / 3600, r.evalSuccess!]),
          outcomes: seen.last.outcomes,
          robotHours: end.robotSeconds / 3600,
          robotEpisodes: end.robotEpisodes,
          computeSeconds: end.computeSeconds,
          groups: v.prompts,
          realGroups: rows.map((r) => r.realGroups),
          anchorWeight: corrected ? rows.map((r) => r.anchorWeight ?? 1) : null,
          calibrated: corrected ? rows.map((r) => r.calibrated ?? false) : null,
          biasReduction: corrected ? rows.map((r) => r.biasReduction ?? null) : null,
          alarms: rows.filter((r) => r.hackingAlarm).length,
          imaginedTransitions: rows.reduce((s, r) => s + (r.imaginedTransitions ?? 0), 0),
          imagineSeconds: rows.reduce((s, r) => s + (r.imagineSeconds ?? 0), 0),
        };
      } finally {
        await target.close();
      }
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  }
}
