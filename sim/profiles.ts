// Hardware profiles: named parameter sets that open a reality gap, loaded from YAML and validated.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LineCounter, parseDocument, isMap, isScalar, type Node as YamlNode } from 'yaml';
import type { SimModel } from './mujoco.js';

export interface HardwareProfile {
  name: string;
  description: string;
  /** Multiplies every body's mass and inertia. */
  mass_scale: number;
  /** Multiplies every geom's sliding friction coefficient. */
  friction_scale: number;
  /** Multiplies every joint's (dof's) damping. */
  damping_scale: number;
  /** Multiplies every actuator's gain (and its position-feedback bias, so servos keep their setpoint). */
  actuator_gain_scale: number;
  /** Control steps between a policy's action and its reaching the actuators. */
  action_latency_steps: number;
  /** Standard deviation of Gaussian noise added to every state-observation entry (in that entry's unit). */
  obs_noise_std: number;
  /** Physics substeps per control step vary uniformly by ±this many (control-rate jitter). */
  control_jitter_substeps: number;
}

type Key = Exclude<keyof HardwareProfile, 'name' | 'description'>;
const NUMERIC: Record<Key, { min: number; max: number; integer?: boolean }> = {
  mass_scale: { min: 0.01, max: 100 },
  friction_scale: { min: 0, max: 100 },
  damping_scale: { min: 0, max: 100 },
  actuator_gain_scale: { min: 0.01, max: 100 },
  action_latency_steps: { min: 0, max: 100, integer: true },
  obs_noise_std: { min: 0, max: 10 },
  control_jitter_substeps: { min: 0, max: 100, integer: true },
};

export const NOMINAL: HardwareProfile = {
  name: 'nominal',
  description: 'the simulation as written',
  mass_scale: 1,
  friction_scale: 1,
  damping_scale: 1,
  actuator_gain_scale: 1,
  action_latency_steps: 0,
  obs_noise_std: 0,
  control_jitter_substeps: 0,
};

export class ProfileError extends Error {
  constructor(
    readonly file: string,
    readonly detail: string,
    readonly line?: number,
    readonly key?: string,
  ) {
    super(`${file}${line ? `:${line}` : ''}: ${key ? `key '${key}': ` : ''}${detail}`);
    this.name = 'ProfileError';
  }
}

/** Parses profile YAML text; `file` names the source in errors. Unknown keys and wrong types are errors. */
export function parseProfile(text: string, file: string): HardwareProfile {
  const lc = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lc, prettyErrors: false });
  const lineOf = (n: YamlNode | null | undefined) => (n?.range ? lc.linePos(n.range[0]).line : undefined);
  if (doc.errors.length > 0) {
    const e = doc.errors[0]!;
    throw new ProfileError(file, e.message.split('\n')[0]!, e.linePos?.[0]?.line);
  }
  if (!isMap(doc.contents)) throw new ProfileError(file, 'a profile is a mapping of key: value', lineOf(doc.contents));
  const out: HardwareProfile = { ...NOMINAL, name: '', description: '' };
  for (const pair of doc.contents.items) {
    const k = isScalar(pair.key) ? String(pair.key.value) : String(pair.key);
    const line = lineOf(pair.key as YamlNode);
    const v = isScalar(pair.value) ? pair.value.value : undefined;
    if (k === 'name' || k === 'description') {
      if (typeof v !== 'string') throw new ProfileError(file, 'must be a string', line, k);
      out[k] = v;
      continue;
    }
    const rule = NUMERIC[k as Key];
    if (!rule) {
      throw new ProfileError(file, `unknown key (known: name, description, ${Object.keys(NUMERIC).join(', ')})`, line, k);
    }
    if (typeof v !== 'number' || !Number.isFinite(v)) throw new ProfileError(file, 'must be a number', line, k);
    if (rule.integer && !Number.isInteger(v)) throw new ProfileError(file, 'must be an integer', line, k);
    if (v < rule.min || v > rule.max) throw new ProfileError(file, `must be in [${rule.min}, ${rule.max}], got ${v}`, line, k);
    out[k as Key] = v;
  }
  if (!out.name) throw new ProfileError(file, "missing key 'name'");
  return out;
}

export const PROFILE_DIR = join(dirname(fileURLToPath(import.meta.url)), 'profiles');

/** A profile by name (from sim/profiles/<name>.yaml) or by path to a .yaml file. */
export function loadProfile(nameOrPath: string): HardwareProfile {
  const file = /\.ya?ml$/.test(nameOrPath) ? nameOrPath : join(PROFILE_DIR, `${nameOrPath}.yaml`);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new ProfileError(file, `cannot read profile (${(e as Error).message})`);
  }
  return parseProfile(text, file);
}

/** Applies the model-side parameters of a profile to a freshly loaded model (scales from its current values). */
export function applyProfileToModel(model: SimModel, p: HardwareProfile): void {
  const m = model.raw;
  if (p.mass_scale !== 1) {
    const mass = m.body_mass as Float64Array;
    for (let i = 1; i < mass.length; i++) mass[i]! *= p.mass_scale;
    const inertia = m.body_inertia as Float64Array;
    for (let i = 3; i < inertia.length; i++) inertia[i]! *= p.mass_scale;
  }
  if (p.friction_scale !== 1) {
    const f = m.geom_friction as Float64Array;
    for (let i = 0; i < f.length; i += 3) f[i]! *= p.friction_scale;
  }
  if (p.damping_scale !== 1) {
    const d = m.dof_damping as Float64Array;
    for (let i = 0; i < d.length; i++) d[i]! *= p.damping_scale;
  }
  if (p.actuator_gain_scale !== 1) {
    const gain = m.actuator_gainprm as Float64Array;
    const bias = m.actuator_biasprm as Float64Array;
    const stride = gain.length / Math.max(1, m.nu);
    for (let a = 0; a < m.nu; a++) {
      gain[a * stride]! *= p.actuator_gain_scale;
      // position servos: bias = -kp*q - kv*qdot; scale kp with the gain so the setpoint is unchanged
      bias[a * stride + 1]! *= p.actuator_gain_scale;
    }
  }
  if (p.mass_scale !== 1) model.setConst();
}
