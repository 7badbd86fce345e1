// Step validation for the episode store. The store records what happened (NaN in an action or a
// reward is stored as-is: a policy that emitted NaN is worth seeing), but a step whose *shape*
// disagrees with the episode's first step, or whose fields have the wrong types, is refused.

import type { Image } from '../../common/robot.js';
import type { EpisodeMeta, EpisodeStep } from '../types.js';

export type EpisodeErrorCode =
  | 'BAD_META'
  | 'BAD_STEP'
  | 'SHAPE_MISMATCH'
  | 'NOT_RECORDING'
  | 'META_MISMATCH'
  | 'NOT_FOUND'
  | 'SCHEMA_TOO_NEW'
  | 'DUPLICATE_EPISODE';

/** Every refusal of the store; `field` names the offending field (e.g. `step.obs.position`). */
export class EpisodeStoreError extends Error {
  constructor(
    readonly code: EpisodeErrorCode,
    readonly field: string | undefined,
    message: string,
  ) {
    super(message);
    this.name = 'EpisodeStoreError';
  }
}

/** Per-episode array lengths, fixed by the first stored step. */
export interface StepShape {
  joints: number;
  action: number;
  /** -1 when the episode's steps carry no features. */
  features: number;
}

const fail = (code: EpisodeErrorCode, field: string, what: string, episodeId?: string): never => {
  const where = episodeId === undefined ? '' : ` (episode ${episodeId})`;
  throw new EpisodeStoreError(code, field, `${field}: ${what}${where}`);
};

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;

export function validateMeta(meta: unknown): asserts meta is EpisodeMeta {
  if (!isObject(meta)) fail('BAD_META', 'meta', 'must be an object');
  const m = meta as Record<string, unknown>;
  for (const key of ['id', 'robot', 'policyVersion', 'hardwareProfile'] as const) {
    if (typeof m[key] !== 'string') fail('BAD_META', `meta.${key}`, `must be a string, got ${typeof m[key]}`);
  }
  if ((m.id as string).length === 0) fail('BAD_META', 'meta.id', 'must not be empty');
  for (const key of ['task', 'instruction'] as const) {
    if (m[key] !== undefined && typeof m[key] !== 'string') fail('BAD_META', `meta.${key}`, 'must be a string when given');
  }
  if (typeof m.startedAt !== 'number' || !Number.isFinite(m.startedAt)) {
    fail('BAD_META', 'meta.startedAt', `must be a finite number (ms since the epoch), got ${String(m.startedAt)}`);
  }
  if (m.extra !== undefined && (!isObject(m.extra) || Array.isArray(m.extra))) {
    fail('BAD_META', 'meta.extra', 'must be a plain object when given');
  }
}

function checkTyped(v: unknown, ctor: Float64ArrayConstructor | Float32ArrayConstructor, field: string, id: string): void {
  if (!(v instanceof ctor)) fail('BAD_STEP', field, `must be a ${ctor.name}, got ${describe(v)}`, id);
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (ArrayBuffer.isView(v)) return v.constructor.name;
  if (Array.isArray(v)) return 'Array';
  return typeof v;
}

const finite = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

export function validateImage(img: unknown, field: string, id: string): asserts img is Image {
  if (!isObject(img)) fail('BAD_STEP', field, 'must be an object', id);
  const i = img as Record<string, unknown>;
  for (const k of ['width', 'height'] as const) {
    if (!Number.isInteger(i[k]) || (i[k] as number) <= 0) fail('BAD_STEP', `${field}.${k}`, `must be a positive integer, got ${String(i[k])}`, id);
  }
  if (i.encoding !== 'rgb8' && i.encoding !== 'jpeg' && i.encoding !== 'png') {
    fail('BAD_STEP', `${field}.encoding`, `must be rgb8, jpeg or png, got ${String(i.encoding)}`, id);
  }
  if (!(i.data instanceof Uint8Array)) fail('BAD_STEP', `${field}.data`, `must be a Uint8Array, got ${describe(i.data)}`, id);
  const data = i.data as Uint8Array;
  if (i.encoding === 'rgb8' && data.length !== (i.width as number) * (i.height as number) * 3) {
    fail('BAD_STEP', `${field}.data`, `rgb8 ${String(i.width)}x${String(i.height)} needs ${(i.width as number) * (i.height as number) * 3} bytes, got ${data.length}`, id);
  }
}

/**
 * Checks one step's types and, when `shape` is known (the episode already has a step), its array
 * lengths. Returns the shape this step implies.
 */
export function validateStep(step: unknown, shape: StepShape | undefined, id: string): StepShape {
  if (!isObject(step)) fail('BAD_STEP', 'step', 'must be an object', id);
  const s = step as unknown as EpisodeStep;
  if (!Number.isSafeInteger(s.seq) || s.seq < 0) fail('BAD_STEP', 'step.seq', `must be a non-negative integer, got ${String(s.seq)}`, id);
  // Stamps order the episode and become MCAP log times, so they must be real numbers.
  if (!finite(s.tObs)) fail('BAD_STEP', 'step.tObs', `must be a finite number, got ${String(s.tObs)}`, id);
  if (!finite(s.tAct)) fail('BAD_STEP', 'step.tAct', `must be a finite number, got ${String(s.tAct)}`, id);
  if (typeof s.reward !== 'number') fail('BAD_STEP', 'step.reward', `must be a number, got ${describe(s.reward)}`, id);
  if (typeof s.done !== 'boolean') fail('BAD_STEP', 'step.done', `must be a boolean, got ${describe(s.done)}`, id);
  if (s.success !== undefined && typeof s.success !== 'boolean') fail('BAD_STEP', 'step.success', 'must be a boolean when given', id);
  checkTyped(s.action, Float32Array, 'step.action', id);
  if (!isObject(s.obs)) fail('BAD_STEP', 'step.obs', 'must be an object', id);
  const o = s.obs;
  if (!finite(o.stamp)) fail('BAD_STEP', 'step.obs.stamp', `must be a finite number, got ${String(o.stamp)}`, id);
  checkTyped(o.position, Float64Array, 'step.obs.position', id);
  checkTyped(o.velocity, Float64Array, 'step.obs.velocity', id);
  if (o.features !== undefined) checkTyped(o.features, Float32Array, 'step.obs.features', id);
  if (o.image !== undefined) validateImage(o.image, 'step.obs.image', id);
  if (o.instruction !== undefined && typeof o.instruction !== 'string') fail('BAD_STEP', 'step.obs.instruction', 'must be a string when given', id);
  if (o.velocity.length !== o.position.length) {
    fail('SHAPE_MISMATCH', 'step.obs.velocity', `has ${o.velocity.length} values but step.obs.position has ${o.position.length}`, id);
  }
  const mine: StepShape = { joints: o.position.length, action: s.action.length, features: o.features?.length ?? -1 };
  if (shape !== undefined) {
    if (mine.joints !== shape.joints) fail('SHAPE_MISMATCH', 'step.obs.position', `has ${mine.joints} joints, the episode's first step had ${shape.joints}`, id);
    if (mine.action !== shape.action) fail('SHAPE_MISMATCH', 'step.action', `has ${mine.action} values, the episode's first step had ${shape.action}`, id);
    if (mine.features !== shape.features) {
      const n = (k: number) => (k < 0 ? 'no features' : `${k} features`);
      fail('SHAPE_MISMATCH', 'step.obs.features', `has ${n(mine.features)}, the episode's first step had ${n(shape.features)}`, id);
    }
  }
  return mine;
}
