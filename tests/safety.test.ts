// The safety layer: property tests over hostile actions, the watchdog's reaction time, the latched
// e-stop and the episode cap. The robot under it is a recording fake: these tests are about the
// layer itself (the end-to-end test drives the real sim robot over rosbridge).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SafetyLayer, SafetyStop, type SafetyConfig } from '../hardware/safety.js';
import type { RobotObservation, RobotDeclaration } from '../common/robot.js';
import type { Robot } from '../hardware/types.js';

class RecordingRobot implements Robot {
  sent: Float32Array[] = [];
  sentAt: number[] = [];
  position: Float64Array;
  stops = 0;
  constructor(readonly spec: RobotDeclaration) {
    this.position = new Float64Array(spec.joints.length);
  }
  async observe(): Promise<RobotObservation> {
    return { stamp: 0, position: this.position, velocity: new Float64Array(this.position.length) };
  }
  async act(a: Float32Array): Promise<Float32Array> {
    this.sent.push(Float32Array.from(a));
    this.sentAt.push(performance.now());
    return a;
  }
  async reset(): Promise<RobotObservation> {
    return this.observe();
  }
  async estop(): Promise<void> {
    this.stops++;
  }
  async [Symbol.asyncDispose](): Promise<void> {}
}

const velocitySpec: RobotDeclaration = {
  name: 'fake-vel',
  joints: ['a', 'b', 'c'],
  positionLimits: [[-1, 1], [-2, 2], [-Infinity, Infinity]],
  velocityLimits: [1, 2, 0.5],
  action: { kind: 'joint_velocity', names: ['a', 'b', 'c'], low: [-3, -3, -3], high: [3, 3, 3] },
  controlHz: 50,
};
const positionSpec: RobotDeclaration = { ...velocitySpec, name: 'fake-pos', action: { kind: 'joint_position', names: ['a', 'b', 'c'], low: [-5, -5, -5], high: [5, 5, 5] } };
const cfg: SafetyConfig = { maxDelta: 0.3, watchdogMs: 50, watchdogAction: 'hold', maxCommandAgeMs: 100, maxEpisodeSeconds: 1e9 };

/** Every value that reached the transport obeys every limit; returns the violations found. */
function violations(spec: RobotDeclaration, r: RecordingRobot, positions: Float64Array[]): string[] {
  const bad: string[] = [];
  let prev: Float32Array = new Float32Array(spec.joints.length);
  r.sent.forEach((a, k) => {
    if (a.length !== spec.joints.length) bad.push(`command ${k}: length ${a.length}`);
    a.forEach((v, i) => {
      const fail = (why: string) => bad.push(`command ${k} joint ${i}: ${v} ${why}`);
      const [lo, hi] = spec.positionLimits[i]!;
      const p = positions[k]![i]!;
      const tol = 1e-6 * Math.max(1, Math.abs(v));
      if (!Number.isFinite(v)) fail('is not finite');
      if (v < spec.action.low[i]! || v > spec.action.high[i]!) fail('is outside the action range');
      // The change cap holds, except where a hard limit (or a refusal) moved the command towards
      // holding still: lower speed, or closer to the current position.
      if (Math.abs(v - prev[i]!) > cfg.maxDelta + tol) {
        const towardsHold = spec.action.kind === 'joint_velocity' ? Math.abs(v) < Math.abs(prev[i]!) : Math.abs(v - p) <= Math.abs(prev[i]! - p) + tol;
        if (!towardsHold) fail(`jumps from ${prev[i]} beyond the change cap`);
      }
      if (spec.action.kind === 'joint_velocity') {
        if (Math.abs(v) > spec.velocityLimits[i]! + tol) fail('exceeds the velocity limit');
        if ((p >= hi && v > 0) || (p <= lo && v < 0)) fail(`drives joint at ${p} beyond its limit`);
      } else {
        if (v < lo - tol || v > hi + tol) fail('is outside the position limits');
        // Within one period's travel of the current position, unless the joint is outside its
        // limits, where the command pulls it back inside.
        if (p >= lo && p <= hi && Math.abs(v - p) > spec.velocityLimits[i]! / spec.controlHz + tol) fail(`is more than one period's travel from ${p}`);
      }
    });
    prev = a;
  });
  return bad;
}

const hostileNumber = fc.oneof(
  fc.double(),
  fc.constantFrom(NaN, Infinity, -Infinity, 1e308, -1e308, 1e-320, -0),
  fc.double({ min: -4, max: 4, noNaN: true }),
);
const command = fc.record({
  values: fc.oneof({ weight: 4, arbitrary: fc.array(hostileNumber, { minLength: 3, maxLength: 3 }) }, { weight: 1, arbitrary: fc.array(hostileNumber, { maxLength: 6 }) }),
  ageMs: fc.oneof(fc.constant(undefined), fc.double({ min: 0, max: 1000, noNaN: true })),
  moveTo: fc.array(fc.double({ min: -3, max: 3, noNaN: true }), { minLength: 3, maxLength: 3 }),
});

describe('safety layer', () => {
  for (const spec of [velocitySpec, positionSpec]) {
    it(`${spec.action.kind}: 10⁵ generated actions (NaN, ±Inf, huge, wrong lengths, stale stamps) — 0 unsafe values reach the transport`, async () => {
      let total = 0, rejected = 0;
      await fc.assert(
        fc.asyncProperty(fc.array(command, { minLength: 50, maxLength: 50 }), async (cmds) => {
          let now = 1000;
          const inner = new RecordingRobot(spec);
          const safe = new SafetyLayer(inner, cfg, { now: () => now, watchdog: false });
          const positions: Float64Array[] = [];
          for (const c of cmds) {
            inner.position = Float64Array.from(c.moveTo);
            await safe.observe();
            positions.push(Float64Array.from(inner.position));
            now += 20;
            const sent = await safe.act(Float32Array.from(c.values), c.ageMs === undefined ? {} : { stamp: now - c.ageMs });
            if (sent !== inner.sent.at(-1) && sent.some((v, i) => v !== inner.sent.at(-1)![i])) return false;
            total++;
          }
          rejected += safe.counts.rejected_nonfinite + safe.counts.rejected_length + safe.counts.rejected_stale;
          const bad = violations(spec, inner, positions);
          expect(bad.slice(0, 3)).toEqual([]);
          return true;
        }),
        { numRuns: 2000, seed: 99 },
      );
      expect(total).toBeGreaterThanOrEqual(100_000);
      expect(rejected).toBeGreaterThan(total / 20); // the generator really produced hostile input
    }, 120_000);
  }

  it('a safe action passes unchanged and nothing is counted', async () => {
    const inner = new RecordingRobot(velocitySpec);
    const safe = new SafetyLayer(inner, cfg, { watchdog: false });
    await safe.observe();
    expect(Array.from(await safe.act(Float32Array.of(0.1, -0.2, 0.25)))).toEqual(Array.from(Float32Array.of(0.1, -0.2, 0.25)));
    expect(Object.values(safe.counts).every((c) => c === 0)).toBe(true);
  });

  it('the watchdog holds the robot within timeout + one control period at p99 over 100 trials', async () => {
    const period = 1000 / velocitySpec.controlHz;
    const delays: number[] = [];
    // Independent trials, one after another, so one GC pause cannot spoil many samples at once.
    for (let trial = 0; trial < 100; trial++) {
      await Promise.all(
        Array.from({ length: 1 }, async () => {
          const inner = new RecordingRobot(velocitySpec);
          const safe = new SafetyLayer(inner, cfg);
          await safe.act(Float32Array.of(0.2, 0.2, 0.2));
          const lastCommand = performance.now();
          const n = inner.sent.length;
          while (inner.sent.length === n) await new Promise((r) => setTimeout(r, 1));
          delays.push(inner.sentAt[n]! - lastCommand);
          expect(Array.from(inner.sent[n]!)).toEqual([0, 0, 0]);
          expect(safe.counts.watchdog).toBe(1);
          await safe[Symbol.asyncDispose]();
        }),
      );
    }
    delays.sort((a, b) => a - b);
    const p99 = delays[Math.ceil(0.99 * delays.length) - 1]!;
    expect(delays[0]).toBeGreaterThanOrEqual(cfg.watchdogMs - 1);
    expect(p99).toBeLessThanOrEqual(cfg.watchdogMs + period);
  });

  it('an idle robot under the "hold" watchdog gets the hold action at its control rate, not faster', async () => {
    const inner = new RecordingRobot(velocitySpec);
    const safe = new SafetyLayer(inner, cfg);
    await safe.act(Float32Array.of(0.2, 0.2, 0.2));
    const period = 1000 / velocitySpec.controlHz;
    await new Promise((r) => setTimeout(r, cfg.watchdogMs + 20 * period));
    await safe[Symbol.asyncDispose]();
    const holds = inner.sent.length - 1;
    // about 20 periods of holds; at the watchdog's four checks a period it would be about 80
    expect(holds).toBeGreaterThanOrEqual(5);
    expect(holds).toBeLessThanOrEqual(24);
    for (let i = 2; i < inner.sentAt.length; i++) expect(inner.sentAt[i]! - inner.sentAt[i - 1]!).toBeGreaterThanOrEqual(period - 1);
  });

  it('watchdog "stop" latches the e-stop', async () => {
    const inner = new RecordingRobot(velocitySpec);
    const safe = new SafetyLayer(inner, { ...cfg, watchdogAction: 'stop' });
    await safe.act(Float32Array.of(0.1, 0, 0));
    await new Promise((r) => setTimeout(r, cfg.watchdogMs + 60));
    expect(inner.stops).toBe(1);
    expect(safe.isEstopped).toBe(true);
    await expect(safe.act(Float32Array.of(0, 0, 0))).rejects.toBeInstanceOf(SafetyStop);
    await safe[Symbol.asyncDispose]();
  });

  it('the watchdog waits while a reset moves the robot (a move home takes seconds), and counts again after it', async () => {
    const inner = new RecordingRobot(velocitySpec);
    inner.reset = async () => {
      await new Promise((r) => setTimeout(r, cfg.watchdogMs * 4));
      return inner.observe();
    };
    const safe = new SafetyLayer(inner, { ...cfg, watchdogAction: 'stop' });
    await safe.act(Float32Array.of(0.1, 0, 0));
    await safe.reset();
    expect([inner.sent.length, inner.stops, safe.counts.watchdog]).toEqual([1, 0, 0]);
    await new Promise((r) => setTimeout(r, cfg.watchdogMs + 60));
    expect([inner.stops, safe.isEstopped]).toEqual([1, true]);
    await safe[Symbol.asyncDispose]();
  });

  it('watchdog "stop" latches the e-stop even when its hold command fails', async () => {
    const inner = new RecordingRobot(velocitySpec);
    const logged: string[] = [];
    const safe = new SafetyLayer(inner, { ...cfg, watchdogAction: 'stop' }, { log: (e) => logged.push(`${e.kind}: ${e.detail}`) });
    await safe.act(Float32Array.of(0.1, 0, 0));
    inner.act = () => Promise.reject(new Error('link down'));
    const end = performance.now() + 5000;
    while (!safe.isEstopped && performance.now() < end) await new Promise((r) => setTimeout(r, 10));
    expect(safe.isEstopped).toBe(true);
    expect(inner.stops).toBe(1);
    expect(logged).toContain('watchdog: hold command failed: link down');
    await expect(safe.act(Float32Array.of(0, 0, 0))).rejects.toBeInstanceOf(SafetyStop);
    await safe[Symbol.asyncDispose]();
  });

  it('the e-stop latches: commands and reset() are refused until clearEstop()', async () => {
    const inner = new RecordingRobot(velocitySpec);
    const safe = new SafetyLayer(inner, cfg, { watchdog: false });
    await safe.estop('operator');
    const n = inner.sent.length;
    for (let i = 0; i < 5; i++) await expect(safe.act(Float32Array.of(0.1, 0, 0))).rejects.toThrow(/e-stop is latched/);
    await expect(safe.reset()).rejects.toThrow(/reset\(\) does not clear it/);
    expect(inner.sent.length).toBe(n);
    expect(safe.counts.refused_estopped).toBe(5);
    safe.clearEstop();
    await safe.act(Float32Array.of(0.1, 0, 0));
    expect(inner.sent.length).toBe(n + 1);
  });

  it('an episode past its time cap is stopped and further commands refused until reset', async () => {
    let now = 0;
    const inner = new RecordingRobot(velocitySpec);
    const safe = new SafetyLayer(inner, { ...cfg, maxEpisodeSeconds: 1 }, { now: () => now, watchdog: false });
    await safe.reset();
    now = 900;
    await safe.act(Float32Array.of(0.2, 0, 0));
    now = 1100;
    await expect(safe.act(Float32Array.of(0.2, 0, 0))).rejects.toThrow(/exceeded 1 s/);
    expect(Array.from(inner.sent.at(-1)!)).toEqual([0, 0, 0]); // it was brought to a hold
    await safe.reset();
    await safe.act(Float32Array.of(0.2, 0, 0));
    expect(safe.counts.episode_timeout).toBe(1);
  });
});
