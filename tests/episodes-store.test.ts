// The episode store: round trips, idempotent re-delivery, list/get/delete, refusals that name the
// field and keep what is stored, WAL mode, schema versions, and dead-writer recovery.

import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { MIGRATIONS } from '../episodes/store/schema.js';
import { EpisodeStore } from '../episodes/store/store.js';
import { EpisodeStoreError } from '../episodes/store/validate.js';
import { incarnationOf } from '../episodes/store/writer.js';
import type { EpisodeStep } from '../episodes/types.js';
import { makeStep, meta, richEpisode } from './helpers/episode-data.js';

const open: EpisodeStore[] = [];
const fresh = (): string => join(mkdtempSync(join(tmpdir(), 'episodes-')), 'episodes.db');
const openStore = (file: string, opts = {}): EpisodeStore => {
  const s = EpisodeStore.open(file, opts);
  open.push(s);
  return s;
};
afterEach(() => {
  for (const s of open.splice(0)) s.close();
});

const errorOf = (f: () => unknown): EpisodeStoreError => {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(EpisodeStoreError);
    return e as EpisodeStoreError;
  }
  throw new Error('expected an EpisodeStoreError');
};

describe('episode store', () => {
  it('opens in WAL mode with synchronous=FULL at the latest schema version', () => {
    const file = fresh();
    const s = openStore(file);
    expect(s.journalMode()).toBe('wal');
    expect(s.synchronous()).toBe('FULL');
    expect(openStore(fresh(), { synchronous: 'NORMAL' }).synchronous()).toBe('NORMAL');
    s.begin(meta('a')).append(makeStep('a', 0, false));
    expect(existsSync(`${file}-wal`)).toBe(true);
    const raw = new Database(file, { readonly: true });
    expect(raw.pragma('journal_mode', { simple: true })).toBe('wal');
    raw.close();
    expect(s.schemaVersion()).toBe(MIGRATIONS.length);
  });

  it('round-trips episodes with images (rgb8, png, jpeg), features and instructions', () => {
    const s = openStore(fresh());
    for (const enc of ['rgb8', 'png', 'jpeg'] as const) {
      const ep = richEpisode(`ep-${enc}`, 6, enc, 7);
      const rec = s.begin(ep.meta);
      for (const step of ep.steps) expect(rec.append(step)).toEqual({ inserted: true });
      rec.finish({ success: true });
      expect(s.get(ep.meta.id)).toEqual(ep);
    }
  });

  it('prepares its statements once, not once per step: a second recording prepares none', () => {
    const s = openStore(fresh());
    const record = (id: string) => {
      const rec = s.begin(meta(id));
      for (let seq = 0; seq < 20; seq++) rec.append(makeStep(id, seq, seq === 19));
      rec.finish({ success: true });
    };
    const prepare = vi.spyOn(Database.prototype, 'prepare');
    try {
      record('first');
      const first = prepare.mock.calls.length;
      expect(first).toBeGreaterThan(0);
      expect(first).toBeLessThan(20);
      record('second');
      expect(prepare.mock.calls.length).toBe(first);
      expect(s.get('second').steps).toHaveLength(20);
      expect(s.list().map((e) => [e.meta.id, e.steps, e.success])).toEqual([['first', 20, true], ['second', 20, true]]);
    } finally {
      prepare.mockRestore();
    }
  });

  it('stores NaN actions and rewards as recorded, and writes finish({success}) to the last step', () => {
    const s = openStore(fresh());
    const rec = s.begin(meta('nan'));
    const step = makeStep('nan', 0, true);
    step.action[1] = NaN;
    step.reward = NaN;
    rec.append(step);
    rec.finish({ success: false });
    const got = s.get('nan');
    expect(Number.isNaN(got.steps[0].action[1])).toBe(true);
    expect(Number.isNaN(got.steps[0].reward)).toBe(true);
    expect(got.steps[0].success).toBe(false);
    expect(s.list()[0].success).toBe(false);
  });

  it('ignores and counts a duplicate (episode, seq), keeping the first delivery', () => {
    const s = openStore(fresh());
    const rec = s.begin(meta('d'));
    const first = makeStep('d', 0, false);
    expect(rec.append(first).inserted).toBe(true);
    const resent = makeStep('d', 0, false);
    resent.reward = 99;
    expect(rec.append(resent)).toEqual({ inserted: false });
    expect(rec.append(makeStep('d', 1, true)).inserted).toBe(true);
    rec.finish();
    // A re-delivery after the episode ended is still just a duplicate.
    expect(s.ingest(meta('d'), makeStep('d', 1, true))).toEqual({ inserted: false });
    const [summary] = s.list();
    expect(summary.duplicates).toBe(2);
    expect(summary.steps).toBe(2);
    expect(s.get('d').steps[0].reward).toBe(first.reward);
  });

  it('allows seq gaps but reports them', () => {
    const s = openStore(fresh());
    const rec = s.begin(meta('g'));
    rec.append(makeStep('g', 0, false));
    expect(rec.append(makeStep('g', 3, false))).toEqual({ inserted: true, gap: { expected: 1, got: 3 } });
    // A late step filling the gap is not a gap.
    expect(rec.append(makeStep('g', 1, false))).toEqual({ inserted: true });
    expect(s.get('g').steps.map((x) => x.seq)).toEqual([0, 1, 3]);
  });

  it('lists with filters, gets and deletes', () => {
    const s = openStore(fresh());
    const a = s.begin(meta('a'));
    a.append(makeStep('a', 0, true));
    a.finish();
    s.begin({ ...meta('b'), robot: 'arm-2' }).append(makeStep('b', 0, false));
    expect(s.list().map((e) => e.meta.id)).toEqual(['a', 'b']);
    expect(s.list({ status: 'complete' }).map((e) => e.meta.id)).toEqual(['a']);
    expect(s.list({ robot: 'arm-2' }).map((e) => [e.meta.id, e.status, e.steps])).toEqual([['b', 'recording', 1]]);
    expect(s.list({ status: 'partial' })).toEqual([]);
    expect(s.get('a').meta).toEqual(meta('a'));
    expect(s.delete('a')).toBe(true);
    expect(s.delete('a')).toBe(false);
    expect(errorOf(() => s.get('a')).code).toBe('NOT_FOUND');
    expect(s.list().map((e) => e.meta.id)).toEqual(['b']);
    expect(s.get('b').steps).toHaveLength(1);
  });

  it('list limit: the newest N after the filters, read in SQL, still oldest first', () => {
    const s = openStore(fresh());
    for (let i = 0; i < 200; i++) {
      const id = `e${String(i).padStart(3, '0')}`;
      const r = s.begin({ ...meta(id), startedAt: 1_764_000_000_000 + i, robot: i % 2 ? 'arm-1' : 'arm-2' });
      for (let k = 0; k <= i % 3; k++) r.append(makeStep(id, k, false));
      if (i % 4) r.finish();
    }
    const last5 = s.list({ limit: 5 });
    expect(last5.map((e) => e.meta.id)).toEqual(['e195', 'e196', 'e197', 'e198', 'e199']);
    expect(last5.map((e) => e.steps)).toEqual([1, 2, 3, 1, 2]);
    // The filters apply before the limit: the 5 newest of those that match, not the matching ones among the newest 5.
    expect(s.list({ status: 'recording', robot: 'arm-2', limit: 5 }).map((e) => e.meta.id)).toEqual(['e180', 'e184', 'e188', 'e192', 'e196']);
    expect(s.list({ limit: 1000 })).toHaveLength(200);
    expect(s.list({ limit: 0 })).toEqual([]);
    expect(() => s.list({ limit: -1 })).toThrow(/^limit: -1 is not a whole number/);
  });

  it('stream: metadata now, steps a page at a time as they are taken, equal to get()', () => {
    const s = openStore(fresh());
    const r = s.begin(meta('long'));
    for (let k = 0; k < 25; k++) r.append(makeStep('long', k, k === 24));
    r.finish();
    const e = s.stream('long', 10);
    expect(e.meta).toEqual(meta('long'));
    expect(e.status).toBe('complete');
    const it = e.steps[Symbol.iterator]();
    expect(it.next().value).toEqual(s.get('long').steps[0]);
    // The store is free between pages: it records meanwhile.
    s.begin(meta('other')).append(makeStep('other', 0, false));
    const rest: EpisodeStep[] = [];
    for (let n = it.next(); !n.done; n = it.next()) rest.push(n.value);
    expect(rest).toEqual(s.get('long').steps.slice(1));
    expect([...s.stream('long', 5).steps]).toEqual(s.get('long').steps);
    expect(errorOf(() => s.stream('nope')).code).toBe('NOT_FOUND');
  });

  it('refuses malformed steps with an error naming the field, and loses nothing stored', () => {
    const s = openStore(fresh());
    const rec = s.begin(meta('m'));
    rec.append(makeStep('m', 0, false));
    const before = s.get('m');
    const bad = (edit: (st: EpisodeStep) => void): EpisodeStoreError => {
      const st = makeStep('m', 1, false);
      edit(st);
      return errorOf(() => rec.append(st));
    };
    const cases: Array<[string, (st: EpisodeStep) => void, RegExp]> = [
      ['step.obs.position', (st) => ((st.obs.position = new Float64Array(4)), (st.obs.velocity = new Float64Array(4))), /has 4 joints, the episode's first step had 3/],
      ['step.obs.velocity', (st) => (st.obs.velocity = new Float64Array(2)), /has 2 values but step.obs.position has 3/],
      ['step.action', (st) => (st.action = new Float32Array(5)), /has 5 values, the episode's first step had 2/],
      ['step.action', (st) => (st.action = new Float64Array(2) as unknown as Float32Array), /must be a Float32Array, got Float64Array/],
      ['step.obs.features', (st) => (st.obs.features = new Float32Array(2)), /has 2 features, the episode's first step had no features/],
      ['step.tObs', (st) => (st.tObs = NaN), /must be a finite number/],
      ['step.seq', (st) => (st.seq = -1), /non-negative integer/],
      ['step.done', (st) => ((st as unknown as Record<string, unknown>).done = 'yes'), /must be a boolean/],
      [
        'step.obs.image.data',
        (st) => (st.obs.image = { width: 2, height: 2, encoding: 'rgb8', data: new Uint8Array(5) }),
        /rgb8 2x2 needs 12 bytes, got 5/,
      ],
      ['step.obs.image.encoding', (st) => (st.obs.image = { width: 2, height: 2, encoding: 'bmp' as 'png', data: new Uint8Array(5) }), /rgb8, jpeg or png/],
    ];
    for (const [field, edit, msg] of cases) {
      const e = bad(edit);
      expect(e.field).toBe(field);
      expect(e.message).toMatch(new RegExp(`^${field.replace(/\./g, '\\.')}: `));
      expect(e.message).toMatch(msg);
      expect(e.message).toContain('episode m');
    }
    expect(s.get('m')).toEqual(before);
    expect(rec.append(makeStep('m', 1, false)).inserted).toBe(true);
  });

  it('refuses new steps after finish, finishing twice is a no-op, and begin refuses an existing id', () => {
    const s = openStore(fresh());
    const rec = s.begin(meta('f'));
    rec.append(makeStep('f', 0, true));
    rec.finish({ success: true });
    rec.finish({ success: true });
    expect(errorOf(() => rec.append(makeStep('f', 1, false))).code).toBe('NOT_RECORDING');
    expect(errorOf(() => s.begin(meta('f'))).code).toBe('DUPLICATE_EPISODE');
    expect(errorOf(() => s.begin({ ...meta('x'), startedAt: NaN })).field).toBe('meta.startedAt');
    expect(s.get('f').steps).toHaveLength(1);
  });

  it('ingests remote steps: creates the episode, survives reopen, abandon() marks it partial', () => {
    const file = fresh();
    const s = openStore(file);
    expect(s.ingest(meta('r'), makeStep('r', 0, false)).inserted).toBe(true);
    expect(s.ingest(meta('r'), makeStep('r', 1, false)).inserted).toBe(true);
    expect(errorOf(() => s.ingest({ ...meta('r'), robot: 'other' }, makeStep('r', 2, false))).field).toBe('meta.robot');
    s.close();
    const again = openStore(file);
    // No local writer to outlive: a remote episode is left to its transport to end.
    expect(again.recovered).toEqual([]);
    expect(again.list()[0]).toMatchObject({ status: 'recording', steps: 2 });
    expect(again.list()[0].writerPid).toBeUndefined();
    again.abandon('r');
    expect(again.get('r').status).toBe('partial');
    expect(again.get('r').steps).toHaveLength(2);
  });

  it('close() marks what it was still recording partial', () => {
    const file = fresh();
    const s = EpisodeStore.open(file);
    s.begin(meta('c')).append(makeStep('c', 0, false));
    s.close();
    const t = openStore(file);
    expect(t.get('c').status).toBe('partial');
    expect(t.get('c').steps).toHaveLength(1);
  });

  it('recovery: a live writer is left alone; a dead one, or a reused pid, is marked partial', async () => {
    const file = fresh();
    const writer = openStore(file);
    writer.begin(meta('mine')).append(makeStep('mine', 0, false));
    // Another store on the same file (another process would see the same): writer still open.
    expect(openStore(file).recovered).toEqual([]);

    // A live foreign process recorded as the writer; then the same pid with another start time.
    const sleeper = spawn('sleep', ['30']);
    await new Promise((r) => sleeper.once('spawn', r));
    const pid = sleeper.pid as number;
    const raw = new Database(file);
    raw.prepare(`INSERT INTO episodes (id, robot, policy_version, hardware_profile, started_at, status, writer_pid, writer_token, writer_incarnation)
                 VALUES (?, 'arm', 'v', 'h', 0, 'recording', ?, 'tok', ?)`).run('foreign', pid, incarnationOf(pid));
    raw.prepare(`INSERT INTO episodes (id, robot, policy_version, hardware_profile, started_at, status, writer_pid, writer_token, writer_incarnation)
                 VALUES (?, 'arm', 'v', 'h', 0, 'recording', ?, 'tok', ?)`).run('reused', pid, 'other-boot/123');
    // This very process, but a token no open store holds (a store of an earlier run with our pid).
    raw.prepare(`INSERT INTO episodes (id, robot, policy_version, hardware_profile, started_at, status, writer_pid, writer_token, writer_incarnation)
                 VALUES (?, 'arm', 'v', 'h', 0, 'recording', ?, 'stale-token', ?)`).run('stale', process.pid, incarnationOf(process.pid));
    raw.close();
    const second = openStore(file);
    expect(second.recovered.sort()).toEqual(['reused', 'stale']);
    expect(second.get('foreign').status).toBe('recording');
    expect(second.get('mine').status).toBe('recording');

    sleeper.kill('SIGKILL');
    await new Promise((r) => sleeper.once('exit', r));
    const third = openStore(file);
    expect(third.recovered).toEqual(['foreign']);
    expect(third.list({ status: 'partial' }).map((e) => e.meta.id).sort()).toEqual(['foreign', 'reused', 'stale']);
  });

  it('schema versions: refuses a newer database, runs added migrations keeping data', () => {
    const file = fresh();
    const s = EpisodeStore.open(file);
    s.begin(meta('v')).append(makeStep('v', 0, true));
    s.close();
    const next = openStore(file, { migrations: [...MIGRATIONS, (db: Database.Database) => db.exec('ALTER TABLE episodes ADD COLUMN note TEXT')] });
    expect(next.schemaVersion()).toBe(MIGRATIONS.length + 1);
    expect(next.get('v').steps).toHaveLength(1);
    next.close();
    const e = errorOf(() => EpisodeStore.open(file));
    expect(e.code).toBe('SCHEMA_TOO_NEW');
    expect(e.message).toContain(file);
    expect(e.message).toMatch(/schema version 2, this code knows up to 1/);
  });
});
