// Wire round trips: any valid observation, spec and episode step survives
// convert → encodePayload → parsePayload → convert unchanged (property test, fixed seed).

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { obsFromWire, obsToWire, specFromWire, specToWire, stepFromWire, stepToWire } from '../bridge/mqtt/convert.js';
import { encodePayload, isEpisodeStep, isSpec, isState, parsePayload } from '../bridge/mqtt/messages.js';
import { parseTopic, robotTopic, sharedJobsFilter } from '../bridge/mqtt/topics.js';
import type { RobotObservation, RobotDeclaration } from '../common/robot.js';

// JSON has no -0 (it arrives as 0), the one value the wire does not preserve.
const noNegZero = (x: number): number => (x === 0 ? 0 : x);
const finite = fc.double({ noNaN: true, noDefaultInfinity: true }).map(noNegZero);
const f32 = fc.float({ noNaN: true, noDefaultInfinity: true }).map(noNegZero);

const obsArb = fc.record({
  stamp: fc.double({ min: 0, max: 1e9, noNaN: true }).map(noNegZero),
  n: fc.integer({ min: 0, max: 8 }),
  withImage: fc.boolean(),
  bytes: fc.uint8Array({ minLength: 12, maxLength: 12 }),
  features: fc.option(fc.array(f32, { maxLength: 5 }), { nil: undefined }),
  instruction: fc.option(fc.string(), { nil: undefined }),
  values: fc.array(finite, { minLength: 16, maxLength: 16 }),
}).map((r): RobotObservation => {
  const obs: RobotObservation = {
    stamp: r.stamp,
    position: Float64Array.from(r.values.slice(0, r.n)),
    velocity: Float64Array.from(r.values.slice(8, 8 + r.n)),
  };
  if (r.features) obs.features = Float32Array.from(r.features);
  if (r.withImage) obs.image = { width: 2, height: 2, encoding: 'rgb8', data: r.bytes };
  if (r.instruction !== undefined) obs.instruction = r.instruction;
  return obs;
});

describe('MQTT wire format', () => {
  it('observations round-trip exactly (float64 positions, float32 features, binary images)', () => {
    fc.assert(
      fc.property(obsArb, (obs) => {
        const r = parsePayload(robotTopic('r', 'state'), encodePayload({ type: 'state', ...obsToWire(obs) }));
        if (!r.ok) throw new Error(r.error);
        if (!isState(r.msg)) throw new Error('not a state');
        expect(obsFromWire(r.msg)).toEqual(obs);
      }),
      { seed: 7, numRuns: 500 },
    );
  });

  it('episode steps round-trip; specs keep ±Infinity limits', () => {
    const obs: RobotObservation = { stamp: 1, position: Float64Array.of(0.1), velocity: Float64Array.of(-0.2) };
    const step = { seq: 4, tObs: 1, tAct: 1.01, obs, action: Float32Array.of(0.5), reward: -1.25, done: true, success: false };
    const r = parsePayload(robotTopic('r', 'episodes'), encodePayload(stepToWire('ep', step, 2)));
    expect(r.ok && isEpisodeStep(r.msg) && stepFromWire(r.msg)).toEqual(step);

    const spec: RobotDeclaration = {
      name: 'arm',
      joints: ['a', 'b'],
      positionLimits: [[-Infinity, Infinity], [-1, 2]],
      velocityLimits: [1, 2],
      action: { kind: 'joint_position', names: ['a', 'b'], low: [-1, -1], high: [1, 1] },
      controlHz: 20,
      features: ['tip x', 'cube x'],
      featureUnits: ['m', 'm'],
      sceneFeatures: ['cube x'],
      camera: { width: 64, height: 48, encoding: 'jpeg' },
    };
    const s = parsePayload(robotTopic('r', 'spec'), encodePayload({ type: 'spec', robotId: 'r', spec: specToWire(spec) }));
    expect(s.ok && isSpec(s.msg) && specFromWire(s.msg.spec)).toEqual(spec);
  });

  it('topics: layout, parse, shared filter; ids that would break the layout are refused', () => {
    expect(robotTopic('arm-1', 'cmd')).toBe('wmrl/robots/arm-1/cmd');
    expect(parseTopic('wmrl/robots/arm-1/ack')).toEqual({ kind: 'robot', robotId: 'arm-1', channel: 'ack' });
    expect(parseTopic('wmrl/robots/arm-1/nope')).toBeUndefined();
    expect(sharedJobsFilter('g')).toBe('$share/g/wmrl/jobs/rollout');
    for (const bad of ['', 'a/b', 'a+', '#', 'x\0y']) expect(() => robotTopic(bad, 'state')).toThrow(/invalid robot id/);
  });
});
