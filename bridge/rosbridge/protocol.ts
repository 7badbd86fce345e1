// Every rosbridge v2 operation this bridge speaks, in one place: a union tagged by `op`, a type
// guard per variant, and a parser that turns any frame into a typed message or a clear error.
// Protocol: rosbridge_suite ROSBRIDGE_PROTOCOL.md (ros2 branch).

export interface Advertise { op: 'advertise'; id?: string; topic: string; type: string; latch?: boolean; queue_size?: number }
export interface Unadvertise { op: 'unadvertise'; id?: string; topic: string }
export interface Publish { op: 'publish'; id?: string; topic: string; msg: Record<string, unknown> }
export interface Subscribe { op: 'subscribe'; id?: string; topic: string; type?: string; throttle_rate?: number; queue_length?: number; fragment_size?: number; compression?: string }
export interface Unsubscribe { op: 'unsubscribe'; id?: string; topic: string }
export interface CallService { op: 'call_service'; id?: string; service: string; args?: Record<string, unknown>; fragment_size?: number; timeout?: number }
export interface ServiceResponse { op: 'service_response'; id?: string; service: string; values?: unknown; result: boolean }
export interface AdvertiseService { op: 'advertise_service'; service: string; type: string }
export interface UnadvertiseService { op: 'unadvertise_service'; service: string }
export interface AdvertiseAction { op: 'advertise_action'; action: string; type: string }
export interface UnadvertiseAction { op: 'unadvertise_action'; action: string }
export interface SendActionGoal { op: 'send_action_goal'; id: string; action: string; action_type: string; args?: Record<string, unknown>; feedback?: boolean }
export interface CancelActionGoal { op: 'cancel_action_goal'; id: string; action: string }
export interface ActionFeedback { op: 'action_feedback'; id: string; action: string; values: unknown }
export interface ActionResult { op: 'action_result'; id: string; action: string; values?: unknown; status: number; result: boolean }
export interface Fragment { op: 'fragment'; id: string; data: string; num: number; total: number }
export interface SetLevel { op: 'set_level'; id?: string; level: 'info' | 'warning' | 'error' | 'none' }
export interface Status { op: 'status'; id?: string; level: 'info' | 'warning' | 'error'; msg: string }

export type RosbridgeMessage =
  | Advertise | Unadvertise | Publish | Subscribe | Unsubscribe
  | CallService | ServiceResponse | AdvertiseService | UnadvertiseService
  | AdvertiseAction | UnadvertiseAction | SendActionGoal | CancelActionGoal | ActionFeedback | ActionResult
  | Fragment | SetLevel | Status;

export type Op = RosbridgeMessage['op'];

/** ROS 2 action_msgs/GoalStatus codes, as rosbridge reports them. */
export const GoalStatus = { UNKNOWN: 0, ACCEPTED: 1, EXECUTING: 2, CANCELING: 3, SUCCEEDED: 4, CANCELED: 5, ABORTED: 6 } as const;

type FieldKind = 'string' | 'number' | 'boolean' | 'object' | 'any' | 'int';
type FieldSpec = Record<string, [FieldKind, boolean]>; // [kind, required]

const S = (req = true): [FieldKind, boolean] => ['string', req];
const N = (req = true): [FieldKind, boolean] => ['number', req];
const I = (req = true): [FieldKind, boolean] => ['int', req];
const B = (req = true): [FieldKind, boolean] => ['boolean', req];
const O = (req = true): [FieldKind, boolean] => ['object', req];
const A = (req = true): [FieldKind, boolean] => ['any', req];

const SPECS: Record<Op, FieldSpec> = {
  advertise: { id: S(false), topic: S(), type: S(), latch: B(false), queue_size: I(false) },
  unadvertise: { id: S(false), topic: S() },
  publish: { id: S(false), topic: S(), msg: O() },
  subscribe: { id: S(false), topic: S(), type: S(false), throttle_rate: I(false), queue_length: I(false), fragment_size: I(false), compression: S(false) },
  unsubscribe: { id: S(false), topic: S() },
  call_service: { id: S(false), service: S(), args: O(false), fragment_size: I(false), timeout: N(false), compression: S(false), type: S(false) },
  service_response: { id: S(false), service: S(), values: A(false), result: B() },
  advertise_service: { service: S(), type: S() },
  unadvertise_service: { service: S() },
  advertise_action: { action: S(), type: S() },
  unadvertise_action: { action: S() },
  send_action_goal: { id: S(), action: S(), action_type: S(), args: O(false), feedback: B(false), fragment_size: I(false), compression: S(false) },
  cancel_action_goal: { id: S(), action: S() },
  action_feedback: { id: S(), action: S(), values: A() },
  action_result: { id: S(), action: S(), values: A(false), status: I(), result: B() },
  fragment: { id: S(), data: S(), num: I(), total: I() },
  set_level: { id: S(false), level: S() },
  status: { id: S(false), level: S(), msg: S() },
};

export const isOp = (op: unknown): op is Op => typeof op === 'string' && Object.hasOwn(SPECS, op);

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

/** Validates a decoded JSON value as one rosbridge message. */
export function validate(v: unknown): ParseResult {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return { ok: false, error: 'frame is not a JSON object' };
  const o = v as Record<string, unknown>;
  const id = typeof o.id === 'string' ? o.id : undefined;
  if (!isOp(o.op)) return { ok: false, error: `unknown op ${JSON.stringify(o.op)?.slice(0, 40) ?? 'undefined'}`, id };
  for (const [field, [kind, required]] of Object.entries(SPECS[o.op])) {
    const x = o[field];
    if (x === undefined || (x === null && !required)) {
      if (required) return { ok: false, error: `${o.op}: missing field '${field}'`, id };
      continue;
    }
    const bad =
      (kind === 'string' && typeof x !== 'string') ||
      (kind === 'number' && (typeof x !== 'number' || !Number.isFinite(x))) ||
      (kind === 'int' && !(typeof x === 'number' && Number.isInteger(x))) ||
      (kind === 'boolean' && typeof x !== 'boolean') ||
      (kind === 'object' && (x === null || typeof x !== 'object' || Array.isArray(x)));
    if (bad) return { ok: false, error: `${o.op}: field '${field}' must be ${kind === 'int' ? 'an integer' : `a ${kind}`}`, id };
  }
  if (o.op === 'fragment') {
    const f = o as unknown as Fragment;
    if (f.total < 1 || f.num < 0 || f.num >= f.total) return { ok: false, error: `fragment: num ${f.num} outside [0, ${f.total})`, id };
  }
  if (o.op === 'set_level' && !['info', 'warning', 'error', 'none'].includes(o.level as string)) return { ok: false, error: `set_level: unknown level '${String(o.level)}'`, id };
  return { ok: true, msg: o as unknown as RosbridgeMessage };
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

export const isPublish = (m: RosbridgeMessage): m is Publish => m.op === 'publish';
export const isSubscribe = (m: RosbridgeMessage): m is Subscribe => m.op === 'subscribe';
export const isCallService = (m: RosbridgeMessage): m is CallService => m.op === 'call_service';
export const isServiceResponse = (m: RosbridgeMessage): m is ServiceResponse => m.op === 'service_response';
export const isSendActionGoal = (m: RosbridgeMessage): m is SendActionGoal => m.op === 'send_action_goal';
export const isActionResult = (m: RosbridgeMessage): m is ActionResult => m.op === 'action_result';
export const isFragment = (m: RosbridgeMessage): m is Fragment => m.op === 'fragment';
export const isStatus = (m: RosbridgeMessage): m is Status => m.op === 'status';
