// `wmrl train` through the real entry point: its flag checks, and a smoke run whose imagined groups per update
// (--imagine) and anchor groups (--anchor-groups) are what the flags ask, ending in a policy `drive` runs.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CALIBRATE_EPISODES, IMAGINE, POST_TRAIN_LR, SIM_COMMAND_HISTORY } from '../recipes/options.js';
import { keptUpdates } from './helpers/keep-rule.js';

const dir = mkdtempSync(join(tmpdir(), 'wmrl-train-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const wmrl = (...args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', 'bin/wmrl.ts', ...args], { encoding: 'utf8', timeout: 240_000 });

describe('wmrl train', () => {
  it('rejects bad flags with an error naming the flag, before any training', () => {
    const cases: Array<[string[], RegExp]> = [
      [['--algo', 'standard', '--imagine', '4'], /--imagine: WMRL options; --algo standard has no world model/],
      [['--prompts', '2', '--imagine', '1', '--anchor-groups', '3'], /anchor groups per update \(--anchor-groups, anchorGroups\) 3: more than the 2 groups an update imagines \(prompts 2 x imagine 1\)/],
      [['--imagine', '0'], /--imagine: expected integer to be greater or equal to 1, got '0'/],
      [['--anchor-groups=-1'], /--anchor-groups: expected number to be greater or equal to 0, got '-1'/],
      [['--anchor-groups', 'half'], /--anchor-groups: expected number, got 'half'/],
      [['--kl-coef=-0.1'], /--kl-coef: expected number to be greater or equal to 0, got '-0.1'/],
      [['--lr', '0'], /--lr: expected number to be greater or equal to 0.000001, got '0'/],
      [['--world-model', 'identified-sim', '--calibrate', '0'], /world model \(--world-model, worldModel\) identified-sim: calibration \(--calibrate, calibrate\) 0 identifies no sim to imagine in/],
      [['--world-model', 'identified-sim', '--pure-wm'], /world model \(--world-model, worldModel\) identified-sim: a pure world-model run \(--pure-wm, pureWm\) makes no calibration/],
      [['--algo', 'standard', '--world-model', 'learned'], /--world-model: WMRL options; --algo standard has no world model/],
      [['--world-model', 'physics'], /--world-model/],
    ];
    for (const [args, msg] of cases) {
      const r = wmrl('train', ...args, '--out', join(dir, 'never'));
      expect(r.status, args.join(' ')).toBe(1);
      expect(r.stderr).toMatch(msg);
    }
    expect(existsSync(join(dir, 'never', 'state.json'))).toBe(false);
  });

  it('--robot repeated: a fleet, checked before any training', () => {
    const cases: Array<[string[], RegExp]> = [
      [['--robot', 'sim:reach:gap', '--robot', 'sim:push:gap'], /--robot: a fleet of sims is copies of one sim:TASK\[:PROFILE\]; got sim:reach:gap, sim:push:gap/],
      [['--robot', 'sim:reach:gap', '--robot', 'launch/robots/sim-reach.yaml'], /--robot: a fleet is robot YAMLs or copies of one sim, not both/],
      [['--robot', 'sim:reach:gap', '--robot', 'sim:reach:gap', '--robots', '4'], /--robots 4 stands one robot in for several in the robot-time accounting; a fleet of 2 \(--robot repeated\) is its own robots/],
      [['--policy', 'vla', '--robot', 'sim:reach:gap', '--robot', 'sim:reach:gap'], /--policy vla trains on one sim robot; got --robot sim:reach:gap, --robot sim:reach:gap/],
    ];
    for (const [args, msg] of cases) {
      const r = wmrl('train', ...args, '--out', join(dir, 'never-fleet'));
      expect(r.status, args.join(' ')).toBe(1);
      expect(r.stderr).toMatch(msg);
    }
  });

  it('--world-model identified-sim: imagines in the sim its calibration identified, across a resume', () => {
    const out = join(dir, 'sim-imagined');
    const r = wmrl('train', '--quick', '--robot', 'sim:reach:gap', '--world-model', 'identified-sim', '--updates', '2', '--prompts', '2', '--group', '2', '--eval-episodes', '2', '--out', out, '--json');
    expect(r.status, r.stderr).toBe(0);
    type Row = { actionDelay: number; refit: boolean; imaginedTransitions: number };
    const doc = JSON.parse(r.stdout) as { config: { worldModel: string; calibrate: number; imagine: number }; calibration: { delay: number }; updates: Row[] };
    // --imagine left out: the identified sim's schedule.
    expect(doc.config).toMatchObject({ worldModel: 'identified-sim', calibrate: CALIBRATE_EPISODES, imagine: IMAGINE['identified-sim'] });
    // The sim carries the calibration's delay, and no update refits a learned model it does not use.
    for (const row of doc.updates) expect(row).toMatchObject({ actionDelay: doc.calibration.delay, refit: false, imaginedTransitions: 2 * IMAGINE['identified-sim'] * 2 * 100 });
    const again = wmrl('train', '--resume', '--updates', '3', '--out', out, '--json');
    expect(again.status, again.stderr).toBe(0);
    const rows = JSON.parse(readFileSync(join(out, 'history.json'), 'utf8')) as Row[];
    expect(rows).toHaveLength(3);
    expect(rows[2]).toMatchObject({ actionDelay: doc.calibration.delay, refit: false });
  });

  it('a fleet of two sim robots: every group on both at once, robot time and wall-clock apart, each episode recorded by its robot', () => {
    const out = join(dir, 'fleet');
    const r = wmrl('train', '--quick', '--algo', 'standard', '--robot', 'sim:reach:gap', '--robot', 'sim:reach:gap', '--calibrate', '0', '--updates', '1', '--prompts', '2', '--group', '2', '--out', out);
    expect(r.status, r.stderr).toBe(0);
    const rows = JSON.parse(readFileSync(join(out, 'history.json'), 'utf8')) as Array<{ robotEpisodes: number; robotSeconds: number; robotWallSeconds: number }>;
    expect(rows[0]!.robotEpisodes).toBe(4);
    expect(rows[0]!.robotWallSeconds).toBeLessThan(rows[0]!.robotSeconds);
    // No calibration and no --lr: the run records the uncalibrated clone's step it took.
    expect(JSON.parse(readFileSync(join(out, 'config.json'), 'utf8'))).toMatchObject({ robot: 'sim:reach:gap', fleet: ['sim:reach:gap', 'sim:reach:gap'], robots: 1, lr: POST_TRAIN_LR.uncalibrated });
    expect(r.stdout).toMatch(/\| robot hours \| robots' wall-clock hours \|/);
    const d = wmrl('episodes', 'list', '--store', join(out, 'episodes.db'), '--json');
    expect(d.status, d.stderr).toBe(0);
    const robots = (JSON.parse(d.stdout) as { episodes: Array<{ robot: string }> }).episodes.map((e) => e.robot);
    expect(new Set(robots)).toEqual(new Set(['sim-reach-gap-1', 'sim-reach-gap-2']));
  });

  it('evaluates the starting policy first and exports the policy of the evaluation it keeps, across a resume', () => {
    const out = join(dir, 'keep');
    const r = wmrl('train', '--quick', '--algo', 'standard', '--robot', 'sim:reach:gap', '--updates', '2', '--prompts', '1', '--group', '2', '--eval-episodes', '4', '--out', out, '--json');
    expect(r.status, r.stderr).toBe(0);
    type Point = { update: number; success: number; episodes: number; se: number };
    const doc = JSON.parse(r.stdout) as { config: { evalEpisodes: number; calibrate: number; commandHistory: number }; calibration?: { robotEpisodes: number }; start: Point; kept: Point; updates: Array<{ update: number; evalSuccess?: number; keptUpdate?: number }> };
    expect(doc.config.evalEpisodes).toBe(4);
    // The product's defaults are the recipe bench embodied measures: calibration first, the robot's last commands in its observation.
    expect(doc.config).toMatchObject({ calibrate: CALIBRATE_EPISODES, commandHistory: SIM_COMMAND_HISTORY });
    expect(doc.calibration?.robotEpisodes).toBe(CALIBRATE_EPISODES);
    expect(doc.start).toMatchObject({ update: 0, episodes: 4 });
    expect(doc.start.se).toBeCloseTo(Math.sqrt((doc.start.success * (1 - doc.start.success)) / 4), 12);
    expect(r.stderr).toMatch(/0\/2 start · success \d+% ± \d+/);
    // Every update is evaluated (updates/5 rounds down to 1); the kept one is the latest unless the best beats it by more than one standard error.
    const measured = [doc.start, ...doc.updates.map((u) => ({ update: u.update, success: u.evalSuccess! }))];
    const keptAt = keptUpdates(measured, 4);
    const best = measured.find((m) => m.update === keptAt.at(-1))!;
    expect(doc.kept).toMatchObject({ update: best.update, success: best.success });
    expect(doc.updates.map((u) => u.keptUpdate)).toEqual(keptAt.slice(1));
    // Extended by a resume: the kept evaluation comes back from the folder, nothing is measured twice, and the summary says what was exported.
    const again = wmrl('train', '--resume', '--updates', '3', '--out', out);
    expect(again.status, again.stderr).toBe(0);
    expect(again.stderr).not.toMatch(/start · success/);
    const rows = JSON.parse(readFileSync(join(out, 'history.json'), 'utf8')) as Array<{ evalSuccess: number; keptUpdate: number }>;
    const last = rows.at(-1)!;
    const kept = keptUpdates([...measured, { update: 3, success: last.evalSuccess }], 4).at(-1)!;
    expect(last.keptUpdate).toBe(kept);
    expect(again.stdout).toMatch(kept === 0 ? /exported: the policy the run started from, the evaluation kept: success \d+% ± \d+ \(start \d+% ± \d+; ± one standard error over 4 episodes\)/ : new RegExp(`exported: the policy after update ${kept}`));
  });

  it('imagines --imagine x --prompts groups per update, runs --anchor-groups on the robot, penalizes the KL to the clone by --kl-coef, and exports a policy drive runs', () => {
    const out = join(dir, 'run');
    const r = wmrl('train', '--quick', '--robot', 'sim:reach:gap', '--updates', '4', '--prompts', '2', '--group', '2', '--imagine', '3', '--anchor-groups', '0.5', '--kl-coef', '0.5', '--lr', '2e-4', '--seed', '1', '--calibrate', '0', '--out', out, '--json');
    expect(r.status, r.stderr).toBe(0);
    const rows = JSON.parse(readFileSync(join(out, 'history.json'), 'utf8')) as Array<{ groups: number; realGroups: number; robotEpisodes: number; imaginedTransitions: number; refKl: number | null }>;
    expect(rows).toHaveLength(4);
    // --json: stdout is the run's one JSON document, its updates those of history.json (the progress went to stderr).
    const doc = JSON.parse(r.stdout) as { run: string; policy: string; history: string; config: { klCoef: number }; updates: unknown[] };
    expect(doc).toMatchObject({ run: out, policy: join(out, 'policy.onnx'), history: join(out, 'history.json'), config: { klCoef: 0.5 } });
    expect(doc.updates).toEqual(rows);
    for (const row of rows) {
      expect(row.groups).toBe(6);
      expect(row.imaginedTransitions).toBe(6 * 2 * 100);
      expect(row.realGroups).toBeLessThanOrEqual(1);
      // --kl-coef reached the policy gradient: every update measures its KL to the clone (null without the penalty).
      expect(row.refKl).toBeGreaterThanOrEqual(0);
    }
    // The policy drifts from the clone as it updates, and the penalty measures it.
    expect(rows.at(-1)!.refKl!).toBeGreaterThan(0);
    expect(JSON.parse(readFileSync(join(out, 'config.json'), 'utf8'))).toMatchObject({ klCoef: 0.5, lr: 2e-4 });
    // 0.5 anchor groups per update on average, none forced: over 4 updates between 0 and 4 groups of 2 episodes.
    expect(rows.at(-1)!.robotEpisodes).toBe(2 * rows.reduce((a, x) => a + x.realGroups, 0));
    expect(rows.at(-1)!.robotEpisodes).toBeLessThan(2 * 4);
    const d = wmrl('drive', '--robot', 'sim:reach:gap', '--policy', join(out, 'policy.onnx'), '--episodes', '1', '--fast', '--store', join(dir, 'drive.db'));
    expect(d.status, d.stderr).toBe(0);
  });
});
