// `wmrl research` through the real entry point at a tiny budget: flags checked against the recipe's schema, a run
// that ends in a policy.json that loads, its summary row, and --resume extending it from the journal of executions
// (the journaled ones not run again, the replayed step identical).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadResearchArtifact, type ResearchRow } from '../recipes/autoresearch.js';

const dir = mkdtempSync(join(tmpdir(), 'wmrl-research-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const wmrl = (...args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', 'bin/wmrl.ts', ...args], { encoding: 'utf8', timeout: 240_000 });
const TINY = ['--task', 'controller', '--algo', 'standard', '--groups-per-step', '1', '--group-size', '2', '--eval-seeds', '1'];

describe('wmrl research', () => {
  it('rejects bad flags with an error naming the flag, before any execution', () => {
    const cases: Array<[string[], RegExp]> = [
      [['--steps', '0'], /--steps: expected integer to be greater or equal to 1, got '0'/],
      [['--task', 'chess'], /--task <C>' argument 'chess' is invalid\. Allowed choices are classifier, controller/],
      [['--algo', 'standard', '--pure-wm'], /--pure-wm, pureWm; --warmup, warmup\) are WMRL options; algo standard has no world model/],
      [['--task', 'controller', '--eval-seeds', '4'], /evaluation seeds \(--eval-seeds, evalSeeds\) 4: task controller has 3 training seeds/],
      [['--lr', '0'], /--lr: expected number to be greater than 0, got '0'/],
      [['--resume'], /--resume needs --out DIR/],
    ];
    for (const [args, msg] of cases) {
      const r = wmrl('research', ...args, ...(args.includes('--resume') ? [] : ['--out', join(dir, 'never')]));
      expect(r.status, args.join(' ')).toBe(1);
      expect(r.stderr).toMatch(msg);
    }
    expect(existsSync(join(dir, 'never', 'executions.jsonl'))).toBe(false);
  });

  it('runs, prints its summary row, exports a proposal that loads, and --resume --steps extends it replaying the journal', () => {
    const out = join(dir, 'run');
    const r = wmrl('research', ...TINY, '--steps', '1', '--out', out);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain(`| ${out} | controller | standard | 1 |`);
    const a = loadResearchArtifact(join(out, 'policy.json'));
    expect(a.steps).toBe(1);
    expect(a.task).toBe('controller');
    const first = JSON.parse(readFileSync(join(out, 'steps.json'), 'utf8')) as ResearchRow[];
    expect(first).toHaveLength(1);
    expect(a.proposal).toEqual(first[0]!.greedy);

    expect(wmrl('research', '--out', out, '--resume', '--algo', 'wmrl').stderr).toMatch(/--resume continues the run as it was started; drop --algo/);
    const again = wmrl('research', '--out', out, '--resume', '--steps', '2', '--json');
    expect(again.status, again.stderr).toBe(0);
    const rows = JSON.parse(readFileSync(join(out, 'steps.json'), 'utf8')) as ResearchRow[];
    // --json: stdout is the run's one JSON document, its steps those of steps.json.
    const doc = JSON.parse(again.stdout) as { run: string; policy: string; executed: number; steps: ResearchRow[] };
    expect(doc).toMatchObject({ run: out, policy: join(out, 'policy.json') });
    expect(doc.steps).toEqual(rows);
    expect(rows).toHaveLength(2);
    // Step 0 replayed from the journal: the same proposals, outcomes and slot time.
    expect(rows[0]).toEqual(first[0]);
    const ran = doc.executed;
    const journal = readFileSync(join(out, 'executions.jsonl'), 'utf8').trim().split('\n');
    expect(ran).toBeLessThan(journal.length);
    expect(journal.length).toBeLessThanOrEqual(rows[1]!.executions + 2);
    expect(loadResearchArtifact(join(out, 'policy.json')).steps).toBe(2);
  });
});
