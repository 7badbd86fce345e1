// The configs of the recipes, declared once: the CLI builds its flags from them (bin/schema-flags.ts), the service
// takes them as its jobs' bodies and the OpenAPI document shows them. Only TypeBox here, so a verb's flags cost no
// MuJoCo or ONNX Runtime start.
import { Type, type Static } from '@sinclair/typebox';

// ── The product's defaults, which bench embodied measures (tests/product-defaults.test.ts holds them to its) ──
/** Robot episodes of the calibration before post-training (wmrl/calibrate.ts; docs/decisions.md, 2026-12-06). */
export const CALIBRATE_EPISODES = 16;
/**
 * The policy's Adam step in post-training, by where it starts: a calibrated clone (a good start the update must not
 * wear down; chosen on bench embodied's validation split, docs/decisions.md) or the pretrained clone (a weak start it
 * must move; wmrl/sim-setup.ts POST_TRAIN_PG's).
 */
export const POST_TRAIN_LR = { calibrated: 1e-4, uncalibrated: 1e-3 } as const;
/**
 * Where a calibrated WMRL run imagines its groups when its options leave it out: 'learned', the pretrained world
 * model's ensemble; 'identified-sim', the task's sim set to what the calibration identified (wmrl/identified-sim.ts),
 * chosen on bench embodied's validation split (docs/decisions.md, 2026-12-07). An uncalibrated run has no identified
 * sim and imagines in the learned model.
 */
export const CALIBRATED_WORLD_MODEL: 'learned' | 'identified-sim' = 'identified-sim';
/**
 * Groups a WMRL update imagines, as a multiple of `prompts`, where the options leave `imagine` out, by where it
 * imagines: bench embodied's schedules (its `full` and `full_sim`; the sim's rollouts are compute alone, and fewer
 * let the update drift: docs/decisions.md, the twin probes).
 */
export const IMAGINE = { learned: 4, 'identified-sim': 16 } as const;
/** The sim robot reports its last this many commands (sim/env.ts commandHistory) unless --command-history says otherwise: those in flight under actuation latency. */
export const SIM_COMMAND_HISTORY = 4;

// ── The embodied policy (recipes/embodied.ts) ──────────────────────────────────────────────────
/**
 * The WMRL trainer's options: `wmrl train`'s flags of the same names (kebab-case; `debias` and `denoise` as
 * `--no-debias`, `--no-denoise`) and the keys of the service's `wmrl-train` job.
 */
export const TrainerOptions = {
  updates: Type.Integer({ minimum: 1, maximum: 100000, default: 20, description: 'policy updates' }),
  prompts: Type.Integer({ minimum: 1, maximum: 1024, default: 8, description: 'prompts (groups) per update, B' }),
  group: Type.Integer({ minimum: 2, maximum: 256, default: 8, description: 'rollouts per prompt, G' }),
  imagine: Type.Optional(Type.Integer({ minimum: 1, maximum: 64, description: `WMRL: groups imagined per update, as a multiple of prompts (the groups standard GRPO executes): imagination costs compute, not robot time. Left out: ${IMAGINE.learned} imagining in the learned model, ${IMAGINE['identified-sim']} in the identified sim (bench embodied's schedules)` })),
  anchorGroups: Type.Number({ minimum: 0, maximum: 1024, default: 0.5, description: 'WMRL: anchor groups run on the robot per update, on average (a fraction is rounded stochastically: 0.5 = one every other update, as bench embodied measures; at least one every update from 1 on)' }),
  debias: Type.Boolean({ default: true, description: 'Online Debiasing (the isotonic map from world-model to real scores)' }),
  denoise: Type.Boolean({ default: true, description: 'Inverse-Variance Denoising (the anchor weight)' }),
  pureWm: Type.Boolean({ default: false, description: 'pure world model: no anchors, nothing runs on the robot (the ablation)' }),
  anchors: Type.Union([Type.Literal('random'), Type.Literal('active')], { default: 'random', description: 'anchor selection: random, or active (where the ensemble disagrees most)' }),
  calibrate: Type.Optional(Type.Integer({ minimum: 0, maximum: 10000, description: `calibration before post-training: this many robot episodes of the clone identify the robot through the pretrained world model (its actuation delay, and its mass, friction, damping and actuator gain), and the clone learns the task again from the task's robust demonstrator in the sim set to what was identified (wmrl/calibrate.ts); charged to robot time. Left out: ${CALIBRATE_EPISODES} where the run evaluates its policy (a sim robot; a robot YAML with evalEpisodes) and the task has a robust demonstrator, else none (pureWm, which runs nothing on the robot: never); 0: none` })),
  worldModel: Type.Optional(Type.Union([Type.Literal('learned'), Type.Literal('identified-sim')], { description: `WMRL: where the groups are imagined: learned, the world model's ensemble pretrained on the nominal sim and conditioned on the robot's identified context; identified-sim, the task's MuJoCo scene set to the delay and scales the calibration identified (needs calibration), each start written in from the robot's reported state. Left out: ${CALIBRATED_WORLD_MODEL} where the run calibrates, else learned` })),
  klCoef: Type.Number({ minimum: 0, maximum: 100, default: 0, description: "β of GRPO's KL penalty to the policy as post-training found it (policies/pg.ts klCoef; the k3 estimate per step): it pulls back a policy that noisy advantages drift from its clone. 0: none" }),
  lr: Type.Optional(Type.Number({ minimum: 1e-6, maximum: 1, description: `the policy's Adam step in post-training. Left out: ${POST_TRAIN_LR.calibrated} where the run calibrates (a good clone the update must hold), else ${POST_TRAIN_LR.uncalibrated}` })),
  resetSeconds: Type.Number({ minimum: 0, maximum: 3600, default: 5, description: 'robot time charged per episode for its reset, s (robot-hours accounting)' }),
  seed: Type.Integer({ minimum: 0, maximum: 2 ** 31 - 1, default: 0 }),
  quick: Type.Boolean({ default: false, description: 'small pretraining, for a smoke run (recipes/embodied.ts QUICK_PRETRAIN)' }),
};

/** Pretraining sizes; each one left out keeps the trainer's default (wmrl/sim-setup.ts DEFAULT_PRETRAIN). */
export const PretrainSizes = Type.Object(
  {
    bcEpisodes: Type.Optional(Type.Integer({ minimum: 1, maximum: 10000, description: 'expert demonstrations (nominal sim) for behaviour cloning' })),
    bcEpochs: Type.Optional(Type.Integer({ minimum: 1, maximum: 10000 })),
    daggerRounds: Type.Optional(Type.Integer({ minimum: 0, maximum: 100, description: 'DAgger rounds after behaviour cloning: the policy drives, the expert labels' })),
    daggerEpisodes: Type.Optional(Type.Integer({ minimum: 1, maximum: 10000, description: 'episodes per DAgger round' })),
    daggerEpochs: Type.Optional(Type.Integer({ minimum: 1, maximum: 10000 })),
    wmEpisodes: Type.Optional(Type.Integer({ minimum: 1, maximum: 10000, description: 'exploratory sim episodes the world model is pretrained on' })),
    wmRandomize: Type.Optional(Type.Number({ minimum: 0, maximum: 100, description: 'domain randomization of the world model\'s data: mass, friction, damping and actuator gain scales drawn in [1/spread, spread] per episode, the model conditioned on them and the robot\'s identified from its anchors (0: nominal sim only)' })),
    wmEpochs: Type.Optional(Type.Integer({ minimum: 1, maximum: 10000 })),
    wmRolloutEpochs: Type.Optional(Type.Integer({ minimum: 0, maximum: 1000, description: 'passes of multi-step fitting after the one-step fit: each member trained through its own open-loop rollouts along the sim episodes (0: none)' })),
    wmRolloutSteps: Type.Optional(Type.Integer({ minimum: 1, maximum: 256, description: 'length of those rollouts, control steps' })),
    wmMembers: Type.Optional(Type.Integer({ minimum: 2, maximum: 32, description: 'ensemble members' })),
    wmHidden: Type.Optional(Type.Array(Type.Integer({ minimum: 1, maximum: 4096 }), { minItems: 1, maxItems: 8, description: 'hidden layer widths of the world model' })),
  },
  { additionalProperties: false },
);

// ── Fleets (wmrl/fleet.ts) ──────────────────────────────────────────────────────────────────────
/**
 * The robots a run's episodes execute on at once, each exclusive and through its own safety layer: the service's
 * `wmrl-train` names them by id in `fleet`, `wmrl train` by repeating --robot.
 */
export const FleetRobots = Type.Union(
  [
    Type.Literal('all'),
    Type.Array(Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9._-]+$' }), { minItems: 1, maxItems: 64, uniqueItems: true }),
  ],
  {
    description:
      "the robots the run's anchor episodes execute on in parallel, each exclusive and through its own safety layer, `robot` among them: their ids, or 'all' (every connected robot no other run drives that can run this run's anchors: the task's robot, each step's outcome, seeded resets); a robot lost mid-run leaves its episode partial, which runs again on another; default: `robot` alone",
  },
);

/** `wmrl train`'s run: the trainer's options and the robot it trains on (the service's job trains on its own robot). */
export const EmbodiedOptions = Type.Object(
  {
    algo: Type.Union([Type.Literal('wmrl'), Type.Literal('standard')], { default: 'wmrl', description: 'wmrl (imagined groups + anchors on the robot) or standard (GRPO, every group on the robot)' }),
    robot: Type.Union([Type.String({ minLength: 1 }), Type.Array(Type.String({ minLength: 1 }), { minItems: 1, maxItems: 64 })], { default: 'sim:reach:gap', description: 'a robot YAML file, or sim:TASK[:PROFILE] for the in-process sim; repeated: a fleet of those robots, each running episodes at once (robot YAMLs of one task, or sims of one task and profile)' }),
    task: Type.Optional(Type.String({ minLength: 1, description: "a robot YAML's sim task: its expert and world model the run starts from, its seeded resets the prompts (sim:TASK names it already)" })),
    robots: Type.Integer({ minimum: 1, maximum: 64, default: 1, description: 'robots one robot stands in for in the robot-time accounting (wall-clock as if that many ran episodes at once); a fleet (--robot repeated) is its own robots' }),
    commandHistory: Type.Optional(Type.Integer({ minimum: 0, maximum: 64, description: `sim robot: its observation also reports the last K commands sent (default ${SIM_COMMAND_HISTORY}; a robot YAML sets command_history)` })),
    evalEpisodes: Type.Optional(Type.Integer({ minimum: 0, maximum: 10000, description: "episodes of each evaluation (the start's before update 1, then every updates/5): a sim robot's on held-out start states in its sim, no robot time (default 100; quick 10); a robot YAML's on the robot itself, mean action from fixed seeded resets, charged to robot time (default 0: none). The run exports the policy of its latest evaluation unless its best measured higher by more than one standard error, then the best's; 0: no evaluation, the last update's policy" })),
    ...TrainerOptions,
  },
  { additionalProperties: false },
);
export type EmbodiedOptions = Static<typeof EmbodiedOptions>;

export * from './vla-options.js';
export * from './research-options.js';
