// The cells of `bench embodied`: at one (task, RL seed), the behaviour-cloned start measured on the split's evaluation
// start states, and each variant post-trained from it on the `gap` robot, handing back the policy of its best
// evaluation by its own measurement on the robot (train-split states), that policy measured on the split's states.
// This file declares the variants — WMRL's arms and the robot-only baselines, each baseline's hyperparameter grid one
// variant per point — and runs one by its name; what every cell shares is embodied/setup.ts, each variant's trainer
// is called from its family's module beside it (embodied/grpo.ts, …). A cell's computation key (bench/lib/protocol.ts
// protocolKeys) covers the shared setup and its variant's module and options alone: everything this file gives a cell
// is in those options, so this file itself is in no cell's key, and adding a variant keeps every other cell. Nothing
// here imports the report's code (bench/embodied.ts, stats, report).
import { CALIBRATED_WORLD_MODEL, IMAGINE, POST_TRAIN_LR } from '../../recipes/options.js';
import { correctorConfig, type CorrectorConfig } from '../../wmrl/corrector.js';
import { DEFAULT_WMRL } from '../../wmrl/train_wmrl.js';
import * as bc from './embodied/bc.js';
import * as grpo from './embodied/grpo.js';
import * as grpoCal from './embodied/grpo-cal.js';
import * as ppo from './embodied/ppo.js';
import * as rlpd from './embodied/rlpd.js';
import { SeedSetup, START_BLOCK, sharedOptions, type VariantCell } from './embodied/setup.js';
import * as wmrl from './embodied/wmrl.js';

export { MEASURE_BLOCK, PROFILE, SIZES, START_BLOCK, SeedSetup, armOf, promptBlock, type CellOptions, type StartCell, type VariantCell } from './embodied/setup.js';

/** WMRL imagines IMAGINED times the groups standard GRPO executes per update (the product's schedule in the learned model): imagination costs compute, not robot time, and more groups give a less noisy gradient from the same robot episodes. */
export const IMAGINED = IMAGINE.learned;
/** Anchor groups per update on average, with no per-update floor: the imagined updates between anchors are where WMRL saves robot time. */
export const ANCHORS_PER_UPDATE = 0.5;
/** Imagining in the identified sim, WMRL imagines SIM_IMAGINED times standard GRPO's groups per update (the product's schedule there): the sim's rollouts cost compute alone, and fewer let the update drift (docs/decisions.md, the twin probes). */
export const SIM_IMAGINED = IMAGINE['identified-sim'];

/** The module each family of variants trains through: its import closure and the variant's options are the variant's computation key. */
const FAMILY_MODULES = {
  grpo: new URL('./embodied/grpo.ts', import.meta.url).href,
  grpo_cal: new URL('./embodied/grpo-cal.ts', import.meta.url).href,
  wmrl: new URL('./embodied/wmrl.ts', import.meta.url).href,
  ppo: new URL('./embodied/ppo.ts', import.meta.url).href,
  rlpd: new URL('./embodied/rlpd.ts', import.meta.url).href,
  bc_more: new URL('./embodied/bc.ts', import.meta.url).href,
} as const;
export type Family = keyof typeof FAMILY_MODULES;
/** The shared setup every cell runs: the shared part of every computation key. */
export const SETUP_MODULE = new URL('./embodied/setup.ts', import.meta.url).href;

/** A variant: its label, its groups per update, and its family's trainer with the options that make it this variant. */
export type Variant = { label: string; prompts: number } & (
  | { family: 'grpo'; options: grpo.GrpoOptions }
  | { family: 'grpo_cal'; options: grpoCal.GrpoCalOptions }
  | { family: 'wmrl'; options: wmrl.WmrlOptions }
  | { family: 'ppo'; options: ppo.PpoOptions }
  | { family: 'rlpd'; options: rlpd.RlpdOptions }
  | { family: 'bc_more'; options: bc.BcMoreOptions }
);

/** WMRL's arm the report heads with: the product's recipe, imagining where a calibrated run imagines (recipes/options.ts CALIBRATED_WORLD_MODEL). */
export const HEADLINE: 'full' | 'full_sim' = CALIBRATED_WORLD_MODEL === 'identified-sim' ? 'full_sim' : 'full';

/** WMRL's arms and the baselines every run has (no grid). */
export const CORE_VARIANTS = ['standard', 'standard_cal', 'anchors_only', 'pure_wm', 'debias', 'denoise', 'full', 'full_active', 'full_sim', 'pure_sim'] as const;

/**
 * The robot-only baselines tuned as WMRL is tuned: each family's grid, one variant per point, named `<family>_<point>`
 * (`ppo_lr3e-4`). A validation run trains every point; the test split and --quick the point CHOSEN (docs/decisions.md).
 */
export const GRIDS = {
  /** PPO with a learned value baseline: the policy's Adam step. */
  ppo: { lr: [3e-4, 1e-3] },
  /** RLPD / HIL-SERL-style SAC: the step of the actor, the critics and the temperature. */
  rlpd: { lr: [1e-4, 3e-4] },
  /** BC with more demonstrations: passes over every demonstration at each refit. */
  bc_more: { ep: [10, 30] },
} as const;
export type TunedFamily = keyof typeof GRIDS;
const point = (family: TunedFamily, x: number) => `${family}_${Object.keys(GRIDS[family])[0]}${family === 'bc_more' ? x : x.toExponential().replace('+', '')}`;
/** Every grid point of a family, by variant name. */
export const gridVariants = (family: TunedFamily): string[] => (Object.values(GRIDS[family])[0] as readonly number[]).map((x) => point(family, x));
/**
 * The grid point each family's test run (and --quick) trains: PPO's and BC's chosen on the validation split, the higher
 * mean over the two tasks (docs/decisions.md, 2026-12-07); RLPD's its paper's step until its grid has run there
 * (`CHOSEN_ON_VALIDATION` says which).
 */
export const CHOSEN: Readonly<Record<TunedFamily, string>> = { ppo: point('ppo', 3e-4), rlpd: point('rlpd', 3e-4), bc_more: point('bc_more', 10) };
export const CHOSEN_ON_VALIDATION: Readonly<Record<TunedFamily, boolean>> = { ppo: true, rlpd: false, bc_more: true };

/** Every variant the registry declares: WMRL's arms, the core baselines, every grid point. */
export const VARIANT_NAMES: readonly string[] = [...CORE_VARIANTS, ...(Object.keys(GRIDS) as TunedFamily[]).flatMap(gridVariants)];
export type VariantName = string;

/**
 * RLPD's learner budget on this machine: critic updates per robot step, the critic ensemble (HIL-SERL's two), their
 * width, warm-up updates on the demonstrations: what the validation and test runs' 2 cores afford (docs/decisions.md,
 * 2026-12-07: at 0.5 a reach cell took 35 minutes). A quick run's is a smoke test.
 */
const RLPD_BUDGET = {
  full: { utd: 0.1, critics: 2, criticHidden: [128, 128], warmupSteps: 1000 },
  quick: { utd: 0.02, critics: 2, criticHidden: [32, 32], warmupSteps: 20 },
};

/**
 * Robot episodes a calibrating variant spends identifying the robot before its trainer (wmrl/calibrate.ts): the
 * identification's 16 of the scratch probes (docs/decisions.md, 2026-12-06, calibration).
 */
export const CALIBRATE_EPISODES = 16;

/**
 * Every variant for standard GRPO's B groups per update. 'anchors_only' is standard GRPO on one group per update —
 * twice the robot episodes WMRL's anchors spend — without any imagined group: what the imagined groups add beyond
 * the anchors.
 */
export function variants(B: number, scale: 'full' | 'quick' = 'full'): Record<string, Variant> {
  const imagined = IMAGINED * B;
  const base = correctorConfig({ anchors: { fraction: ANCHORS_PER_UPDATE / imagined, floor: 0 } }, DEFAULT_WMRL.corrector as CorrectorConfig);
  // WMRL's arms with a robot calibrate first (the product's recipe); the pure world model has no robot to calibrate on.
  const calibrate = { episodes: CALIBRATE_EPISODES, quick: scale === 'quick' };
  const g = (label: string, prompts: number): Variant => ({ label, prompts, family: 'grpo', options: { prompts } });
  const lr = POST_TRAIN_LR.calibrated;
  const w = (label: string, corrector: CorrectorConfig | false): Variant => ({ label, prompts: imagined, family: 'wmrl', options: { prompts: imagined, corrector, ...(corrector ? { calibrate, lr } : {}) } });
  const standardCal = (label: string): Variant => ({ label, prompts: B, family: 'grpo_cal', options: { prompts: B, calibrate, lr } });
  return {
    standard: g('standard GRPO on the robot', B),
    standard_cal: standardCal('standard GRPO on the robot, from the calibrated clone'),
    anchors_only: g('standard GRPO, 1 group per update (the anchors alone)', 1),
    pure_wm: w('pure world model', false),
    debias: w('+ debias', correctorConfig({ denoise: false }, base)),
    denoise: w('+ denoise', correctorConfig({ debias: false }, base)),
    full: w('full WMRL', base),
    full_active: w('full WMRL, active anchors', correctorConfig({ anchors: { mode: 'active' } }, base)),
    full_sim: {
      label: 'full WMRL, imagining in the identified sim', prompts: SIM_IMAGINED * B, family: 'wmrl',
      options: { prompts: SIM_IMAGINED * B, corrector: correctorConfig({ anchors: { fraction: ANCHORS_PER_UPDATE / (SIM_IMAGINED * B), floor: 0 } }, DEFAULT_WMRL.corrector as CorrectorConfig), calibrate, lr, imagine: 'identified-sim' },
    },
    // What the anchors and their corrections add to imagining in the identified sim: the same run without them.
    pure_sim: { label: 'the identified sim alone (no anchors)', prompts: SIM_IMAGINED * B, family: 'wmrl', options: { prompts: SIM_IMAGINED * B, corrector: false, calibrate, lr, imagine: 'identified-sim' } },
    ...Object.fromEntries(GRIDS.ppo.lr.map((lr): [string, Variant] => [point('ppo', lr), { label: `PPO, learned value baseline (lr ${lr.toExponential()})`, prompts: B, family: 'ppo', options: { prompts: B, lr } }])),
    ...Object.fromEntries(GRIDS.rlpd.lr.map((lr): [string, Variant] => [point('rlpd', lr), { label: `RLPD / HIL-SERL-style SAC (lr ${lr.toExponential()})`, prompts: B, family: 'rlpd', options: { prompts: B, lr, ...RLPD_BUDGET[scale] } }])),
    ...Object.fromEntries(GRIDS.bc_more.ep.map((epochs): [string, Variant] => [point('bc_more', epochs), { label: `BC, more demonstrations at the same robot time (${epochs} epochs)`, prompts: B, family: 'bc_more', options: { prompts: B, epochs } }])),
  };
}

/** The variants a split runs, in report order. */
export function planVariants(split: 'train' | 'validation' | 'test'): string[] {
  const families = Object.keys(GRIDS) as TunedFamily[];
  return [...CORE_VARIANTS, ...families.flatMap((f) => (split === 'validation' ? gridVariants(f) : [CHOSEN[f]]))];
}

/** What every cell of a run depends on besides its code (sharedOptions), checked against the variants' prompts. */
export function cellOptions(o: { quick: boolean; split: 'train' | 'validation' | 'test'; evalSeed0: number }) {
  const opts = sharedOptions(o);
  // Every variant's prompts of a run stay inside its own block of start states.
  const most = Math.max(...Object.values(variants(opts.prompts)).map((v) => v.prompts));
  if (opts.updates * most > START_BLOCK) throw new Error(`bench embodied: ${opts.updates} updates × ${most} prompts overflow a block of ${START_BLOCK} start states`);
  return opts;
}

/** The computation-key specs of the variants `names` (bench/lib/protocol.ts VariantKeySpec): each one's family module and options. */
export function variantKeySpecs(names: readonly string[], B: number, scale: 'full' | 'quick' = 'full'): Record<string, { entry: string; options: unknown }> {
  const all = variants(B, scale);
  return Object.fromEntries(names.map((n) => {
    const v = all[n];
    if (!v) throw new Error(`bench embodied: no variant '${n}' (${Object.keys(all).join(', ')})`);
    return [n, { entry: FAMILY_MODULES[v.family], options: { family: v.family, ...v.options } }];
  }));
}

/** Variant `name` trained from the seed's start (B: standard GRPO's groups per update). */
export function trainVariant(setup: SeedSetup, name: string, B: number, scale: 'full' | 'quick' = 'full'): Promise<VariantCell> {
  const v = variants(B, scale)[name];
  if (!v) throw new Error(`bench embodied: no variant '${name}' (${Object.keys(variants(B, scale)).join(', ')})`);
  switch (v.family) {
    case 'grpo': return setup.train(name, (x) => grpo.train(x, v.options));
    case 'grpo_cal': return setup.train(name, (x) => grpoCal.train(x, v.options));
    case 'wmrl': return setup.train(name, (x) => wmrl.train(x, v.options));
    case 'ppo': return setup.train(name, (x) => ppo.train(x, v.options));
    case 'rlpd': return setup.train(name, (x) => rlpd.train(x, v.options));
    case 'bc_more': return setup.train(name, (x) => bc.train(x, v.options));
  }
}
