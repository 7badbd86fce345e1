// The reward-hacking alarm (wmrl/alarm.ts): the world model's predicted success on the anchor prompts against the
// anchors' measured success, over a sliding window of updates; it goes off only over a full window.
import { describe, expect, it } from 'vitest';
import { HackingAlarm } from '../wmrl/alarm.js';

describe('HackingAlarm', () => {
  it('goes off once a full window\'s mean gap passes the threshold, either way, and stops once the window slides past it', () => {
    const alarm = new HackingAlarm(3, 0.3);
    expect(alarm.observe(0.9, 0.1, 1)).toBeNull(); // gap 0.8, but the window is not full
    expect(alarm.observe(0.9, 0.1, 2)).toBeNull();
    expect(alarm.observe(0.9, 0.1, 3)).toBe('wmrl: reward-hacking alarm at update 3: the world model predicts 90% success on the anchor prompts, the robot measured 10% over the last 3 updates');
    // Updates with no gap slide the first ones out: the mean gap falls to 0.53, then 0.27.
    expect(alarm.observe(0.5, 0.5, 4)).toMatch(/at update 4: .* predicts 77% .* measured 23%/);
    expect(alarm.observe(0.5, 0.5, 5)).toBeNull();
    expect(alarm.predicted).toEqual([0.9, 0.5, 0.5]);
    expect(alarm.measured).toEqual([0.1, 0.5, 0.5]);
    // A robot that succeeds more than the model predicts is a gap too.
    const under = new HackingAlarm(2, 0.3);
    under.observe(0.1, 0.6, 1);
    expect(under.observe(0.1, 0.6, 2)).toMatch(/predicts 10% .* measured 60%/);
  });

  it('stays raised while the full window\'s gap passes the threshold and clears with it (what WMRL pauses imagination on)', () => {
    const alarm = new HackingAlarm(2, 0.3);
    expect(alarm.raised).toBe(false);
    alarm.observe(0.9, 0.1, 1);
    expect(alarm.raised).toBe(false); // the window is not full
    alarm.observe(0.9, 0.1, 2);
    expect(alarm.raised).toBe(true);
    alarm.observe(0.5, 0.5, 3); // mean gap 0.4
    expect(alarm.raised).toBe(true);
    alarm.observe(0.5, 0.5, 4);
    expect(alarm.raised).toBe(false);
    // A resumed run's saved window raises it before any new update.
    expect(new HackingAlarm(2, 0.3, { predicted: [0.9, 0.9], measured: [0.1, 0.1] }).raised).toBe(true);
  });

  it('continues from the window a saved run left, and hands out copies', () => {
    const alarm = new HackingAlarm(2, 0.3, { predicted: [0.8], measured: [0.2] });
    expect(alarm.observe(0.8, 0.2, 7)).toMatch(/at update 7/);
    alarm.predicted.push(1);
    expect(alarm.predicted).toEqual([0.8, 0.8]);
    expect(new HackingAlarm(2, 0.3).predicted).toEqual([]);
  });
});
