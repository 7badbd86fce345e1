// The VLA recipe's options (recipes/vla.ts): a module of their own, so the VLA's code closure holds no other recipe's options.
import { Type, type Static } from '@sinclair/typebox';

// ── The VLA (recipes/vla.ts) ───────────────────────────────────────────────────────────────────
/** The tasks the VLA recipe trains for, each on its sim robot under the gap profile. */
export const VLA_TASKS = ['reach', 'push'] as const;

/**
 * What the VLA's proprioception reads unless its config says otherwise: the robot's own state (joints, a tip derived
 * from them, the commands it sent), so the goal reaches it only through its camera and instruction.
 */
export const VLA_PROPRIO = 'robot' as const;

const Count = (minimum: number, maximum: number, description?: string) => Type.Integer({ minimum, maximum, ...(description ? { description } : {}) });
/**
 * The VLA recipe's settings beside its task, each left out taking the task's default (recipes/vla.ts VLA_CLONE,
 * VLA_HIDDEN, UPDATES, KL_BETA, RL_LOG_STD, IMAGINE; VLA_PROPRIO; `quick`: vlaScale(true)): the keys of the service's
 * `vla-train` job, whose robot names the task.
 */
export const VlaSettings = {
  seed: Type.Optional(Type.Integer({ minimum: 0, maximum: 2 ** 31 - 1, default: 0, description: 'seed of the post-training phase (policy noise, groups, anchors, the robot\'s noise); the clone and the world model do not depend on it' })),
  quick: Type.Optional(Type.Boolean({ default: false, description: 'the tiny sizes of a smoke run' })),
  clone: Type.Optional(Type.Object(
    {
      demos: Count(2, 100000, 'demonstrator episodes on the gap robot, the last daggerRounds x daggerEpisodes of them DAgger\'s'),
      daggerRounds: Count(0, 100),
      daggerEpisodes: Count(0, 10000, 'episodes per DAgger round'),
      bcEpochs: Count(1, 10000, 'epochs of the first fit'),
    },
    { additionalProperties: false, description: 'behaviour cloning\'s scale (default per task: recipes/vla.ts VLA_CLONE)' },
  )),
  hidden: Type.Optional(Type.Array(Count(1, 4096), { minItems: 1, maxItems: 8, description: "widths of the VLA's fusion MLP (default: reach [64, 64], push [128, 128])" })),
  updates: Type.Optional(Count(1, 100000, 'WMRL updates (default: reach 600, push 160; quick 2)')),
  prompts: Type.Optional(Count(1, 1024, 'imagined groups per update (default 16; quick 2)')),
  groupSize: Type.Optional(Count(2, 256, 'rollouts per group (default 8; quick 2)')),
  refitEvery: Type.Optional(Count(0, 100000, "refit the world model on the robot's recorded episodes every this many updates (default 30; quick 2; 0: never)")),
  proprio: Type.Optional(Type.Union([Type.Literal('robot'), Type.Literal('all')], {
    default: VLA_PROPRIO,
    description: "what the VLA's proprioception reads: robot, the robot's own state (joints, tip, the commands it sent; the goal reaches it only through its camera and instruction), or all, the whole observation (targets, goal one-hot and offsets too)",
  })),
  rl: Type.Optional(Type.Object(
    {
      klBeta: Type.Optional(Type.Number({ minimum: 0, maximum: 100, description: "β of GRPO's KL penalty to the clone (0: none)" })),
      logStd: Type.Optional(Type.Union([Type.Number({ minimum: -5, maximum: 1 }), Type.Null()], { description: "the VLA's log-std under RL (null: the clone's)" })),
      imagine: Type.Optional(Type.Union([Type.Literal('twin'), Type.Literal('face')], { description: "imagine the VLA itself on the digital twin's renders, or through its latent face" })),
    },
    { additionalProperties: false, description: 'the RL phase (defaults per task: recipes/vla.ts KL_BETA, RL_LOG_STD, IMAGINE)' },
  )),
};

/** The VLA recipe's config (recipes/vla.ts vlaRecipe checks it and fills in the task's defaults). */
export const VlaRecipeInput = Type.Object({ task: Type.Union(VLA_TASKS.map((t) => Type.Literal(t))), ...VlaSettings }, { additionalProperties: false });
export type VlaRecipeInput = Static<typeof VlaRecipeInput>;
