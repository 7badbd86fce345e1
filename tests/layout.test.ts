// The one declared observation layout (common/layout.ts): dimension, entries, build/split, JSON, comparison.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  assertSameLayout,
  buildObservation,
  declarationOf,
  defineLayout,
  layoutDim,
  layoutEntries,
  layoutFromJson,
  layoutMismatch,
  layoutOf,
  layoutToJson,
  robotEntries,
  splitObservation,
} from '../common/layout.js';
import type { RobotDeclaration } from '../common/robot.js';
import { parseRobotConfig } from '../hardware/config.js';

const L = defineLayout(
  [
    { name: 'x', unit: 'm' },
    { name: 'elbow', unit: 'rad' },
  ],
  [
    { name: 'cube x', unit: 'm' },
    { name: 'goal is red', unit: '1' },
    { name: 'cube vx', unit: 'm/s' },
  ],
);

describe('observation layout', () => {
  it('dimension and entries: positions, velocities (unit/s), features, in declared order', () => {
    expect(layoutDim(L)).toBe(7);
    expect(layoutEntries(L).map((e) => [e.name, e.kind, e.unit])).toEqual([
      ['x', 'position', 'm'],
      ['elbow', 'position', 'rad'],
      ['x', 'velocity', 'm/s'],
      ['elbow', 'velocity', 'rad/s'],
      ['cube x', 'feature', 'm'],
      ['goal is red', 'feature', '1'],
      ['cube vx', 'feature', 'm/s'],
    ]);
    expect(layoutEntries(L)[3]!.label).toBe('elbow velocity (rad/s)');
  });

  it('build and split are inverse (property), float32 precision', () => {
    fc.assert(
      fc.property(fc.array(fc.float({ noNaN: true, noDefaultInfinity: true }), { minLength: 7, maxLength: 7 }), (xs) => {
        const v = Float32Array.from(xs);
        const o = splitObservation(L, v);
        expect(Array.from(o.position)).toEqual(Array.from(v.subarray(0, 2)));
        expect(Array.from(o.velocity)).toEqual(Array.from(v.subarray(2, 4)));
        expect(Array.from(buildObservation(L, { stamp: 0, ...o }))).toEqual(Array.from(v));
      }),
    );
  });

  it('length mismatches are errors naming the part, the counts and the declared names', () => {
    const o = { stamp: 0, position: Float64Array.of(1, 2), velocity: Float64Array.of(0, 0), features: Float32Array.of(1, 2, 3) };
    expect(() => buildObservation(L, { ...o, position: Float64Array.of(1) }, 'arm')).toThrow('arm: observation has 1 joint positions, the layout declares 2 joints (x, elbow)');
    expect(() => buildObservation(L, { ...o, velocity: Float64Array.of(1, 2, 3) })).toThrow(/3 joint velocities/);
    expect(() => buildObservation(L, { ...o, features: undefined })).toThrow('observation has 0 features, the layout declares 3 (cube x, goal is red, cube vx)');
    expect(() => splitObservation(L, new Float32Array(6), 'pick')).toThrow('pick: observation vector has 6 entries, the layout has 7 (2 positions, 2 velocities, 3 features)');
  });

  it('declaration rejects duplicate names, missing units and joint units other than rad/m', () => {
    expect(() => defineLayout([{ name: 'a', unit: 'rad' }, { name: 'a', unit: 'rad' }])).toThrow("joint 'a' is declared twice");
    expect(() => defineLayout([{ name: 'a', unit: 'deg' as 'rad' }])).toThrow("joint 'a' has unit 'deg'");
    expect(() => defineLayout([], [{ name: 'f', unit: '' }])).toThrow("feature 'f' has no unit");
  });

  it('JSON round trip, and invalid JSON or schema errors name the source and the path', () => {
    const back = layoutFromJson(layoutToJson(L), 'policy.onnx');
    expect(layoutMismatch(L, back)).toBeNull();
    expect(() => layoutFromJson('{', 'policy.onnx')).toThrow(/policy.onnx: observation layout is not JSON/);
    expect(() => layoutFromJson('{"joints":[{"name":"a","unit":"deg"}],"features":[]}', 'm.onnx')).toThrow(/m.onnx: observation layout invalid at \/joints\/0\/unit/);
    expect(() => layoutFromJson('{"joints":[{"name":"a","unit":"m"},{"name":"a","unit":"m"}],"features":[]}', 'm.onnx')).toThrow("m.onnx: layout: joint 'a' is declared twice");
  });

  it('comparison names the first mismatch: a joint, a unit, a missing feature', () => {
    const other = defineLayout(L.joints, [L.features[0]!, L.features[1]!]);
    expect(layoutMismatch(L, other, 'policy', 'robot')).toBe("feature 2: policy has 'cube vx' (m/s), robot has nothing (policy: 3 features, robot: 2)");
    const unit = defineLayout([{ name: 'x', unit: 'rad' }, L.joints[1]!], L.features);
    expect(layoutMismatch(L, unit, 'policy', 'robot')).toBe("joint 0: policy has 'x' (m), robot has 'x' (rad) (policy: 2 joints, robot: 2)");
    expect(() => assertSameLayout(L, unit, 'p.onnx on sim-pick', 'policy', 'robot')).toThrow(/^p.onnx on sim-pick: observation layouts differ: joint 0/);
  });

  it('a declaration carries the layout: declarationOf and layoutOf are inverse; defaults rad and 1', () => {
    const spec = { name: 'r', ...declarationOf(L) } as RobotDeclaration;
    expect(layoutMismatch(L, layoutOf(spec))).toBeNull();
    const plain = layoutOf({ name: 'arm', joints: ['a', 'b'], features: ['f'] } as RobotDeclaration);
    expect(plain.joints.map((j) => j.unit)).toEqual(['rad', 'rad']);
    expect(plain.features[0]!.unit).toBe('1');
    expect(() => layoutOf({ name: 'arm', joints: ['a', 'b'], jointUnits: ['rad'] } as RobotDeclaration)).toThrow('arm: 1 joint units for 2 joints');
  });
});

describe("scene features: what measures the world, not the robot", () => {
  const S = defineLayout(L.joints, [{ name: 'tip x', unit: 'm' }, { name: 'cube x', unit: 'm', scene: true }, { name: 'grip', unit: 'm' }, { name: 'goal is red', unit: '1', scene: true }]);

  it("robotEntries: joint positions, velocities and every feature not flagged scene, in vector order", () => {
    expect(robotEntries(S)).toEqual([0, 1, 2, 3, 4, 6]);
    expect(robotEntries(L)).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(S.features.map((f) => f.scene ?? false)).toEqual([false, true, false, true]);
  });

  it('the flag survives JSON, a declaration and appended features; a layout without flags still reads', () => {
    expect(robotEntries(layoutFromJson(layoutToJson(S), 'p.onnx'))).toEqual([0, 1, 2, 3, 4, 6]);
    expect(robotEntries(layoutFromJson('{"joints":[{"name":"a","unit":"m"}],"features":[{"name":"f","unit":"1"}]}', 'old.onnx'))).toEqual([0, 1, 2]);
    expect(() => layoutFromJson('{"joints":[],"features":[{"name":"f","unit":"1","scene":false}]}', 'm.onnx')).toThrow(/m.onnx: observation layout invalid at \/features\/0\/scene/);
    const spec = { name: 'r', ...declarationOf(S) } as RobotDeclaration;
    expect(spec.sceneFeatures).toEqual(['cube x', 'goal is red']);
    expect(robotEntries(layoutOf(spec))).toEqual(robotEntries(S));
    expect(declarationOf(L).sceneFeatures).toBeUndefined();
    expect(robotEntries(defineLayout(S.joints, [...S.features, { name: 'a command t-1', unit: '1' }]))).toEqual([0, 1, 2, 3, 4, 6, 8]);
    expect(() => layoutOf({ ...spec, sceneFeatures: ['cube y'] })).toThrow("r: scene feature 'cube y' is not one of its features (tip x, cube x, grip, goal is red)");
  });

  it('layouts that differ only in their flags are the same layout: a policy exported before the flags runs on a robot that declares them', () => {
    const unflagged = defineLayout(S.joints, S.features.map((f) => ({ name: f.name, unit: f.unit })));
    expect(layoutMismatch(S, unflagged, 'policy', 'robot')).toBeNull();
    expect(() => assertSameLayout(unflagged, S, 'p.onnx', 'policy', 'robot')).not.toThrow();
    expect(layoutMismatch(S, defineLayout(S.joints, [...S.features.slice(0, 3), { name: 'goal is blue', unit: '1', scene: true }]))).toMatch(/^feature 3/);
  });
});

describe('a robot YAML declares its layout', () => {
  const base = `name: arm\njoints: [a, b]\nposition_limits: [[-1, 1], [-1, 1]]\nvelocity_limits: [1, 1]\ncontrol_hz: 50\naction: {kind: normalized, low: [-1, -1], high: [1, 1]}\ncommand: {mode: forward_command, topic: /cmd}\n`;
  it('joint_units and features.units give the units; services.reset_seed_topic goes with services.reset', () => {
    const c = parseRobotConfig(base + 'joint_units: [rad, m]\nfeatures: {topic: /f, names: [x, onehot], units: [m, "1"]}\nservices: {reset: /r, reset_seed_topic: /seed}\n');
    expect(layoutEntries(layoutOf(c.spec)).map((e) => e.label)).toEqual(['a position (rad)', 'b position (m)', 'a velocity (rad/s)', 'b velocity (m/s)', 'x (m)', 'onehot (1)']);
    expect(c.services).toEqual({ reset: '/r', resetSeed: '/seed' });
    expect(() => parseRobotConfig(base + 'joint_units: [rad]\n', 'r.yaml')).toThrow("r.yaml:8: key 'joint_units': needs 2 units (one per joint), got 1");
    expect(() => parseRobotConfig(base + 'joint_units: [rad, deg]\n', 'r.yaml')).toThrow(/key 'joint_units'/);
    expect(() => parseRobotConfig(base + 'features: {topic: /f, names: [x], units: [m, m]}\n', 'r.yaml')).toThrow("key 'features.units': needs 1 units (one per feature), got 2");
    expect(() => parseRobotConfig(base + 'services: {reset_seed_topic: /seed}\n', 'r.yaml')).toThrow("key 'services.reset_seed_topic': needs 'services.reset'");
  });

  it('features.scene flags the features that measure the world; a name not among features.names is refused', () => {
    const c = parseRobotConfig(base + 'features: {topic: /f, names: [grip, cube x], units: [m, m], scene: [cube x]}\n');
    expect(c.spec.sceneFeatures).toEqual(['cube x']);
    expect(robotEntries(layoutOf(c.spec))).toEqual([0, 1, 2, 3, 4]);
    expect(() => parseRobotConfig(base + 'features: {topic: /f, names: [grip], scene: [cube]}\n', 'r.yaml')).toThrow("key 'features.scene': 'cube' is not one of features.names");
  });
});
