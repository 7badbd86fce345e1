// Every rosbridge v2 operation this bridge speaks, defined once: a TypeBox schema per op, from which
// the message types (a union tagged by `op`) and the validation of incoming frames both derive.
// Protocol: rosbridge_suite ROSBRIDGE_PROTOCOL.md (ros2 branch).

import { Type, type Static, type TProperties, type TSchema } from '@sinclair/typebox';
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler';
import { ValueErrorType, type ValueError } from '@sinclair/typebox/errors';
import { problem } from '../../common/schema.js';

const Str = Type.String();
const Int = (o: { minimum?: number } = {}) => Type.Integer(o);
const Bool = Type.Boolean();
/** A JSON object (ROS message, service args): its fields are checked against the ROS type elsewhere (ros/msgs.ts). */
const Obj = Type.Record(Type.String(), Type.Unknown(), { expected: 'an object' });
const Any = Type.Unknown();
/** An optional field; rosbridge clients send null for an absent one as often as they leave it out. */
const Opt = <T extends TSchema>(t: T) => Type.Optional(Type.Union([t, Type.Null()]));

/** One op: `{op: name, ...fields}`. Extra fields are allowed, as rosbridge_server allows them. */
const op = <N extends string, P extends TProperties>(name: N, fields: P) => Type.Object({ op: Type.Literal(name), ...fields });

const AdvertiseSchema = op('advertise', { id: Opt(Str), topic: Str, type: Str, latch: Opt(Bool), queue_size: Opt(Int()) });
const UnadvertiseSchema = op('unadvertise', { id: Opt(Str), topic: Str });
const PublishSchema = op('publish', { id: Opt(Str), topic: Str, msg: Obj });
const SubscribeSchema = op('subscribe', {
  id: Opt(Str), topic: Str, type: Opt(Str), throttle_rate: Opt(Int()), queue_length: Opt(Int()), fragment_size: Opt(Int()), compression: Opt(Str),
});
const UnsubscribeSchema = op('unsubscribe', { id: Opt(Str), topic: Str });
const CallServiceSchema = op('call_service', {
  id: Opt(Str), service: Str, args: Opt(Obj), fragment_size: Opt(Int()), timeout: Opt(Type.Number()), compression: Opt(Str), type: Opt(Str),
});
const ServiceResponseSchema = op('service_response', { id: Opt(Str), service: Str, values: Type.Optional(Any), result: Bool });
const AdvertiseServiceSchema = op('advertise_service', { service: Str, type: Str });
const UnadvertiseServiceSchema = op('unadvertise_service', { service: Str });
const AdvertiseActionSchema = op('advertise_action', { action: Str, type: Str });
const UnadvertiseActionSchema = op('unadvertise_action', { action: Str });
const SendActionGoalSchema = op('send_action_goal', {
  id: Str, action: Str, action_type: Str, args: Opt(Obj), feedback: Opt(Bool), fragment_size: Opt(Int()), compression: Opt(Str),
});
const CancelActionGoalSchema = op('cancel_action_goal', { id: Str, action: Str });
const ActionFeedbackSchema = op('action_feedback', { id: Str, action: Str, values: Any });
const ActionResultSchema = op('action_result', { id: Str, action: Str, values: Type.Optional(Any), status: Int(), result: Bool });
/** One piece of a larger frame; `num` < `total` is checked after the schema (validate). */
const FragmentSchema = op('fragment', { id: Str, data: Str, num: Int({ minimum: 0 }), total: Int({ minimum: 1 }) });
const SetLevelSchema = op('set_level', { id: Opt(Str), level: Type.Union([Type.Literal('info'), Type.Literal('warning'), Type.Literal('error'), Type.Literal('none')]) });
/** rosbridge v2 auth (rosauth): `mac` = sha512 hex of secret + client + dest + rand + t + level + end; t and end in seconds. */
const AuthSchema = op('auth', { mac: Str, client: Str, dest: Str, rand: Str, t: Type.Number(), level: Str, end: Type.Number() });
const StatusSchema = op('status', { id: Opt(Str), level: Type.Union([Type.Literal('info'), Type.Literal('warning'), Type.Literal('error')]), msg: Str });

const SCHEMAS = [
  AdvertiseSchema, UnadvertiseSchema, PublishSchema, SubscribeSchema, UnsubscribeSchema,
  CallServiceSchema, ServiceResponseSchema, AdvertiseServiceSchema, UnadvertiseServiceSchema,
  AdvertiseActionSchema, UnadvertiseActionSchema, SendActionGoalSchema, CancelActionGoalSchema, ActionFeedbackSchema, ActionResultSchema,
  FragmentSchema, SetLevelSchema, StatusSchema, AuthSchema,
] as const;

export type Advertise = Static<typeof AdvertiseSchema>;
export type Unadvertise = Static<typeof UnadvertiseSchema>;
export type Publish = Static<typeof PublishSchema>;
export type Subscribe = Static<typeof SubscribeSchema>;
export type Unsubscribe = Static<typeof UnsubscribeSchema>;
export type CallService = Static<typeof CallServiceSchema>;
export type ServiceResponse = Static<typeof ServiceResponseSchema>;
export type AdvertiseService = Static<typeof AdvertiseServiceSchema>;
export type UnadvertiseService = Static<typeof UnadvertiseServiceSchema>;
export type AdvertiseAction = Static<typeof AdvertiseActionSchema>;
export type UnadvertiseAction = Static<typeof UnadvertiseActionSchema>;
export type SendActionGoal = Static<typeof SendActionGoalSchema>;
export type CancelActionGoal = Static<typeof CancelActionGoalSchema>;
export type ActionFeedback = Static<typeof ActionFeedbackSchema>;
export type ActionResult = Static<typeof ActionResultSchema>;
export type Fragment = Static<typeof FragmentSchema>;
export type SetLevel = Static<typeof SetLevelSchema>;
export type Status = Static<typeof StatusSchema>;
export type Auth = Static<typeof AuthSchema>;

/** Any rosbridge message, in either direction; narrowed by `switch (m.op)`. */
export type RosbridgeMessage = Static<(typeof SCHEMAS)[number]>;
export type Op = RosbridgeMessage['op'];

/** Every op, in protocol order. */
export const OPS: readonly Op[] = SCHEMAS.map((s) => s.properties.op.const);

const CHECKS = new Map<string, TypeCheck<TSchema>>(SCHEMAS.map((s) => [s.properties.op.const, TypeCompiler.Compile(s)]));

/** ROS 2 action_msgs/GoalStatus codes, as rosbridge reports them. */
export const GoalStatus = { UNKNOWN: 0, ACCEPTED: 1, EXECUTING: 2, CANCELING: 3, SUCCEEDED: 4, CANCELED: 5, ABORTED: 6 } as const;

export const isOp = (op: unknown): op is Op => typeof op === 'string' && CHECKS.has(op);

export interface ParseLimits {
  /** Largest frame accepted, in UTF-16 code units (≈ bytes for JSON). */
  maxFrameLength: number;
  /** Deepest nesting of objects/arrays accepted. */
  maxDepth: number;
}

export const DEFAULT_LIMITS: ParseLimits = { maxFrameLength: 16 * 1024 * 1024, maxDepth: 64 };

export type ParseResult = { ok: true; msg: RosbridgeMessage } | { ok: false; error: string; id?: string };

/** Depth of nested containers, stopping early past `limit` (so a hostile frame costs O(limit) stack). */
function depthExceeds(v: unknown, limit: number): boolean {
  const stack: Array<[unknown, number]> = [[v, 1]];
  while (stack.length) {
    const [x, d] = stack.pop()!;
    if (x === null || typeof x !== 'object') continue;
    if (d > limit) return true;
    for (const c of Array.isArray(x) ? x : Object.values(x)) if (c !== null && typeof c === 'object') stack.push([c, d + 1]);
  }
  return false;
}

/** The schema's first complaint as one line naming the op and the field. */
function describe(op: Op, e: ValueError): string {
  const field = e.path.slice(1).replace(/\//g, '.');
  return e.type === ValueErrorType.ObjectRequiredProperty ? `${op}: missing field '${field}'` : `${op}: field '${field}' ${problem(e)}`;
}

/** Validates a decoded JSON value as one rosbridge message. */
export function validate(v: unknown): ParseResult {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return { ok: false, error: 'frame is not a JSON object' };
  const o = v as Record<string, unknown>;
  const id = typeof o.id === 'string' ? o.id : undefined;
  if (!isOp(o.op)) return { ok: false, error: `unknown op ${JSON.stringify(o.op)?.slice(0, 40) ?? 'undefined'}`, id };
  const op = o.op;
  const check = CHECKS.get(op)!;
  if (!check.Check(o)) return { ok: false, error: describe(op, check.Errors(o).First()!), id };
  const m = o as RosbridgeMessage;
  if (m.op === 'fragment' && m.num >= m.total) return { ok: false, error: `fragment: num ${m.num} outside [0, ${m.total})`, id };
  return { ok: true, msg: m };
}

/** Parses one text frame; never throws. */
export function parseFrame(text: string, limits: ParseLimits = DEFAULT_LIMITS): ParseResult {
  if (text.length > limits.maxFrameLength) return { ok: false, error: `frame of ${text.length} bytes exceeds the ${limits.maxFrameLength}-byte limit` };
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    return { ok: false, error: `invalid JSON: ${(e as Error).message.slice(0, 120)}` };
  }
  if (depthExceeds(v, limits.maxDepth)) return { ok: false, error: `frame nests deeper than ${limits.maxDepth} levels` };
  return validate(v);
}
