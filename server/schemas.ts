// Every message of the service's boundary in one file: HTTP bodies, parameters and replies, the
// WebSocket stream's events, error codes. TypeBox gives each shape once; fastify validates with it,
// the OpenAPI document at /docs and the TypeScript types derive from it; the viewer imports the types.
import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { FleetRobots, PretrainSizes, TrainerOptions, VlaSettings } from '../recipes/options.js';

// ── Errors ──────────────────────────────────────────────────────────────────────────────────────
/** Stable error codes: never reused for another meaning (like fastify's FST_ERR_*). */
export const ERROR_CODES = {
  WMRL_VALIDATION: 400,
  WMRL_UNAUTHORIZED: 401,
  /** A WebSocket upgrade from a browser page of another origin (not the service's own, not allowed). */
  WMRL_FORBIDDEN_ORIGIN: 403,
  /** Refused by a part of the server below the routes (e.g. the static files: a path too long to be one). */
  WMRL_FORBIDDEN: 403,
  WMRL_NOT_FOUND: 404,
  WMRL_ROBOT_NOT_FOUND: 404,
  WMRL_RUN_NOT_FOUND: 404,
  WMRL_POLICY_NOT_FOUND: 404,
  WMRL_EPISODE_NOT_FOUND: 404,
  WMRL_JOB_NOT_FOUND: 404,
  WMRL_ROBOT_BUSY: 409,
  WMRL_ROBOT_ESTOPPED: 409,
  WMRL_RUN_FINISHED: 409,
  WMRL_BODY_TOO_LARGE: 413,
  /** The Host header names no host the service answers to (DNS rebinding); --allowed-host adds one. */
  WMRL_MISDIRECTED: 421,
  WMRL_UNSUPPORTED_MEDIA: 415,
  WMRL_POLICY_INVALID: 422,
  WMRL_RATE_LIMITED: 429,
  WMRL_INTERNAL: 500,
  WMRL_TIMEOUT: 503,
  /** The robot did not do what was asked: its link is down, or it refused (its own e-stop holds until cleared at the robot). */
  WMRL_ROBOT_UNAVAILABLE: 503,
  /** The reward API's queue is full; retry after the Retry-After header's seconds. */
  WMRL_QUEUE_FULL: 503,
} as const;
export type ErrorCode = keyof typeof ERROR_CODES;

export const ErrorBody = Type.Object(
  {
    statusCode: Type.Integer(),
    code: Type.Union(Object.keys(ERROR_CODES).map((c) => Type.Literal(c))),
    message: Type.String({ description: 'what went wrong, naming the field or the resource' }),
    errorId: Type.Optional(Type.String({ description: "500 only: the id under which the service's log has the fault" })),
  },
);
export type ErrorBody = Static<typeof ErrorBody>;

// ── Shared pieces ───────────────────────────────────────────────────────────────────────────────
export const Id = Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9._-]+$' });
export const IdParams = Type.Object({ id: Id });
export type IdParams = Static<typeof IdParams>;
export const Interval = Type.Tuple([Type.Number(), Type.Number()], { description: '[lo, hi]' });

// ── Health ──────────────────────────────────────────────────────────────────────────────────────
export const Health = Type.Object({
  status: Type.Literal('ok'),
  version: Type.String(),
  uptimeS: Type.Number(),
  robots: Type.Integer(),
  runs: Type.Integer(),
  foxglove: Type.Union([Type.String(), Type.Null()], { description: 'ws:// URL of the Foxglove endpoint' }),
  mqtt: Type.Union([Type.String(), Type.Null()], { description: 'mqtt:// URL of the embedded broker' }),
});

// ── Robots ──────────────────────────────────────────────────────────────────────────────────────
export const RobotStatus = Type.Object({
  id: Id,
  name: Type.String(),
  kind: Type.Union([Type.Literal('sim'), Type.Literal('rosbridge'), Type.Literal('ros2'), Type.Literal('mqtt')], { description: "sim: the service's in-process sim robot; otherwise the transport a robot YAML reaches it over" }),
  connected: Type.Boolean({ description: "its link is up and its state arrives (rosbridge: the WebSocket, which reconnects by itself; MQTT: a fresh state through the broker; always true for the sim)" }),
  task: Type.Union([Type.String(), Type.Null()], { description: "the sim task it performs (a robot YAML's task:), which its training jobs pretrain in and the viewer draws it in; null: none" }),
  profile: Type.String({ description: "the sim's hardware profile; 'real' for a robot over a transport" }),
  commandHistory: Type.Integer({ minimum: 0, description: "the last commands sent that its observation reports after its features ('<action> command t-k'); a policy for it reads them" }),
  camera: Type.Union([Type.Integer({ minimum: 1 }), Type.Null()], { description: "side of the square camera image its observation carries, px (a VLA reads it); null: no camera" }),
  joints: Type.Array(Type.String()),
  controlHz: Type.Number(),
  state: Type.Union([Type.Literal('idle'), Type.Literal('running'), Type.Literal('estopped')]),
  estopped: Type.Boolean({ description: 'e-stop latched in the safety layer' }),
  robotStopped: Type.Union([Type.Boolean(), Type.Null()], { description: 'the robot itself refuses effort (its own e-stop); null: a robot over a transport does not report it' }),
  run: Type.Union([Id, Type.Null()], { description: 'the run driving it' }),
  stepsApplied: Type.Integer({ description: 'commands the robot has applied since the service started' }),
  position: Type.Array(Type.Number()),
  interventions: Type.Record(Type.String(), Type.Integer()),
  urdf: Type.Union([Type.String(), Type.Null()], { description: "where the robot's URDF is served (its meshes under the same prefix), when it declares one" }),
});
export type RobotStatus = Static<typeof RobotStatus>;

/** A file of a robot's URDF: the URDF itself, a mesh relative to it, or `package/PKG/...` for `package://PKG/...`. */
export const UrdfFileParams = Type.Object({ id: Id, '*': Type.String({ minLength: 1, maxLength: 1024 }) });

/** The e-stop needs no body, so nothing a client sends can make it fail; a reason may ride in the query. */
export const EstopQuery = Type.Object({ reason: Type.Optional(Type.String({ maxLength: 200 })) }, { additionalProperties: false });

// ── Runs ────────────────────────────────────────────────────────────────────────────────────────
export const ExpertSessionOptions = Type.Object(
  {
    robot: Id,
    episodes: Type.Integer({ minimum: 1, maximum: 100000, default: 20, description: 'episodes to record' }),
    imagined: Type.Boolean({ default: true, description: "replay each episode's actions in a nominal-profile sim as the imagined rollout" }),
    seed: Type.Integer({ default: 0 }),
    clone: Type.Boolean({ default: true, description: 'at the checkpoint, fit a behaviour-cloning policy to the demonstrations and add it to the policies (as bc-<run id>)' }),
  },
  { additionalProperties: false },
);
export type ExpertSessionOptions = Static<typeof ExpertSessionOptions>;

export const PolicyRunOptions = Type.Object(
  {
    robot: Id,
    policy: Id,
    episodes: Type.Integer({ minimum: 1, maximum: 100000, default: 5 }),
  },
  { additionalProperties: false },
);
export type PolicyRunOptions = Static<typeof PolicyRunOptions>;

export const WmrlTrainOptions = Type.Object(
  {
    robot: Id,
    task: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: "the sim task pretraining runs in (its expert, world model and prompts' start states), for a robot whose YAML names none; default: the robot's task" })),
    fleet: Type.Optional(FleetRobots),
    ...TrainerOptions,
    pretrain: Type.Optional(PretrainSizes),
    evalEpisodes: Type.Integer({ minimum: 1, maximum: 10000, default: 50, description: "held-out start states (in the sim, under the robot's profile) on which true success is measured after every update" }),
    realTime: Type.Boolean({ default: true, description: "anchor episodes run at the robot's control rate (false: the in-process sim steps as fast as it goes)" }),
    imagined: Type.Boolean({ default: true, description: "stream the world model's imagined rollout (every ensemble member) from each anchor episode's start state" }),
  },
  { additionalProperties: false },
);
export type WmrlTrainOptions = Static<typeof WmrlTrainOptions>;

/** The VLA recipe's settings (recipes/options.ts VlaSettings; the task is the robot's) and where its episodes run. */
export const VlaTrainOptions = Type.Object(
  {
    robot: Id,
    ...VlaSettings,
    realTime: Type.Boolean({ default: true, description: "the robot's episodes run at its control rate (false: the in-process sim steps as fast as it goes)" }),
  },
  { additionalProperties: false },
);
export type VlaTrainOptions = Static<typeof VlaTrainOptions>;

export const RunState = Type.Union([Type.Literal('running'), Type.Literal('stopping'), Type.Literal('stopped'), Type.Literal('finished'), Type.Literal('failed')]);
export type RunState = Static<typeof RunState>;

/** Training metrics of one step. Fields a job cannot measure are null (a scripted session has no world model to debias). */
export const MetricsPoint = Type.Object({
  step: Type.Integer(),
  robotSeconds: Type.Number({ description: 'real robot time spent so far, every robot summed (robot-hours)' }),
  robotWallSeconds: Type.Union([Type.Number(), Type.Null()], { description: "wall-clock the robots took so far: robots that run episodes at once (a fleet) take less of it than robot time" }),
  trueSuccess: Type.Union([Type.Number(), Type.Null()], { description: 'success rate on the real robot' }),
  anchorFraction: Type.Union([Type.Number(), Type.Null()], { description: 'share of groups executed for real' }),
  biasReduction: Type.Union([Type.Number(), Type.Null()]),
  anchorWeight: Type.Union([Type.Number(), Type.Null()]),
  ppi: Type.Union([Interval, Type.Null()], { description: 'confidence interval on the true success rate' }),
  trueScore: Type.Union([Interval, Type.Null()], { description: "prediction-powered 95% interval on the policy's true mean score (the real episodes' return), from world-model scores plus anchors (WMRL)" }),
});
export type MetricsPoint = Static<typeof MetricsPoint>;

export const RunStatus = Type.Object({
  id: Id,
  kind: Type.String(),
  state: RunState,
  robot: Type.Union([Id, Type.Null()]),
  options: Type.Unknown(),
  startedAt: Type.Number({ description: 'ms since the epoch' }),
  endedAt: Type.Union([Type.Number(), Type.Null()]),
  progress: Type.Object({ done: Type.Integer(), total: Type.Integer(), phase: Type.String({ description: 'what the run is doing (pretraining: world model, updates, episodes)' }) }),
  error: Type.Union([Type.String(), Type.Null()]),
  checkpoint: Type.Union([Type.String(), Type.Null()], { description: 'path of the last checkpoint' }),
  lastMetrics: Type.Union([MetricsPoint, Type.Null()]),
});
export type RunStatus = Static<typeof RunStatus>;

export const JobInfo = Type.Object({ kind: Type.String(), description: Type.String(), options: Type.Unknown() });

// ── Stream events (WebSocket /api/stream and the run's event log) ───────────────────────────────
const RunRef = { run: Id };
export const MetricsEvent = Type.Object({ type: Type.Literal('metrics'), ...RunRef, metrics: MetricsPoint });
/** One control step of a real rollout: joint positions, the command, and body poses (nbody x 7) for the 3D view. */
export const RealFrame = Type.Object({
  type: Type.Literal('real'),
  ...RunRef,
  robot: Id,
  episode: Type.String(),
  t: Type.Integer(),
  q: Type.Array(Type.Number()),
  command: Type.Array(Type.Number()),
  poses: Type.Array(Type.Number()),
});
/** One step of an imagined rollout: joint positions (and poses) per ensemble member. */
export const ImaginedFrame = Type.Object({
  type: Type.Literal('imagined'),
  ...RunRef,
  robot: Id,
  episode: Type.String(),
  source: Type.Union([Type.Literal('sim-replay'), Type.Literal('world-model'), Type.Literal('identified-sim')], { description: "sim-replay: the real episode's actions replayed open-loop in a nominal sim; world-model: the learned model's rollout of the policy, one per ensemble member; identified-sim: the policy's rollout in the sim the calibration identified, where the trainer imagines" }),
  t: Type.Integer(),
  members: Type.Array(Type.Array(Type.Number()), { description: 'joint positions per member' }),
  poses: Type.Array(Type.Array(Type.Number()), { description: 'body poses per member, when the source has them' }),
});
export const EpisodeEvent = Type.Object({
  type: Type.Literal('episode'),
  ...RunRef,
  episode: Type.String(),
  phase: Type.Union([Type.Literal('start'), Type.Literal('end')]),
  steps: Type.Integer(),
  success: Type.Union([Type.Boolean(), Type.Null()]),
  status: Type.String(),
});
export const RunStateEvent = Type.Object({ type: Type.Literal('run'), status: RunStatus });
export const RobotEvent = Type.Object({ type: Type.Literal('robot'), status: RobotStatus });
export const StreamEvent = Type.Union([MetricsEvent, RealFrame, ImaginedFrame, EpisodeEvent, RunStateEvent, RobotEvent]);
export type StreamEvent = Static<typeof StreamEvent>;
export type RealFrame = Static<typeof RealFrame>;
export type ImaginedFrame = Static<typeof ImaginedFrame>;
/** What a job emits; the manager adds the run id. */
export type JobEvent = DistributiveOmit<Extract<StreamEvent, { run: string }>, 'run'>;
type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

export const StreamQuery = Type.Object({
  topics: Type.Optional(Type.String({ pattern: '^(metrics|real|imagined|episode|run|robot)(,(metrics|real|imagined|episode|run|robot))*$', description: 'comma-separated event types (default all)' })),
});

export const RolloutReply = Type.Object({ episode: Type.String(), real: Type.Array(RealFrame), imagined: Type.Array(ImaginedFrame) });

// ── Policies ────────────────────────────────────────────────────────────────────────────────────
export const PolicyInfo = Type.Object({
  id: Id,
  bytes: Type.Integer(),
  sha256: Type.String(),
  createdAt: Type.Number(),
  inputs: Type.Array(Type.Object({ name: Type.String(), shape: Type.Array(Type.Union([Type.Integer(), Type.String()])) })),
  outputs: Type.Array(Type.Object({ name: Type.String(), shape: Type.Array(Type.Union([Type.Integer(), Type.String()])) })),
  metadata: Type.Record(Type.String(), Type.String()),
});
export type PolicyInfo = Static<typeof PolicyInfo>;
export const DeployBody = Type.Object({ robot: Id, episodes: Type.Integer({ minimum: 1, maximum: 100000, default: 5 }) }, { additionalProperties: false });

// ── Episodes ────────────────────────────────────────────────────────────────────────────────────
export const EpisodeSummary = Type.Object({
  id: Type.String(),
  robot: Type.String(),
  policyVersion: Type.String(),
  hardwareProfile: Type.String(),
  task: Type.Union([Type.String(), Type.Null()]),
  instruction: Type.Union([Type.String(), Type.Null()]),
  startedAt: Type.Number(),
  status: Type.String(),
  steps: Type.Integer(),
  success: Type.Union([Type.Boolean(), Type.Null()]),
});
export type EpisodeSummary = Static<typeof EpisodeSummary>;
export const EpisodeListQuery = Type.Object({
  status: Type.Optional(Type.Union([Type.Literal('recording'), Type.Literal('complete'), Type.Literal('partial')])),
  robot: Type.Optional(Type.String({ maxLength: 200 })),
  limit: Type.Integer({ minimum: 1, maximum: 10000, default: 100 }),
});
export const EpisodeDetail = Type.Object({
  summary: EpisodeSummary,
  steps: Type.Array(
    Type.Object({
      seq: Type.Integer(),
      tObs: Type.Number(),
      position: Type.Array(Type.Number()),
      velocity: Type.Array(Type.Number()),
      action: Type.Array(Type.Number()),
      reward: Type.Number(),
      done: Type.Boolean(),
    }),
  ),
});
export const ExportQuery = Type.Object({ compression: Type.Union([Type.Literal('none'), Type.Literal('lz4'), Type.Literal('zstd')], { default: 'none', description: 'chunk compression; zstd needs the service on Node >= 22.15' }) });

/** Reply schemas keyed by status, with the shared error body on every failure a route can give. */
export function replies<T extends TSchema>(ok: T, ...errors: number[]): Record<number, TSchema> {
  return Object.fromEntries([[200, ok], ...errors.map((s) => [s, ErrorBody])]);
}
