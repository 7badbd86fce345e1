// Every MQTT payload of the transport: a union tagged by `type`, TypeBox schemas compiled once,
// a guard per variant, and parsePayload, the one entry point for bytes from the network.
// Payloads are JSON; arrays of numbers are plain JSON arrays, images base64.

import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler';
import { parseTopic, type RobotChannel } from './topics.js';

// Bounds sized for real robots (a 7-DoF arm with hands and tactile features fits easily) and
// small enough that one hostile message cannot make the validator or the store do much work.
const MAX_JOINTS = 256;
const MAX_FEATURES = 4096;
const MAX_ID = 256;
const MAX_TEXT = 4096;
/** A 1920x1080 rgb8 frame in base64 is ~8.3 MB. */
const MAX_IMAGE_B64 = 9_000_000;

export const DEFAULT_MAX_BYTES = 10 * 1024 * 1024;
export const DEFAULT_MAX_DEPTH = 16;

const Id = Type.String({ minLength: 1, maxLength: MAX_ID });
const Num = Type.Number(); // TypeBox rejects NaN and ±Infinity by default (1e999 parses to Infinity)
const Stamp = Type.Number({ minimum: 0 });
const Seq = Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER });
const JointArray = Type.Array(Num, { maxItems: MAX_JOINTS });
/** ±Infinity is not JSON; an unlimited bound travels as null. */
const Bound = Type.Union([Num, Type.Null()]);

const ImageSchema = Type.Object({
  width: Type.Integer({ minimum: 1, maximum: 16384 }),
  height: Type.Integer({ minimum: 1, maximum: 16384 }),
  encoding: Type.Union([Type.Literal('rgb8'), Type.Literal('jpeg'), Type.Literal('png')]),
  data: Type.String({ maxLength: MAX_IMAGE_B64, pattern: '^[A-Za-z0-9+/]*={0,2}$' }),
});

/** A RobotObservation on the wire. */
const ObsSchema = Type.Object({
  stamp: Stamp,
  position: JointArray,
  velocity: JointArray,
  features: Type.Optional(Type.Array(Num, { maxItems: MAX_FEATURES })),
  image: Type.Optional(ImageSchema),
  instruction: Type.Optional(Type.String({ maxLength: MAX_TEXT })),
});

const StateSchema = Type.Composite([Type.Object({ type: Type.Literal('state') }), ObsSchema]);

/** The outcome of one control step the robot took, published after it (as a ROS robot's outcome_topic). */
const OutcomeSchema = Type.Object({
  type: Type.Literal('outcome'),
  /** Robot wall clock, ms since the epoch. */
  stamp: Stamp,
  /** Control steps since the episode's reset. */
  t: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }),
  reward: Num,
  success: Type.Boolean(),
  /** The task ended (success or failure). */
  terminated: Type.Boolean(),
  /** The episode reached its step limit. */
  truncated: Type.Boolean(),
});

const CommandSchema = Type.Object({
  type: Type.Literal('command'),
  /** Random per sender instance: seq restarts at 0 when the service restarts. */
  session: Id,
  seq: Seq,
  /** Sender wall clock, ms since the epoch. */
  stamp: Stamp,
  /** Sender wall clock after which the command must not be applied (clocks NTP-synchronized). */
  deadline: Stamp,
  action: Type.Array(Num, { minItems: 1, maxItems: MAX_JOINTS }),
});

const RequestSchema = Type.Object({
  type: Type.Literal('request'),
  id: Id,
  op: Type.Union([Type.Literal('reset'), Type.Literal('estop')]),
  /** reset only: reproduce the start state this seed selects (Robot.reset({seed})). */
  seed: Type.Optional(Type.Integer({ minimum: 0, maximum: 0xffffffff })),
  stamp: Stamp,
  /** A reset arriving after this (sender wall clock, ms) is refused: the caller gave up. E-stop ignores it. */
  deadline: Stamp,
});

const ReplySchema = Type.Object({
  type: Type.Literal('reply'),
  id: Id,
  op: Type.Union([Type.Literal('reset'), Type.Literal('estop')]),
  ok: Type.Boolean(),
  error: Type.Optional(Type.String({ maxLength: MAX_TEXT })),
  obs: Type.Optional(ObsSchema),
});

const SpecSchema = Type.Object({
  type: Type.Literal('spec'),
  robotId: Id,
  /** The robot publishes the outcome of each control step on its outcome channel (training scores its episodes by it). */
  outcome: Type.Optional(Type.Boolean()),
  spec: Type.Object({
    name: Id,
    joints: Type.Array(Id, { maxItems: MAX_JOINTS }),
    /** Per joint: 'rad' or 'm' (the observation layout, common/layout.ts); absent: all 'rad'. */
    jointUnits: Type.Optional(Type.Array(Type.Union([Type.Literal('rad'), Type.Literal('m')]), { maxItems: MAX_JOINTS })),
    positionLimits: Type.Array(Type.Tuple([Bound, Bound]), { maxItems: MAX_JOINTS }),
    velocityLimits: Type.Array(Num, { maxItems: MAX_JOINTS }),
    action: Type.Object({
      kind: Type.Union([Type.Literal('joint_position'), Type.Literal('joint_velocity'), Type.Literal('normalized')]),
      names: Type.Array(Id, { maxItems: MAX_JOINTS }),
      low: Type.Array(Num, { maxItems: MAX_JOINTS }),
      high: Type.Array(Num, { maxItems: MAX_JOINTS }),
    }),
    controlHz: Type.Number({ exclusiveMinimum: 0, maximum: 100_000 }),
    features: Type.Optional(Type.Array(Id, { maxItems: MAX_FEATURES })),
    featureUnits: Type.Optional(Type.Array(Id, { maxItems: MAX_FEATURES })),
    /** The features that measure the world rather than the robot (common/robot.ts sceneFeatures). */
    sceneFeatures: Type.Optional(Type.Array(Id, { maxItems: MAX_FEATURES })),
    camera: Type.Optional(
      Type.Object({
        width: Type.Integer({ minimum: 1, maximum: 16384 }),
        height: Type.Integer({ minimum: 1, maximum: 16384 }),
        encoding: Type.Union([Type.Literal('rgb8'), Type.Literal('jpeg'), Type.Literal('png')]),
      }),
    ),
  }),
});

const MetaSchema = Type.Object({
  id: Id,
  robot: Id,
  policyVersion: Type.String({ maxLength: MAX_ID }),
  hardwareProfile: Type.String({ maxLength: MAX_ID }),
  task: Type.Optional(Type.String({ maxLength: MAX_ID })),
  instruction: Type.Optional(Type.String({ maxLength: MAX_TEXT })),
  startedAt: Stamp,
  extra: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
});

const EpisodeBeginSchema = Type.Object({ type: Type.Literal('episode_begin'), meta: MetaSchema });

const EpisodeStepSchema = Type.Object({
  type: Type.Literal('episode_step'),
  episodeId: Id,
  seq: Seq,
  /** Highest seq the uploader already saw acknowledged (-1: none): lets a restarted service resume acking. */
  ackedUpTo: Type.Integer({ minimum: -1, maximum: Number.MAX_SAFE_INTEGER }),
  tObs: Num,
  tAct: Num,
  obs: ObsSchema,
  action: Type.Array(Num, { maxItems: MAX_JOINTS }),
  reward: Num,
  done: Type.Boolean(),
  success: Type.Optional(Type.Boolean()),
});

const EpisodeEndSchema = Type.Object({
  type: Type.Literal('episode_end'),
  episodeId: Id,
  /** Number of steps, so the service knows when it holds all of them. */
  steps: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }),
  status: Type.Union([Type.Literal('complete'), Type.Literal('partial')]),
  /** As on steps: once every step is acknowledged, only the end record still carries it. */
  ackedUpTo: Type.Integer({ minimum: -1, maximum: Number.MAX_SAFE_INTEGER }),
});

const AckSchema = Type.Object({
  type: Type.Literal('ack'),
  episodeId: Id,
  /** Every seq <= upTo is stored (-1: only the episode's meta). */
  upTo: Type.Integer({ minimum: -1, maximum: Number.MAX_SAFE_INTEGER }),
  /** All steps and the end record are stored. */
  complete: Type.Boolean(),
});

const RolloutJobSchema = Type.Object({
  type: Type.Literal('rollout_job'),
  jobId: Id,
  policyVersion: Type.String({ maxLength: MAX_ID }),
  seed: Type.Integer(),
  horizon: Type.Integer({ minimum: 1, maximum: 1_000_000 }),
  params: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
});

const RolloutResultSchema = Type.Object({
  type: Type.Literal('rollout_result'),
  jobId: Id,
  workerId: Id,
  ok: Type.Boolean(),
  /** Absent when the rollout failed: an unscored rollout is excluded, never scored 0. */
  score: Type.Optional(Num),
  steps: Type.Integer({ minimum: 0 }),
  error: Type.Optional(Type.String({ maxLength: MAX_TEXT })),
});

export type WireObs = Static<typeof ObsSchema>;
export type StateMsg = Static<typeof StateSchema>;
export type OutcomeMsg = Static<typeof OutcomeSchema>;
export type CommandMsg = Static<typeof CommandSchema>;
export type RequestMsg = Static<typeof RequestSchema>;
export type ReplyMsg = Static<typeof ReplySchema>;
export type SpecMsg = Static<typeof SpecSchema>;
export type WireSpec = SpecMsg['spec'];
export type WireMeta = Static<typeof MetaSchema>;
export type EpisodeBeginMsg = Static<typeof EpisodeBeginSchema>;
export type EpisodeStepMsg = Static<typeof EpisodeStepSchema>;
export type EpisodeEndMsg = Static<typeof EpisodeEndSchema>;
export type AckMsg = Static<typeof AckSchema>;
export type RolloutJobMsg = Static<typeof RolloutJobSchema>;
export type RolloutResultMsg = Static<typeof RolloutResultSchema>;

export type MqttMessage =
  | StateMsg
  | OutcomeMsg
  | CommandMsg
  | RequestMsg
  | ReplyMsg
  | SpecMsg
  | EpisodeBeginMsg
  | EpisodeStepMsg
  | EpisodeEndMsg
  | AckMsg
  | RolloutJobMsg
  | RolloutResultMsg;

export type MessageType = MqttMessage['type'];

const SCHEMAS: Record<MessageType, TSchema> = {
  state: StateSchema,
  outcome: OutcomeSchema,
  command: CommandSchema,
  request: RequestSchema,
  reply: ReplySchema,
  spec: SpecSchema,
  episode_begin: EpisodeBeginSchema,
  episode_step: EpisodeStepSchema,
  episode_end: EpisodeEndSchema,
  ack: AckSchema,
  rollout_job: RolloutJobSchema,
  rollout_result: RolloutResultSchema,
};

const CHECKS = Object.fromEntries(
  Object.entries(SCHEMAS).map(([k, s]) => [k, TypeCompiler.Compile(s)]),
) as Record<MessageType, TypeCheck<TSchema>>;

/** Which message types each topic may carry; anything else on it is an error. */
const ROBOT_CHANNEL_TYPES: Record<RobotChannel, readonly MessageType[]> = {
  state: ['state'],
  outcome: ['outcome'],
  cmd: ['command', 'request'],
  reply: ['reply'],
  spec: ['spec'],
  episodes: ['episode_begin', 'episode_step', 'episode_end'],
  ack: ['ack'],
};

// ---------------------------------------------------------------- guards

export const isState = (m: MqttMessage): m is StateMsg => m.type === 'state';
export const isOutcome = (m: MqttMessage): m is OutcomeMsg => m.type === 'outcome';
export const isCommand = (m: MqttMessage): m is CommandMsg => m.type === 'command';
export const isRequest = (m: MqttMessage): m is RequestMsg => m.type === 'request';
export const isReply = (m: MqttMessage): m is ReplyMsg => m.type === 'reply';
export const isSpec = (m: MqttMessage): m is SpecMsg => m.type === 'spec';
export const isEpisodeBegin = (m: MqttMessage): m is EpisodeBeginMsg => m.type === 'episode_begin';
export const isEpisodeStep = (m: MqttMessage): m is EpisodeStepMsg => m.type === 'episode_step';
export const isEpisodeEnd = (m: MqttMessage): m is EpisodeEndMsg => m.type === 'episode_end';
export const isAck = (m: MqttMessage): m is AckMsg => m.type === 'ack';
export const isRolloutJob = (m: MqttMessage): m is RolloutJobMsg => m.type === 'rollout_job';
export const isRolloutResult = (m: MqttMessage): m is RolloutResultMsg => m.type === 'rollout_result';

// ---------------------------------------------------------------- parse / encode

export type ParseResult = { ok: true; msg: MqttMessage } | { ok: false; error: string };

export interface ParseLimits {
  maxBytes?: number;
  maxDepth?: number;
}

/**
 * Decodes and validates one payload; never throws. The size and nesting caps run on the raw
 * bytes, before JSON.parse, so a hostile payload costs one linear scan.
 */
export function parsePayload(topic: string, bytes: Uint8Array, limits: ParseLimits = {}): ParseResult {
  const maxBytes = limits.maxBytes ?? DEFAULT_MAX_BYTES;
  const maxDepth = limits.maxDepth ?? DEFAULT_MAX_DEPTH;
  const where = `MQTT payload on ${JSON.stringify(topic.length > 200 ? topic.slice(0, 200) + '…' : topic)}`;
  try {
    const route = parseTopic(topic);
    if (!route) return fail(where, 'unknown topic');
    if (!(bytes instanceof Uint8Array)) return fail(where, 'payload is not bytes');
    if (bytes.length > maxBytes) return fail(where, `${bytes.length} bytes exceeds the cap of ${maxBytes}`);
    if (bytes.length === 0) return fail(where, 'empty payload');
    const depth = jsonDepth(bytes, maxDepth);
    if (depth > maxDepth) return fail(where, `JSON nesting deeper than ${maxDepth}`);
    let text: string;
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    } catch {
      return fail(where, 'payload is not valid UTF-8');
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (e) {
      return fail(where, `invalid JSON (${(e as Error).message.slice(0, 120)})`);
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      return fail(where, 'payload is not a JSON object');
    }
    const type = (value as { type?: unknown }).type;
    if (type === undefined) return fail(where, 'no "type" field');
    if (typeof type !== 'string' || !Object.hasOwn(CHECKS, type)) {
      return fail(where, `unknown message type ${JSON.stringify(type).slice(0, 60)}`);
    }
    const allowed = route.kind === 'robot' ? ROBOT_CHANNEL_TYPES[route.channel] : route.kind === 'jobs' ? ['rollout_job'] : ['rollout_result'];
    if (!allowed.includes(type as MessageType)) return fail(where, `message type "${type}" is not allowed on this topic`);
    const check = CHECKS[type as MessageType];
    if (!check.Check(value)) {
      const first = check.Errors(value).First();
      const path = first?.path || '/';
      return fail(where, `"${type}" message invalid at ${path}: ${first?.message ?? 'schema mismatch'}`);
    }
    return { ok: true, msg: value as MqttMessage };
  } catch (e) {
    // Defensive: a validator bug must not take down the subscriber.
    return fail(where, `internal parse error: ${(e as Error)?.message ?? String(e)}`);
  }
}

function fail(where: string, problem: string): ParseResult {
  return { ok: false, error: `${where}: ${problem}` };
}

/** Maximum bracket nesting of JSON text, counting outside strings; stops early past `limit`. */
function jsonDepth(bytes: Uint8Array, limit: number): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i];
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped byte
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      depth++;
      if (depth > max) {
        max = depth;
        if (max > limit) return max;
      }
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return max;
}

export function encodePayload(msg: MqttMessage): Buffer {
  return Buffer.from(JSON.stringify(msg));
}
