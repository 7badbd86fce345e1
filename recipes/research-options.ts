// The AutoResearch recipe's options (recipes/autoresearch.ts): a module of their own, so the research benchmark's
// computation key (its code closure) moves with these options alone, not with the embodied or VLA recipe's.
import { Type, type Static } from '@sinclair/typebox';

// ── AutoResearch (recipes/autoresearch.ts) ──────────────────────────────────────────────────────
/** The built-in research tasks (autoresearch/tasks/index.ts; recipes/autoresearch.ts checks the two agree). */
export const RESEARCH_TASK_NAMES: readonly string[] = ['classifier', 'controller'];

/** Sizes of a full run and of `quick` (a smoke run); each is taken where the config leaves the size out. */
export const RESEARCH_SIZES = {
  full: { standardSteps: 16, wmrlSteps: 192, groupsPerStep: 4, groupSize: 8, warmup: 8, evalSeeds: 3 },
  quick: { standardSteps: 4, wmrlSteps: 16, groupsPerStep: 3, groupSize: 4, warmup: 4, evalSeeds: 1 },
} as const;

/** The research run's options: `wmrl research`'s flags (kebab-case) and the body of `POST /api/runs/research`. */
export const ResearchOptions = Type.Object(
  {
    task: Type.Union(RESEARCH_TASK_NAMES.map((k) => Type.Literal(k)), { default: 'classifier', description: 'built-in research task' }),
    algo: Type.Union([Type.Literal('wmrl'), Type.Literal('standard')], { default: 'wmrl', description: 'wmrl (outcome world model + anchors) or standard (GRPO, every proposal executed)' }),
    pureWm: Type.Boolean({ default: false, description: 'WMRL: pure world model, no anchors and no corrections (the ablation)' }),
    steps: Type.Optional(Type.Integer({ minimum: 1, maximum: 100000, description: `policy steps (default: wmrl ${RESEARCH_SIZES.full.wmrlSteps}, standard ${RESEARCH_SIZES.full.standardSteps}; quick: ${RESEARCH_SIZES.quick.wmrlSteps}, ${RESEARCH_SIZES.quick.standardSteps})` })),
    groupsPerStep: Type.Optional(Type.Integer({ minimum: 1, maximum: 256, description: `groups of proposals per step (default ${RESEARCH_SIZES.full.groupsPerStep}; quick ${RESEARCH_SIZES.quick.groupsPerStep})` })),
    groupSize: Type.Optional(Type.Integer({ minimum: 2, maximum: 256, description: `proposals per group (default ${RESEARCH_SIZES.full.groupSize}; quick ${RESEARCH_SIZES.quick.groupSize})` })),
    warmup: Type.Optional(Type.Integer({ minimum: 0, maximum: 10000, description: `WMRL: random proposals executed before training, the outcome model's first data (default ${RESEARCH_SIZES.full.warmup}; quick ${RESEARCH_SIZES.quick.warmup})` })),
    evalSeeds: Type.Optional(Type.Integer({ minimum: 1, maximum: 64, description: `training seeds the greedy proposal is measured on after every step (default ${RESEARCH_SIZES.full.evalSeeds}; quick ${RESEARCH_SIZES.quick.evalSeeds})` })),
    lr: Type.Number({ exclusiveMinimum: 0, maximum: 100, default: 1, description: "the agent's policy-gradient learning rate" }),
    slots: Type.Integer({ minimum: 1, maximum: 64, default: 2, description: 'sandbox slots (executions at once)' }),
    seed: Type.Integer({ minimum: 0, maximum: 2 ** 31 - 1, default: 0 }),
    quick: Type.Boolean({ default: false, description: 'small sizes, for a smoke run' }),
  },
  { additionalProperties: false },
);
export type ResearchOptions = Static<typeof ResearchOptions>;
