// The durable episode store: every real episode is written to SQLite as it happens, one committed
// transaction per step, so a step whose append() returned survives the process being killed.
//
// Durability choice: WAL with synchronous=FULL. In WAL mode a commit reaches the OS before
// append() returns with NORMAL too, which is enough for a killed process; FULL also fsyncs the
// WAL on every commit, so the steps survive a power cut (an e-stop that drops power is a normal
// event on a robot). It costs one fsync per step, well under a control period at 10-100 Hz.

import Database from 'better-sqlite3';
import type { Episode, EpisodeMeta, EpisodeStatus, EpisodeStep } from '../types.js';
import { MIGRATIONS, migrate, rowToStep, stepToRow, type Migration, type StepRow } from './schema.js';
import { EpisodeStoreError, validateMeta, validateStep, type StepShape } from './validate.js';
import { newWriter, releaseWriter, writerAlive, type WriterIdentity } from './writer.js';

export interface StoreOptions {
  /** FULL (default) survives power loss; NORMAL survives a killed process only. */
  synchronous?: 'FULL' | 'NORMAL';
  /** How long to wait for another process's write lock, ms (default 5000). */
  busyTimeoutMs?: number;
  /** Schema versions; tests pass extra ones to exercise the migration hook. */
  migrations?: readonly Migration[];
}

/** What happened to one delivered step. */
export interface AppendResult {
  /** False when (episode, seq) was already stored: the duplicate is ignored and counted. */
  inserted: boolean;
  /** Set when seq skips past the highest stored seq + 1 (allowed, but reported). */
  gap?: { expected: number; got: number };
}

export interface EpisodeSummary {
  meta: EpisodeMeta;
  status: EpisodeStatus;
  steps: number;
  /** Duplicate deliveries ignored so far. */
  duplicates: number;
  success?: boolean;
  /** Local writer's pid; undefined for episodes ingested from a remote robot. */
  writerPid?: number;
}

export interface EpisodeRecorder {
  readonly id: string;
  /** Commits one step; when it returns, the step is on disk. */
  append(step: EpisodeStep): AppendResult;
  /** Marks the episode complete; `success` is also written to the last step when it has none. */
  finish(outcome?: { success?: boolean }): void;
}

/** What recording an episode needs of a store: the store itself, or one that hands the steps to it from another thread. */
export type EpisodeSink = Pick<EpisodeStore, 'begin' | 'finish'>;

interface EpisodeRow {
  id: string;
  robot: string;
  policy_version: string;
  hardware_profile: string;
  task: string | null;
  instruction: string | null;
  started_at: number;
  extra: string | null;
  status: EpisodeStatus;
  success: number | null;
  writer_pid: number | null;
  writer_token: string | null;
  writer_incarnation: string | null;
  n_joints: number | null;
  n_action: number | null;
  n_features: number | null;
  duplicates: number;
}

function metaOf(r: EpisodeRow): EpisodeMeta {
  const meta: EpisodeMeta = {
    id: r.id,
    robot: r.robot,
    policyVersion: r.policy_version,
    hardwareProfile: r.hardware_profile,
    startedAt: r.started_at,
  };
  if (r.task !== null) meta.task = r.task;
  if (r.instruction !== null) meta.instruction = r.instruction;
  if (r.extra !== null) meta.extra = JSON.parse(r.extra) as Record<string, unknown>;
  return meta;
}

export class EpisodeStore {
  /** Episodes found in 'recording' by a dead writer when this store opened, now 'partial'. */
  readonly recovered: string[];
  readonly file: string;
  private readonly db: Database.Database;
  private readonly writer: WriterIdentity;
  private closed = false;
  /** Prepared statements by their SQL: a recording prepares its few statements once, not once per step. */
  private readonly statements = new Map<string, Database.Statement>();

  private constructor(file: string, opts: StoreOptions) {
    this.file = file;
    this.db = new Database(file, { timeout: opts.busyTimeoutMs ?? 5000 });
    try {
      this.db.pragma('journal_mode = WAL');
      this.db.pragma(`synchronous = ${opts.synchronous ?? 'FULL'}`);
      this.db.pragma('foreign_keys = ON');
      migrate(this.db, opts.migrations ?? MIGRATIONS, file);
      // The newest episodes (list's limit) without sorting the table. An index only, so no schema
      // version: older code opens the database as before.
      this.db.exec('CREATE INDEX IF NOT EXISTS episodes_started ON episodes (started_at, id)');
    } catch (e) {
      this.db.close();
      throw e;
    }
    this.writer = newWriter();
    try {
      this.recovered = this.recoverDeadWriters();
    } catch (e) {
      releaseWriter(this.writer);
      this.db.close();
      throw e;
    }
  }

  static open(file: string, opts: StoreOptions = {}): EpisodeStore {
    return new EpisodeStore(file, opts);
  }

  /** The journal mode in force ('wal' after open). */
  journalMode(): string {
    return String(this.db.pragma('journal_mode', { simple: true }));
  }

  /** The synchronous level in force on this connection: 'FULL' or 'NORMAL'. */
  synchronous(): 'FULL' | 'NORMAL' | 'OTHER' {
    const level = this.db.pragma('synchronous', { simple: true });
    return level === 2 ? 'FULL' : level === 1 ? 'NORMAL' : 'OTHER';
  }

  schemaVersion(): number {
    return this.db.pragma('user_version', { simple: true }) as number;
  }

  private recoverDeadWriters(): string[] {
    return this.db
      .transaction(() => {
        const rows = this
          .sql(`SELECT id, writer_pid, writer_token, writer_incarnation FROM episodes
                    WHERE status = 'recording' AND writer_pid IS NOT NULL`)
          .all() as Array<Pick<EpisodeRow, 'id' | 'writer_pid' | 'writer_token' | 'writer_incarnation'>>;
        const dead = rows.filter((r) => !writerAlive(r.writer_pid ?? 0, r.writer_token ?? '', r.writer_incarnation ?? ''));
        const mark = this.sql(`UPDATE episodes SET status = 'partial' WHERE id = ? AND status = 'recording'`);
        for (const r of dead) mark.run(r.id);
        return dead.map((r) => r.id);
      })
      .immediate();
  }

  private sql(text: string): Database.Statement {
    let st = this.statements.get(text);
    if (!st) {
      st = this.db.prepare(text);
      this.statements.set(text, st);
    }
    return st;
  }

  private live(): void {
    if (this.closed) throw new EpisodeStoreError('NOT_RECORDING', undefined, `${this.file}: episode store is closed`);
  }

  private row(id: string): EpisodeRow | undefined {
    return this.sql('SELECT * FROM episodes WHERE id = ?').get(id) as EpisodeRow | undefined;
  }

  private insertEpisode(meta: EpisodeMeta, local: boolean): void {
    this
      .sql(
        `INSERT INTO episodes (id, robot, policy_version, hardware_profile, task, instruction, started_at, extra,
                               status, writer_pid, writer_token, writer_incarnation)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'recording', ?, ?, ?)`,
      )
      .run(
        meta.id,
        meta.robot,
        meta.policyVersion,
        meta.hardwareProfile,
        meta.task ?? null,
        meta.instruction ?? null,
        meta.startedAt,
        meta.extra === undefined ? null : JSON.stringify(meta.extra),
        local ? this.writer.pid : null,
        local ? this.writer.token : null,
        local ? this.writer.incarnation : null,
      );
  }

  /** Starts recording a new episode written by this process. */
  begin(meta: EpisodeMeta): EpisodeRecorder {
    this.live();
    validateMeta(meta);
    this.db
      .transaction(() => {
        if (this.row(meta.id)) {
          throw new EpisodeStoreError('DUPLICATE_EPISODE', 'meta.id', `meta.id: episode ${meta.id} already exists in ${this.file}`);
        }
        this.insertEpisode(meta, true);
      })
      .immediate();
    const id = meta.id;
    return {
      id,
      append: (step) => {
        this.live();
        return this.appendTx(id, step, undefined);
      },
      finish: (outcome = {}) => this.finish(id, outcome),
    };
  }

  /**
   * A step that arrived from a remote robot (e.g. over MQTT): creates the episode on its first
   * step, ignores and counts re-deliveries. The remote side ends it with finish() or abandon().
   */
  ingest(meta: EpisodeMeta, step: EpisodeStep): AppendResult {
    this.live();
    validateMeta(meta);
    return this.appendTx(meta.id, step, meta);
  }

  private appendTx(id: string, step: EpisodeStep, remoteMeta: EpisodeMeta | undefined): AppendResult {
    return this.db
      .transaction((): AppendResult => {
        let ep = this.row(id);
        if (ep === undefined && remoteMeta !== undefined) {
          this.insertEpisode(remoteMeta, false);
          ep = this.row(id);
        }
        if (ep === undefined) throw new EpisodeStoreError('NOT_FOUND', 'id', `no episode ${id} in ${this.file}`);
        if (remoteMeta !== undefined && remoteMeta.robot !== ep.robot) {
          throw new EpisodeStoreError('META_MISMATCH', 'meta.robot', `meta.robot: ${remoteMeta.robot} differs from the stored ${ep.robot} (episode ${id})`);
        }
        const shape: StepShape | undefined =
          ep.n_joints === null ? undefined : { joints: ep.n_joints, action: ep.n_action ?? 0, features: ep.n_features ?? -1 };
        const mine = validateStep(step, shape, id);
        if (this.sql('SELECT 1 FROM steps WHERE episode_id = ? AND seq = ?').get(id, step.seq) !== undefined) {
          this.sql('UPDATE episodes SET duplicates = duplicates + 1 WHERE id = ?').run(id);
          return { inserted: false };
        }
        if (ep.status !== 'recording') {
          throw new EpisodeStoreError('NOT_RECORDING', 'step.seq', `step.seq: episode ${id} is ${ep.status}; step ${step.seq} refused`);
        }
        const max = this.sql('SELECT MAX(seq) AS m FROM steps WHERE episode_id = ?').get(id) as { m: number | null };
        const expected = (max.m ?? -1) + 1;
        this
          .sql(
            `INSERT INTO steps VALUES (@episode_id, @seq, @t_obs, @t_act, @stamp, @position, @velocity, @features,
               @image_width, @image_height, @image_encoding, @image, @instruction, @action, @reward, @reward_nan, @done, @success)`,
          )
          .run(stepToRow(id, step));
        if (shape === undefined) {
          this.sql('UPDATE episodes SET n_joints = ?, n_action = ?, n_features = ? WHERE id = ?').run(mine.joints, mine.action, mine.features, id);
        }
        return step.seq > expected ? { inserted: true, gap: { expected, got: step.seq } } : { inserted: true };
      })
      .immediate();
  }

  /**
   * Ends an episode: 'complete' (default) or 'partial'. Finishing again with the same status is a
   * no-op, so a re-delivered "finished" message is harmless.
   */
  finish(id: string, outcome: { success?: boolean; status?: 'complete' | 'partial' } = {}): void {
    this.live();
    const status = outcome.status ?? 'complete';
    this.db
      .transaction(() => {
        const ep = this.row(id);
        if (ep === undefined) throw new EpisodeStoreError('NOT_FOUND', 'id', `no episode ${id} in ${this.file}`);
        if (ep.status === status) return;
        if (ep.status !== 'recording') {
          throw new EpisodeStoreError('NOT_RECORDING', 'status', `status: episode ${id} is already ${ep.status}, cannot mark it ${status}`);
        }
        const success = outcome.success === undefined ? null : outcome.success ? 1 : 0;
        this.sql('UPDATE episodes SET status = ?, success = ?, finished_at = ? WHERE id = ?').run(status, success, Date.now(), id);
        if (success !== null) {
          this
            .sql(`UPDATE steps SET success = ? WHERE episode_id = ? AND success IS NULL
                      AND seq = (SELECT MAX(seq) FROM steps WHERE episode_id = ?)`)
            .run(success, id, id);
        }
      })
      .immediate();
  }

  /** Marks a remote episode whose robot went away as partial, keeping its steps. */
  abandon(id: string): void {
    this.finish(id, { status: 'partial' });
  }

  /**
   * Episodes in start order, oldest first. `limit` keeps the newest that many: the filters and the
   * limit run in SQL, so only the rows returned are read and counted.
   */
  list(filter: { status?: EpisodeStatus; robot?: string; limit?: number } = {}): EpisodeSummary[] {
    this.live();
    if (filter.limit !== undefined && !(Number.isInteger(filter.limit) && filter.limit >= 0)) {
      throw new RangeError(`limit: ${filter.limit} is not a whole number ≥ 0`);
    }
    const rows = this
      .sql(
        `SELECT e.*, (SELECT COUNT(*) FROM steps s WHERE s.episode_id = e.id) AS n_steps FROM (
           SELECT * FROM episodes
           WHERE (@status IS NULL OR status = @status) AND (@robot IS NULL OR robot = @robot)
           ORDER BY started_at DESC, id DESC LIMIT @limit
         ) e ORDER BY e.started_at, e.id`,
      )
      .all({ status: filter.status ?? null, robot: filter.robot ?? null, limit: filter.limit ?? -1 }) as Array<EpisodeRow & { n_steps: number }>;
    return rows.map((r) => {
      const s: EpisodeSummary = { meta: metaOf(r), status: r.status, steps: r.n_steps, duplicates: r.duplicates };
      if (r.success !== null) s.success = r.success === 1;
      if (r.writer_pid !== null) s.writerPid = r.writer_pid;
      return s;
    });
  }

  /**
   * An episode's metadata and status now, and its steps read `batch` at a time as they are iterated,
   * so a long episode is never held whole. No statement stays open between batches: the store
   * records and serves other requests while the steps are consumed.
   */
  stream(id: string, batch = 256): { meta: EpisodeMeta; status: EpisodeStatus; steps: Iterable<EpisodeStep> } {
    this.live();
    const ep = this.row(id);
    if (ep === undefined) throw new EpisodeStoreError('NOT_FOUND', 'id', `no episode ${id} in ${this.file}`);
    const page = this.sql('SELECT * FROM steps WHERE episode_id = ? AND seq > ? ORDER BY seq LIMIT ?');
    const steps = (function* (store: EpisodeStore): Generator<EpisodeStep> {
      let after = -1;
      for (;;) {
        store.live();
        const rows = page.all(id, after, batch) as StepRow[];
        for (const r of rows) yield rowToStep(r);
        if (rows.length < batch) return;
        after = rows.at(-1)!.seq;
      }
    })(this);
    return { meta: metaOf(ep), status: ep.status, steps };
  }

  get(id: string): Episode {
    this.live();
    return this.db
      .transaction((): Episode => {
        const ep = this.row(id);
        if (ep === undefined) throw new EpisodeStoreError('NOT_FOUND', 'id', `no episode ${id} in ${this.file}`);
        const rows = this.sql('SELECT * FROM steps WHERE episode_id = ? ORDER BY seq').all(id) as StepRow[];
        return { meta: metaOf(ep), status: ep.status, steps: rows.map(rowToStep) };
      })
      .deferred();
  }

  /** Deletes an episode and its steps; false when there was none. */
  delete(id: string): boolean {
    this.live();
    return this.db
      .transaction(() => {
        this.sql('DELETE FROM steps WHERE episode_id = ?').run(id);
        return this.sql('DELETE FROM episodes WHERE id = ?').run(id).changes > 0;
      })
      .immediate();
  }

  /** Closes the database; episodes this store was still recording become 'partial'. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    try {
      this.sql(`UPDATE episodes SET status = 'partial' WHERE status = 'recording' AND writer_token = ?`).run(this.writer.token);
    } finally {
      releaseWriter(this.writer);
      this.db.close();
    }
  }
}
