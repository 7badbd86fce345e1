// The one declared observation layout. A robot (or a sim task) declares its joints (name, unit) and
// its features (name, unit); the observation vector is always
//   [joint positions…, joint velocities…, features…]
// in declared order. Everything that builds, splits, stores or compares observation vectors — the
// sim robot, the stand-in, the ROS and MQTT adapters, OnnxPolicy, the trainers and the world model —
// goes through this module; nothing matches entries by name.
import { Type, type Static } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import type { RobotDeclaration, RobotObservation } from './robot.js';

/** Revolute joints are measured in radians, prismatic joints in metres. */
export type JointUnit = 'rad' | 'm';

export interface LayoutJoint {
  readonly name: string;
  readonly unit: JointUnit;
}

export interface LayoutFeature {
  readonly name: string;
  /** SI unit ('m', 'm/s', 'rad'); '1' for dimensionless values such as a one-hot. */
  readonly unit: string;
  /**
   * A measurement of the world, not of the robot: a target, an object, a goal, an offset to a goal. Absent: the
   * robot's own state (a tip derived from its joints, a gripper, the commands it sent). What a policy over the
   * robot's own state leaves out (robotEntries); not part of what layoutMismatch compares.
   */
  readonly scene?: true;
}

export interface ObservationLayout {
  readonly joints: readonly LayoutJoint[];
  readonly features: readonly LayoutFeature[];
}

/** One entry of the observation vector. */
export interface LayoutEntry {
  /** The joint or feature name. */
  name: string;
  kind: 'position' | 'velocity' | 'feature';
  unit: string;
  /** `shoulder position (rad)`, `cube x (m)`: for display and space descriptions, never for lookup. */
  label: string;
}

/** The metadata_props key of an exported policy that holds its layout as JSON. */
export const OBSERVATION_LAYOUT_KEY = 'observation_layout';

export class LayoutError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'LayoutError';
  }
}

/** Validates and freezes a layout: names non-empty and unique among joints and among features, units given. */
export function defineLayout(joints: readonly LayoutJoint[], features: readonly LayoutFeature[] = []): ObservationLayout {
  const check = (what: string, items: ReadonlyArray<{ name: string; unit: string }>) => {
    const seen = new Set<string>();
    items.forEach((e, i) => {
      if (typeof e.name !== 'string' || e.name === '') throw new LayoutError(`layout: ${what} ${i} has no name`);
      if (typeof e.unit !== 'string' || e.unit === '') throw new LayoutError(`layout: ${what} '${e.name}' has no unit`);
      if (seen.has(e.name)) throw new LayoutError(`layout: ${what} '${e.name}' is declared twice`);
      seen.add(e.name);
    });
  };
  check('joint', joints);
  joints.forEach((j) => {
    if (j.unit !== 'rad' && j.unit !== 'm') throw new LayoutError(`layout: joint '${j.name}' has unit '${j.unit}'; a joint is measured in 'rad' or 'm'`);
  });
  check('feature', features);
  return Object.freeze({
    joints: Object.freeze(joints.map((j) => Object.freeze({ name: j.name, unit: j.unit }))),
    features: Object.freeze(features.map((f) => Object.freeze({ name: f.name, unit: f.unit, ...(f.scene ? { scene: true as const } : {}) }))),
  });
}

/**
 * The features an observation gains when it reports the robot's last `k` commands sent, newest first: for each
 * step back i = 1..k, one per action entry, `<action> command t-i` in that entry's unit. Under actuation latency
 * the commands still in flight are state no sensor shows (sim/env.ts, hardware/command-history.ts). The one place
 * they are named.
 */
export function commandHistoryFeatures(actions: ReadonlyArray<{ name: string; unit: string }>, k: number): LayoutFeature[] {
  if (!(Number.isInteger(k) && k >= 0)) throw new LayoutError(`commandHistory must be a whole number >= 0, got ${k}`);
  return Array.from({ length: k }, (_, i) => actions.map((a) => ({ name: `${a.name} command t-${i + 1}`, unit: a.unit }))).flat();
}

/** Length of the observation vector: 2 × joints + features. */
export function layoutDim(l: ObservationLayout): number {
  return 2 * l.joints.length + l.features.length;
}

/**
 * The indices of the robot's own entries in the observation vector: every joint position and velocity and every
 * feature not flagged `scene`, in vector order.
 */
export function robotEntries(l: ObservationLayout): number[] {
  const nj = l.joints.length;
  return [...Array.from({ length: 2 * nj }, (_, i) => i), ...l.features.flatMap((f, i) => (f.scene ? [] : [2 * nj + i]))];
}

/** Every entry of the vector in order, with its unit. */
export function layoutEntries(l: ObservationLayout): LayoutEntry[] {
  return [
    ...l.joints.map((j) => ({ name: j.name, kind: 'position' as const, unit: j.unit, label: `${j.name} position (${j.unit})` })),
    ...l.joints.map((j) => ({ name: j.name, kind: 'velocity' as const, unit: `${j.unit}/s`, label: `${j.name} velocity (${j.unit}/s)` })),
    ...l.features.map((f) => ({ name: f.name, kind: 'feature' as const, unit: f.unit, label: `${f.name} (${f.unit})` })),
  ];
}

const names = (xs: ReadonlyArray<{ name: string }>) => xs.map((x) => x.name).join(', ');

/** Throws a LayoutError naming the part of `o` whose length does not match `l`. `who` names the robot. */
export function checkObservation(l: ObservationLayout, o: RobotObservation, who = 'robot'): void {
  const nj = l.joints.length;
  if (o.position.length !== nj) throw new LayoutError(`${who}: observation has ${o.position.length} joint positions, the layout declares ${nj} joints (${names(l.joints)})`);
  if (o.velocity.length !== nj) throw new LayoutError(`${who}: observation has ${o.velocity.length} joint velocities, the layout declares ${nj} joints (${names(l.joints)})`);
  const nf = o.features?.length ?? 0;
  if (nf !== l.features.length) {
    throw new LayoutError(`${who}: observation has ${nf} features, the layout declares ${l.features.length}${l.features.length ? ` (${names(l.features)})` : ''}`);
  }
}

/** The observation vector [positions, velocities, features] of `o`; `out` (length layoutDim) is reused when given. */
export function buildObservation(l: ObservationLayout, o: RobotObservation, who = 'robot', out?: Float32Array): Float32Array {
  checkObservation(l, o, who);
  const nj = l.joints.length;
  const v = out ?? new Float32Array(layoutDim(l));
  if (v.length !== layoutDim(l)) throw new LayoutError(`${who}: output buffer has ${v.length} entries, the layout has ${layoutDim(l)}`);
  v.set(o.position, 0);
  v.set(o.velocity, nj);
  if (o.features) v.set(o.features, 2 * nj);
  return v;
}

/** Splits an observation vector back into joint positions, joint velocities and features. */
export function splitObservation(l: ObservationLayout, v: ArrayLike<number>, who = 'robot'): { position: Float64Array; velocity: Float64Array; features: Float32Array } {
  const d = layoutDim(l);
  if (v.length !== d) {
    throw new LayoutError(`${who}: observation vector has ${v.length} entries, the layout has ${d} (${l.joints.length} positions, ${l.joints.length} velocities, ${l.features.length} features)`);
  }
  const nj = l.joints.length;
  const a = Array.prototype.slice.call(v) as number[];
  return {
    position: Float64Array.from(a.slice(0, nj)),
    velocity: Float64Array.from(a.slice(nj, 2 * nj)),
    features: Float32Array.from(a.slice(2 * nj)),
  };
}

/**
 * The first difference between two layouts, in words ("joint 2: policy has 'z' (m), robot has 'grip' (m)"),
 * or null when they are the same. `a` and `b` name the two sides in the message. Names and units are compared,
 * the `scene` flags not: they describe entries rather than shape the vector, so a policy exported before a robot
 * flagged its features still runs on it.
 */
export function layoutMismatch(expected: ObservationLayout, actual: ObservationLayout, a = 'expected', b = 'actual'): string | null {
  const part = (what: 'joint' | 'feature', xs: ReadonlyArray<{ name: string; unit: string }>, ys: ReadonlyArray<{ name: string; unit: string }>) => {
    for (let i = 0; i < Math.max(xs.length, ys.length); i++) {
      const x = xs[i], y = ys[i];
      const show = (e: { name: string; unit: string } | undefined) => (e ? `'${e.name}' (${e.unit})` : 'nothing');
      if (!x || !y || x.name !== y.name || x.unit !== y.unit) return `${what} ${i}: ${a} has ${show(x)}, ${b} has ${show(y)} (${a}: ${xs.length} ${what}s, ${b}: ${ys.length})`;
    }
    return null;
  };
  return part('joint', expected.joints, actual.joints) ?? part('feature', expected.features, actual.features);
}

/** Throws a LayoutError naming the first mismatch, prefixed with `context`. */
export function assertSameLayout(expected: ObservationLayout, actual: ObservationLayout, context: string, a = 'expected', b = 'actual'): void {
  const m = layoutMismatch(expected, actual, a, b);
  if (m) throw new LayoutError(`${context}: observation layouts differ: ${m}`);
}

// ---------------------------------------------------------------- JSON, for ONNX metadata and the wire

const LayoutSchema = Type.Object(
  {
    joints: Type.Array(Type.Object({ name: Type.String({ minLength: 1 }), unit: Type.Union([Type.Literal('rad'), Type.Literal('m')]) }, { additionalProperties: false })),
    features: Type.Array(Type.Object({ name: Type.String({ minLength: 1 }), unit: Type.String({ minLength: 1 }), scene: Type.Optional(Type.Literal(true)) }, { additionalProperties: false })),
  },
  { additionalProperties: false },
);
export type LayoutJson = Static<typeof LayoutSchema>;

export function layoutToJson(l: ObservationLayout): string {
  return JSON.stringify({ joints: l.joints, features: l.features });
}

/** Parses and validates a layout written by layoutToJson; `where` names the source in errors. */
export function layoutFromJson(text: string, where: string): ObservationLayout {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new LayoutError(`${where}: observation layout is not JSON (${(e as Error).message})`);
  }
  if (!Value.Check(LayoutSchema, v)) {
    const first = Value.Errors(LayoutSchema, v).First();
    throw new LayoutError(`${where}: observation layout invalid at ${first?.path || '/'}: ${first?.message ?? 'schema mismatch'}`);
  }
  try {
    return defineLayout(v.joints, v.features);
  } catch (e) {
    throw new LayoutError(`${where}: ${(e as Error).message}`);
  }
}

// ---------------------------------------------------------------- a robot's declaration

/**
 * The layout of a robot, derived from its declaration: `joints` with `jointUnits` (default 'rad'), then
 * `features` with `featureUnits` (default '1'), those named in `sceneFeatures` flagged `scene`.
 */
export function layoutOf(spec: RobotDeclaration): ObservationLayout {
  const ju = spec.jointUnits;
  const fs = spec.features ?? [];
  const fu = spec.featureUnits;
  const scene = new Set(spec.sceneFeatures ?? []);
  if (ju && ju.length !== spec.joints.length) throw new LayoutError(`${spec.name}: ${ju.length} joint units for ${spec.joints.length} joints`);
  if (fu && fu.length !== fs.length) throw new LayoutError(`${spec.name}: ${fu.length} feature units for ${fs.length} features`);
  const unknown = [...scene].find((n) => !fs.includes(n));
  if (unknown !== undefined) throw new LayoutError(`${spec.name}: scene feature '${unknown}' is not one of its features${fs.length ? ` (${fs.join(', ')})` : ' (it declares none)'}`);
  try {
    return defineLayout(
      spec.joints.map((name, i) => ({ name, unit: ju?.[i] ?? 'rad' })),
      fs.map((name, i) => ({ name, unit: fu?.[i] ?? '1', ...(scene.has(name) ? { scene: true as const } : {}) })),
    );
  } catch (e) {
    throw new LayoutError(`${spec.name}: ${(e as Error).message}`);
  }
}

/** The declaration fields that carry a layout, to spread into a RobotDeclaration (inverse of layoutOf). */
export function declarationOf(l: ObservationLayout): Pick<RobotDeclaration, 'joints' | 'jointUnits' | 'features' | 'featureUnits' | 'sceneFeatures'> {
  const scene = l.features.filter((f) => f.scene).map((f) => f.name);
  return {
    joints: l.joints.map((j) => j.name),
    jointUnits: l.joints.map((j) => j.unit),
    features: l.features.map((f) => f.name),
    featureUnits: l.features.map((f) => f.unit),
    ...(scene.length ? { sceneFeatures: scene } : {}),
  };
}
