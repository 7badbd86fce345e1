// Robot-side durability of episode upload: a robot process that records into its durable outbox
// and is SIGKILLed at random points loses nothing it recorded. Each restart takes over the outbox,
// ends the interrupted episode as partial and re-sends; the service's SQLite store ends up with
// every step any run reported recorded, exactly once, and the interrupted episodes marked partial.
// Same kill delays again: OUTBOX_KILL_SEED=<seed> npx vitest run tests/mqtt-outbox.test.ts
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { connect, endClient } from '../bridge/mqtt/client.js';
import { EpisodeIngest } from '../bridge/mqtt/episodes.js';
import { startMosquitto } from '../bridge/mqtt/mosquitto.js';
import { storeSink } from '../bridge/mqtt/store-sink.js';
import { EpisodeStore } from '../episodes/store/store.js';
import { transpileEntry } from './helpers/episode-build.js';
import { makeStep, rng } from './helpers/episode-data.js';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..');
const SEED = Number(process.env.OUTBOX_KILL_SEED ?? Math.floor(Math.random() * 1e6));
const KILLS = 8;

function run(js: string, args: string[]) {
  const proc = spawn(process.execPath, [js, ...args], { cwd: repoRoot });
  const lines: string[] = [];
  let buf = '';
  let stderr = '';
  proc.stdout.on('data', (d: Buffer) => {
    buf += d.toString();
    const parts = buf.split('\n');
    buf = parts.pop() ?? '';
    lines.push(...parts);
  });
  proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((r) => proc.on('exit', (code) => r(code)));
  return { proc, lines, exited, stderr: () => stderr };
}

describe(`robot-side outbox under SIGKILL (seed ${SEED})`, () => {
  it(`${KILLS} robot kills: every recorded step stored exactly once, interrupted episodes partial`, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'wmrl-outbox-'));
    const broker = await startMosquitto();
    const store = EpisodeStore.open(join(dir, 'service.db'));
    const svc = await connect({ url: broker.url, clientId: 'outbox-service', clean: false, protocolVersion: 5, reconnectPeriodMs: 100, onError: () => {} });
    const ingestErrors: Error[] = [];
    const ingest = await EpisodeIngest.create(svc, storeSink(store), { onError: (e) => ingestErrors.push(e) });
    const robot = transpileEntry(repoRoot, 'tests/helpers/outbox-robot.ts', 'outbox-robot');
    const rand = rng(SEED);
    const recorded = new Map<string, number>(); // episode → highest seq reported in the outbox
    const interrupted: string[] = [];
    try {
      for (let k = 0; k <= KILLS; k++) {
        const last = k === KILLS;
        const child = run(robot.file, [broker.url, join(dir, 'outbox.db'), `run${k}`, last ? '2' : '100', '12']);
        if (last) {
          const code = await Promise.race([child.exited, new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 30_000))]);
          expect(code, child.stderr()).toBe(0);
          expect(child.lines).toContain('DRAINED');
        } else {
          // Once it records, kill it somewhere in its first few episodes.
          const t0 = Date.now();
          while (!child.lines.some((l) => l.startsWith('C ')) && Date.now() - t0 < 20_000) await new Promise((r) => setTimeout(r, 5));
          expect(child.lines.some((l) => l.startsWith('C ')), child.stderr()).toBe(true);
          await new Promise((r) => setTimeout(r, 20 + Math.floor(rand() * 300)));
          child.proc.kill('SIGKILL');
          await child.exited;
        }
        for (const line of child.lines) {
          const [kind, id, seq] = line.split(' ');
          if (kind === 'C') recorded.set(id!, Math.max(recorded.get(id!) ?? -1, Number(seq)));
          if (kind === 'INTERRUPTED' && id) interrupted.push(...id.split(','));
        }
      }
      // The last run drained: the service acknowledged everything the outbox held.
      const stored = new Map(store.list().map((e) => [e.meta.id, e]));
      let steps = 0;
      for (const [id, maxSeq] of recorded) {
        const e = store.get(id);
        // Every reported step is stored, in one contiguous run; a kill between committing a step to
        // the outbox and printing its line leaves at most one more, also stored.
        const n = e.steps.length;
        expect(n === maxSeq + 1 || (n === maxSeq + 2 && interrupted.includes(id)), `${id}: ${n} stored, ${maxSeq + 1} reported`).toBe(true);
        expect(e.steps.map((s) => s.seq), id).toEqual(Array.from({ length: n }, (_, i) => i));
        for (const s of e.steps) expect(s.reward).toBe(makeStep(id, s.seq, false).reward);
        steps += e.steps.length;
        // Episodes a kill interrupted are partial; every other one ran to its end.
        expect(stored.get(id)?.status, id).toBe(interrupted.includes(id) ? 'partial' : 'complete');
        if (!interrupted.includes(id)) expect(maxSeq, id).toBe(11);
      }
      expect(interrupted.length).toBeGreaterThanOrEqual(KILLS - 2); // nearly every kill lands mid-episode
      // An interrupted episode is partial; one killed between begin and its first step has nothing to store.
      for (const id of interrupted) expect(stored.get(id)?.status ?? 'nothing stored', id).toBe(recorded.has(id) || stored.has(id) ? 'partial' : 'nothing stored');
      expect(recorded.size).toBeGreaterThan(KILLS);
      expect(steps).toBeGreaterThan(KILLS * 12);
      expect(ingestErrors).toEqual([]);
      console.log(`[outbox seed ${SEED}] kills=${KILLS} episodes=${recorded.size} steps=${steps} interrupted=${interrupted.length} duplicates_suppressed=${ingest.stats.duplicates}`);
    } finally {
      ingest.close();
      await endClient(svc, true);
      store.close();
      await broker.dispose();
      rmSync(robot.dir, { recursive: true, force: true });
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
