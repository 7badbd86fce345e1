// Hardware profiles: the shipped YAML files, validation errors that name file/line/key, and model effects.
import fc from 'fast-check';
import { stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { SimModel } from '../sim/mujoco.js';
import { ConfigError } from '../common/config.js';
import { applyProfileToModel, loadProfile, NOMINAL, parseProfile } from '../sim/profiles.js';
import { taskDef } from '../sim/registry.js';

const KEYS = Object.keys(NOMINAL).filter((k) => k !== 'name' && k !== 'description');

describe('hardware profiles', () => {
  it('nominal, gap and worn load; nominal is the identity, gap and worn change every parameter between them', () => {
    const nominal = loadProfile('nominal');
    const gap = loadProfile('gap');
    const worn = loadProfile('worn');
    expect(nominal).toEqual({ ...NOMINAL, description: 'the simulation as written' });
    // gap leaves the drive's dead zone alone (its gap lies inside the world model's context class); worn sets it.
    for (const k of KEYS.filter((k) => k !== 'actuator_deadband')) expect(gap[k as keyof typeof gap], k).not.toEqual(NOMINAL[k as keyof typeof NOMINAL]);
    for (const k of KEYS) expect(worn[k as keyof typeof worn], k).not.toEqual(NOMINAL[k as keyof typeof NOMINAL]);
    // worn errs the other way: lighter and stronger where gap is heavier and weaker.
    expect(worn.mass_scale).toBeLessThan(1);
    expect(worn.actuator_gain_scale).toBeGreaterThan(1);
  });

  it('an unknown key is an error naming the file, the line and the key', () => {
    const text = 'name: x\nmass_scale: 1.2\nfriction_scael: 0.5\n';
    expect(() => parseProfile(text, 'my.yaml')).toThrowError(/^my\.yaml:3: key 'friction_scael': unknown key/);
  });

  it('wrong types, out-of-range values, broken YAML and missing files are errors with file and line', () => {
    expect(() => parseProfile('name: x\nmass_scale: heavy\n', 'p.yaml')).toThrowError(/p\.yaml:2: key 'mass_scale': must be a number/);
    expect(() => parseProfile('name: x\naction_latency_steps: 1.5\n', 'p.yaml')).toThrowError(/p\.yaml:2: .*must be an integer/);
    expect(() => parseProfile('name: x\nobs_noise_std: -1\n', 'p.yaml')).toThrowError(/p\.yaml:2: .*must be in \[0, 10\]/);
    expect(() => parseProfile('name: x\n  mass_scale: [1\n', 'p.yaml')).toThrowError(/^p\.yaml(:\d+)?: /);
    expect(() => parseProfile('- 1\n- 2\n', 'p.yaml')).toThrowError(/p\.yaml:1: a profile is a mapping/);
    expect(() => parseProfile('mass_scale: 2\n', 'p.yaml')).toThrowError(/^p\.yaml:1: key 'name': missing/);
    expect(() => loadProfile('/nonexistent/x.yaml')).toThrowError(ConfigError);
    expect(() => loadProfile('no_such_profile')).toThrowError(/no_such_profile\.yaml: cannot read profile/);
  });

  it('property: any valid profile round-trips through YAML; any extra key is rejected by name', () => {
    const valid = fc.record({
      name: fc.string({ minLength: 1 }).filter((s) => s.trim() === s && s.length > 0),
      description: fc.string(),
      mass_scale: fc.double({ min: 0.01, max: 100, noNaN: true }),
      friction_scale: fc.double({ min: 0, max: 100, noNaN: true }),
      damping_scale: fc.double({ min: 0, max: 100, noNaN: true }),
      actuator_gain_scale: fc.double({ min: 0.01, max: 100, noNaN: true }),
      action_latency_steps: fc.integer({ min: 0, max: 100 }),
      obs_noise_std: fc.double({ min: 0, max: 10, noNaN: true }),
      control_jitter_substeps: fc.integer({ min: 0, max: 100 }),
      actuator_deadband: fc.double({ min: 0, max: 0.9, noNaN: true }),
    });
    fc.assert(
      fc.property(valid, (p) => {
        expect(parseProfile(stringify(p), 'r.yaml')).toEqual(p);
      }),
      { seed: 42, numRuns: 200 },
    );
    const extraKey = fc.string({ minLength: 1, maxLength: 12 }).filter((k) => /^[a-z_]+$/.test(k) && !(k in NOMINAL));
    fc.assert(
      fc.property(valid, extraKey, (p, k) => {
        expect(() => parseProfile(stringify({ ...p, [k]: 1 }), 'r.yaml')).toThrowError(new RegExp(`key '${k}': unknown key`));
      }),
      { seed: 43, numRuns: 100 },
    );
  });

  it('model-side parameters scale masses, friction, damping and actuator gains', async () => {
    const gap = loadProfile('gap');
    const plain = await SimModel.load(taskDef('push').scene);
    const scaled = await SimModel.load(taskDef('push').scene);
    try {
      applyProfileToModel(scaled, gap);
      const cube = plain.id('mjOBJ_BODY', 'cube');
      const floor = plain.id('mjOBJ_GEOM', 'floor');
      expect((scaled.raw.body_mass as Float64Array)[cube]).toBeCloseTo((plain.raw.body_mass as Float64Array)[cube]! * gap.mass_scale, 12);
      expect((scaled.raw.geom_friction as Float64Array)[3 * floor]).toBeCloseTo((plain.raw.geom_friction as Float64Array)[3 * floor]! * gap.friction_scale, 12);
      expect((scaled.raw.dof_damping as Float64Array)[0]).toBeCloseTo((plain.raw.dof_damping as Float64Array)[0]! * gap.damping_scale, 12);
      const stride = (plain.raw.actuator_gainprm as Float64Array).length / plain.raw.nu;
      expect((scaled.raw.actuator_gainprm as Float64Array)[stride]).toBeCloseTo((plain.raw.actuator_gainprm as Float64Array)[stride]! * gap.actuator_gain_scale, 12);
    } finally {
      plain.dispose();
      scaled.dispose();
    }
  });
});
