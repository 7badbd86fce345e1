// ROS 2 message shapes for JSON transports: definitions come from @foxglove/rosmsg-msgs-common
// (ROS 2 Jazzy), never hand-copied; `conform` fills omitted fields with defaults (as rosbridge does)
// and rejects values of the wrong type, naming the field.
import msgsCommon from '@foxglove/rosmsg-msgs-common';

interface FieldDef {
  name: string;
  type: string;
  isComplex?: boolean;
  isArray?: boolean;
  arrayLength?: number;
  isConstant?: boolean;
}

const DEFS = msgsCommon.ros2jazzy as unknown as Record<string, { name: string; definitions: FieldDef[] }>;

/** Services are not in the message package; the ones this project uses are defined here (SwitchController as of Jazzy). */
const SERVICES: Record<string, { request: FieldDef[]; response: FieldDef[] }> = {
  'std_srvs/Trigger': { request: [], response: [{ name: 'success', type: 'bool' }, { name: 'message', type: 'string' }] },
  'std_srvs/Empty': { request: [], response: [] },
  'controller_manager_msgs/SwitchController': {
    request: [
      { name: 'activate_controllers', type: 'string', isArray: true },
      { name: 'deactivate_controllers', type: 'string', isArray: true },
      { name: 'strictness', type: 'int32' },
      { name: 'activate_asap', type: 'bool' },
      { name: 'timeout', type: 'builtin_interfaces/Duration', isComplex: true },
    ],
    response: [{ name: 'ok', type: 'bool' }, { name: 'message', type: 'string' }],
  },
};

/** 'sensor_msgs/msg/JointState' and 'sensor_msgs/JointState' name the same type. */
export const normalizeType = (t: string): string => t.replace(/\/(msg|srv|action)\//, '/');

export function knownMessageType(t: string): boolean {
  return Object.hasOwn(DEFS, normalizeType(t));
}

const INT_RANGES: Record<string, [number, number]> = {
  int8: [-128, 127], uint8: [0, 255], byte: [0, 255], char: [0, 255],
  int16: [-32768, 32767], uint16: [0, 65535],
  int32: [-2147483648, 2147483647], uint32: [0, 4294967295],
  int64: [-Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER], uint64: [0, Number.MAX_SAFE_INTEGER],
};

export type ConformResult = { ok: true; value: Record<string, unknown> } | { ok: false; error: string };

class ConformError extends Error {}

function primitive(type: string, v: unknown, path: string): unknown {
  if (v === undefined || v === null) return defaultPrimitive(type);
  if (type === 'string' || type === 'wstring') {
    if (typeof v !== 'string') throw new ConformError(`${path} must be a string`);
    return v;
  }
  if (type === 'bool') {
    if (typeof v !== 'boolean') throw new ConformError(`${path} must be a boolean`);
    return v;
  }
  if (type === 'time' || type === 'duration') return complexFields(DEFS[type === 'time' ? 'builtin_interfaces/Time' : 'builtin_interfaces/Duration']!.definitions, v, path);
  if (typeof v !== 'number') throw new ConformError(`${path} must be a number (${type})`);
  if (type === 'float32' || type === 'float64') return v;
  const range = INT_RANGES[type];
  if (!range) throw new ConformError(`${path}: unsupported field type ${type}`);
  if (!Number.isInteger(v) || v < range[0] || v > range[1]) throw new ConformError(`${path} must be a ${type}, got ${v}`);
  return v;
}

function defaultPrimitive(type: string): unknown {
  if (type === 'string' || type === 'wstring') return '';
  if (type === 'bool') return false;
  if (type === 'time' || type === 'duration') return { sec: 0, nanosec: 0 };
  return 0;
}

function field(f: FieldDef, v: unknown, path: string): unknown {
  if (f.isArray) {
    // uint8[] travels as base64 text in rosbridge's JSON; decode it to numbers.
    if (typeof v === 'string' && (f.type === 'uint8' || f.type === 'byte' || f.type === 'char')) v = Array.from(Buffer.from(v, 'base64'));
    if (v === undefined || v === null) v = [];
    if (!Array.isArray(v)) throw new ConformError(`${path} must be an array`);
    if (f.arrayLength !== undefined && v.length !== f.arrayLength) throw new ConformError(`${path} must have ${f.arrayLength} elements, got ${v.length}`);
    return v.map((x, i) => (f.isComplex ? complex(f.type, x, `${path}[${i}]`) : primitive(f.type, x, `${path}[${i}]`)));
  }
  return f.isComplex ? complex(f.type, v, path) : primitive(f.type, v, path);
}

function complexFields(defs: FieldDef[], v: unknown, path: string): Record<string, unknown> {
  if (v === undefined || v === null) v = {};
  if (typeof v !== 'object' || Array.isArray(v)) throw new ConformError(`${path || 'message'} must be an object`);
  const o = v as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  const names = new Set<string>();
  for (const f of defs) {
    if (f.isConstant) continue;
    names.add(f.name);
    out[f.name] = field(f, o[f.name], path ? `${path}.${f.name}` : f.name);
  }
  for (const k of Object.keys(o)) if (!names.has(k)) throw new ConformError(`${path ? `${path}.` : ''}${k} is not a field of this message`);
  return out;
}

function complex(type: string, v: unknown, path: string): Record<string, unknown> {
  const def = DEFS[normalizeType(type)];
  if (!def) throw new ConformError(`${path || 'message'}: unknown message type ${type}`);
  return complexFields(def.definitions, v, path);
}

/** Checks `msg` against ROS type `type`, filling omitted fields with their defaults. */
export function conform(type: string, msg: unknown): ConformResult {
  try {
    return { ok: true, value: complex(type, msg, '') };
  } catch (e) {
    if (e instanceof ConformError) return { ok: false, error: `${type}: ${e.message}` };
    throw e;
  }
}

export function conformService(type: string, part: 'request' | 'response', v: unknown): ConformResult {
  const s = SERVICES[normalizeType(type)];
  if (!s) return { ok: false, error: `unknown service type ${type}` };
  try {
    return { ok: true, value: complexFields(s[part], v, '') };
  } catch (e) {
    if (e instanceof ConformError) return { ok: false, error: `${type} ${part}: ${e.message}` };
    throw e;
  }
}

/** builtin_interfaces/Time from seconds. */
export function toRosTime(seconds: number): { sec: number; nanosec: number } {
  const sec = Math.floor(seconds);
  return { sec, nanosec: Math.min(999_999_999, Math.round((seconds - sec) * 1e9)) };
}

export const fromRosTime = (t: { sec: number; nanosec: number }): number => t.sec + t.nanosec * 1e-9;
