// Hardware profiles: named parameter sets that open a reality gap, loaded from YAML and validated.
import { join } from 'node:path';
import { Type, type Static } from '@sinclair/typebox';
import { parseConfig, readConfigFile } from '../common/config.js';
import { packagePath } from '../common/package-root.js';
import type { SimModel } from './mujoco.js';

const Scale = (minimum: number) => Type.Optional(Type.Number({ minimum, maximum: 100 }));
const Steps = Type.Optional(Type.Integer({ minimum: 0, maximum: 100 }));

/** A profile file: `name` and any of the parameters; the rest keep their nominal values. */
const ProfileFile = Type.Object(
  {
    name: Type.String({ minLength: 1, errorMessage: 'must be a non-empty string' }),
    description: Type.Optional(Type.String()),
    /** Multiplies every body's mass and inertia. */
    mass_scale: Scale(0.01),
    /** Multiplies every geom's sliding friction coefficient. */
    friction_scale: Scale(0),
    /** Multiplies every joint's (dof's) damping. */
    damping_scale: Scale(0),
    /** Multiplies every actuator's gain (and its position-feedback bias, so servos keep their setpoint). */
    actuator_gain_scale: Scale(0.01),
    /** Control steps between a policy's action and its reaching the actuators. */
    action_latency_steps: Steps,
    /** Standard deviation of Gaussian noise added to every state-observation entry (in that entry's unit). */
    obs_noise_std: Type.Optional(Type.Number({ minimum: 0, maximum: 10 })),
    /** Physics substeps per control step vary uniformly by ±this many (control-rate jitter). */
    control_jitter_substeps: Steps,
    /**
     * Drive dead zone, in the command's normalized units ([-1, 1]): a command reaching the actuator with magnitude
     * at most this does nothing, a larger one loses this much (a motor driver's deadband, gearbox stiction).
     */
    actuator_deadband: Type.Optional(Type.Number({ minimum: 0, maximum: 0.9 })),
  },
  { additionalProperties: false },
);

/** A hardware profile with every parameter set (the file's, else the nominal value). */
export type HardwareProfile = Required<Static<typeof ProfileFile>>;

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
  actuator_deadband: 0,
};

/**
 * The profile parameters a context-conditioned world model is conditioned on, in order: the physical scales a
 * robot's observation does not show. Everything that declares or reads a context derives from this list.
 */
export const CONTEXT_PARAMS = ['mass_scale', 'friction_scale', 'damping_scale', 'actuator_gain_scale'] as const;

/** The context entries' names, with their unit: the natural log of each scale against the nominal sim. */
export const CONTEXT_NAMES: readonly string[] = CONTEXT_PARAMS.map((k) => `log ${k}`);

/** A profile's context: log of each CONTEXT_PARAMS scale (a zero friction scale counts as 1e-3). */
export function profileContext(p: HardwareProfile): Float32Array {
  return Float32Array.from(CONTEXT_PARAMS, (k) => Math.log(Math.max(p[k], 1e-3)));
}

/**
 * A profile whose context parameters are drawn log-uniformly in [1/spread, spread] (spread ≥ 1), the rest of
 * `base` kept: domain randomization for pretraining a context-conditioned world model.
 */
export function randomProfile(rng: { next(): number }, spread: number, base: HardwareProfile = NOMINAL, name = 'random'): HardwareProfile {
  if (!(spread >= 1 && spread <= 100)) throw new Error(`randomProfile: spread must be in [1, 100], got ${spread}`);
  const p: HardwareProfile = { ...base, name, description: `context parameters drawn log-uniformly in [1/${spread}, ${spread}]` };
  for (const k of CONTEXT_PARAMS) p[k] = Math.exp((2 * rng.next() - 1) * Math.log(spread));
  return p;
}

/** Parses profile YAML text; `file` names the source in errors. Unknown keys and wrong types are errors. */
export function parseProfile(text: string, file: string): HardwareProfile {
  return { ...NOMINAL, description: '', ...parseConfig(ProfileFile, text, file, 'profile').value };
}

export const PROFILE_DIR = packagePath('sim', 'profiles');

/** A profile by name (from sim/profiles/<name>.yaml) or by path to a .yaml file. */
export function loadProfile(nameOrPath: string): HardwareProfile {
  const file = /\.ya?ml$/.test(nameOrPath) ? nameOrPath : join(PROFILE_DIR, `${nameOrPath}.yaml`);
  return parseProfile(readConfigFile(file, 'profile'), file);
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
