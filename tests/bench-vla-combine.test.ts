// bench vla's `--combine`: a full run keeps each task's results beside its report (bench/results/vla-TASK.json, with
// the run key of the code that ran it), and `npm run bench -- vla --combine` builds the two-task report from the
// `--task` runs' kept results. Checks: the kept results read back exactly (NaN included); the combined report's numbers
// are the two tasks' and it says where they come from; a missing, unparsable, other-task or other-code file is refused,
// naming it and the command that writes it afresh; the harness refuses `--combine` where it cannot apply.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { TASKS, readTaskRecords, resultFile, runKey, taskRecordJson, vlaReport, type TaskRecord, type TaskResult } from '../bench/vla.js';
import { ANCHORS } from '../recipes/vla.js';

const dir = mkdtempSync(join(tmpdir(), 'vla-combine-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

type Row = 'bc' | 'sparse_only' | 'dense_only' | 'wmrl';
const ROWS: Row[] = ['bc', 'sparse_only', 'dense_only', 'wmrl'];

/** A task's result with held-out-state success `s` per row (combinations 0.1 lower); the rest plausible filler. */
function result(s: Record<Row, number>): TaskResult {
  const ev = (x: number) => ({ success: x, return: 10 * x, episodes: 100, steps: 100 * 300, outcomes: [] });
  const per = <T>(f: (r: Row) => T) => Object.fromEntries(ROWS.map((r) => [r, f(r)])) as Record<Row, T>;
  return {
    eval: per((r) => ({ heldOutStates: ev(s[r]), heldOutCombinations: ev(s[r] - 0.1) })),
    robotEpisodes: per((r) => (r === 'wmrl' || r === 'sparse_only' ? 640 : 0)),
    curve: { wmrl: [{ update: 80, success: s.wmrl - 0.05 }, { update: 160, success: s.wmrl }] },
    robotHours: per(() => 0.5),
    computeSeconds: per(() => 12),
    anchorGroups: 80,
    robotSuccesses: per(() => 100),
    expert: { heldOutStates: 0.04, heldOutCombinations: 0.02 },
    demonstrator: { heldOutStates: 1, heldOutCombinations: 0.98 },
    demoSuccess: 0.9,
    bcLoss: 0.2,
    demoSteps: 1000,
    wmValLoss: -2.9,
    // NaN: a measurement that could not be made; it must stay NaN through the file.
    agreement: { nominal: 0.3, identified: 0.2, faceOnRobot: Number.NaN, repeatability: 0.7, firstSteps: { steps: [25, 50], nominal: [0.8, 0.5], identified: [0.9, 0.6] } },
    identified: { context: [0.5, -0.6, -0.9, -0.3], delay: 3 },
    controlHz: 50,
    latent: { states: 1000, heldOut: 100, valMse: 0.01, valRelMse: 0.3, actionGap: 0.12, actionGapConstant: 0.2 },
    gaps: { states: 900, twinVsCamera: 0.09, faceVsCamera: 0.27, spread: 0.6 },
    biasReduction: 0.9,
    anchorWeight: 1.5,
    guard: { updatesFlagged: 0, maxFlagged: 0 },
    latency: [0.1, 0.2, 0.3],
  };
}

const truth = {
  reach: result({ bc: 0.23, sparse_only: 0.27, dense_only: 0.22, wmrl: 0.39 }),
  push: result({ bc: 0.38, sparse_only: 0.36, dense_only: 0.4, wmrl: 0.47 }),
};
const record = (task: (typeof TASKS)[number], date: string): TaskRecord => ({ task, seed: 0, runKey: runKey(task, false), date, node: process.version, result: truth[task] });

describe('bench vla --combine', () => {
  it('a run keeps each task\'s results beside its report; --combine reads them back into the two-task report', () => {
    // Two `--task` runs: each report's files hold its task's results.
    const dates = { reach: '2026-12-05T01:00:00.000Z', push: '2026-12-05T02:00:00.000Z' };
    for (const task of TASKS) {
      const r = record(task, dates[task]);
      const report = vlaReport([r], false, undefined, false);
      expect(Object.keys(report.files!)).toEqual([resultFile(task)]);
      expect(report.summary).toContain(`bench/results/vla-${task}.json, run key ${r.runKey}`);
      for (const [name, text] of Object.entries(report.files!)) writeFileSync(join(dir, name), text);
    }
    const records = readTaskRecords(dir, TASKS);
    expect(records.map((r) => r.task)).toEqual([...TASKS]);
    for (const r of records) {
      expect(JSON.stringify(r.result)).toBe(JSON.stringify(truth[r.task]));
      expect(Number.isNaN(r.result.agreement.faceOnRobot)).toBe(true);
      expect(r.date).toBe(dates[r.task]);
    }
    const combined = vlaReport(records, false, undefined, true);
    // The two-task means of the rows, and the targets judged on them: WMRL 43% against BC's 30.5% (+12.5).
    expect(combined.result.bc).toBeCloseTo((0.23 + 0.38) / 2, 12);
    expect(combined.result.wmrl).toBeCloseTo((0.39 + 0.47) / 2, 12);
    expect(combined.result.sparse_only_combinations).toBeCloseTo((0.17 + 0.26) / 2, 12);
    expect(combined.summary).toContain('at least 10 points over behaviour cloning — met (+12.5 points)');
    expect(combined.summary).toContain('Assembled by `--combine`');
    // The agreement over the rollouts' first steps: each task's in its sentence, their mean where both measured it.
    expect(combined.summary).toContain('over the rollouts\' first 25, 50 steps alone: 0.8, 0.5 nominal, 0.9, 0.6 identified');
    expect(combined.result.agreement_first25_identified).toBeCloseTo(0.9, 12);
    expect(combined.result.agreement_first50_identified).toBeCloseTo(0.6, 12);
    expect(combined.result).not.toHaveProperty('agreement_first100_identified');
    for (const r of records) expect(combined.summary).toContain(`${r.task} run on ${r.date}`);
    expect(combined.header).toEqual(['row', 'reach: held-out states', 'reach: held-out combinations', 'push: held-out states', 'push: held-out combinations', 'mean, held-out states', 'robot episodes (reach / push)', 'robot hours (reach / push)', 'compute s (reach / push)']);
    expect(combined.files).toBeUndefined();
  });

  it('refuses results that are missing, do not parse, are of another task or seed, or were run by other code, naming the file and the command', () => {
    const other = mkdtempSync(join(dir, 'bad-'));
    const rerun = (task: string) => `\`npm run bench -- vla --task ${task}\``;
    expect(() => readTaskRecords(other, ['reach'])).toThrow(`vla bench --combine: no results of reach in ${join(other, 'vla-reach.json')}: run ${rerun('reach')} first`);
    writeFileSync(join(other, 'vla-reach.json'), '{"task": "reach", ');
    expect(() => readTaskRecords(other, ['reach'])).toThrow(new RegExp(`${join(other, 'vla-reach.json')} does not parse .*: run ${rerun('reach')} again`));
    writeFileSync(join(other, 'vla-reach.json'), taskRecordJson(record('push', 'x')));
    expect(() => readTaskRecords(other, ['reach'])).toThrow(`holds push at RL seed 0, not reach at 0: run ${rerun('reach')} again`);
    writeFileSync(join(other, 'vla-reach.json'), taskRecordJson({ ...record('reach', 'x'), runKey: 'feedfeedfeedfeedfeedfeed' }));
    expect(() => readTaskRecords(other, ['reach'])).toThrow(`was run by other code (run key feedfeedfeedfeedfeedfeed; this code's ${runKey('reach', false)}): run ${rerun('reach')} again`);
    // A seeded run's results are its own file, and a seed's file must hold that seed.
    writeFileSync(join(other, resultFile('reach', 1)), taskRecordJson(record('reach', 'x')));
    expect(() => readTaskRecords(other, ['reach'], 1)).toThrow('holds reach at RL seed 0, not reach at 1: run `npm run bench -- vla --task reach --seed 1` again');
  });

  it('run keys name the task, and the same code gives the same key', () => {
    const k = runKey('reach', false);
    expect(k).toMatch(/^[0-9a-f]{24}$/);
    expect(runKey('reach', false)).toBe(k);
    expect(new Set([k, runKey('push', false), runKey('reach', true)]).size).toBe(3);
  });

  it('a task\'s own WMRL constants move its run key and leave the other task\'s', () => {
    const reach = runKey('reach', false), push = runKey('push', false);
    const gate = ANCHORS.reach.gate;
    try {
      ANCHORS.reach.gate = { window: 8, minGroups: 2 };
      expect(runKey('reach', false)).not.toBe(reach);
      expect(runKey('push', false)).toBe(push);
    } finally {
      ANCHORS.reach.gate = gate;
    }
    expect(runKey('reach', false)).toBe(reach);
  });

  it('the harness refuses --combine where it cannot apply', () => {
    const bench = (...args: string[]) => spawnSync('npx', ['tsx', 'bench/run.ts', ...args], { encoding: 'utf8' });
    const noCombine = bench('sim', '--combine');
    expect(noCombine.status).toBe(2);
    expect(noCombine.stderr).toContain('benchmark \'sim\' has nothing to combine');
    const withTask = bench('vla', '--combine', '--task', 'push');
    expect(withTask.status).toBe(2);
    expect(withTask.stderr).toContain('--combine builds the report from full runs\' results: not with --task');
  }, 60_000);
});
