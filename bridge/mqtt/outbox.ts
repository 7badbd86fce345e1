// The robot side's durable outbox for episode upload: every episode record is committed to a local
// SQLite file (WAL, synchronous=FULL) before it is published, and leaves the file only when the
// service has acknowledged it as stored. A robot process that crashes or loses power picks up
// where it was: EpisodeUploader re-sends what the outbox still holds, and an episode that was
// still recording is ended as partial (its process, and the state to continue it, are gone).
import Database from 'better-sqlite3';
import type { EpisodeStepMsg, WireMeta } from './messages.js';

export interface OutboxEpisode {
  meta: WireMeta;
  nextSeq: number;
  ackedUpTo: number;
  end?: { steps: number; status: 'complete' | 'partial' };
  /** Unacknowledged steps, in seq order. */
  steps: EpisodeStepMsg[];
}

export class EpisodeOutbox {
  private readonly db: Database.Database;
  private readonly q: Record<string, Database.Statement>;

  private constructor(readonly file: string) {
    this.db = new Database(file);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = FULL');
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS outbox_episodes (
        id TEXT PRIMARY KEY, meta TEXT NOT NULL, next_seq INTEGER NOT NULL, acked_up_to INTEGER NOT NULL,
        end_steps INTEGER, end_status TEXT);
      CREATE TABLE IF NOT EXISTS outbox_steps (
        episode TEXT NOT NULL, seq INTEGER NOT NULL, msg TEXT NOT NULL, PRIMARY KEY (episode, seq));`);
    this.q = {
      begin: this.db.prepare('INSERT INTO outbox_episodes (id, meta, next_seq, acked_up_to) VALUES (?, ?, 0, -1)'),
      step: this.db.prepare('INSERT INTO outbox_steps (episode, seq, msg) VALUES (?, ?, ?)'),
      next: this.db.prepare('UPDATE outbox_episodes SET next_seq = ? WHERE id = ?'),
      end: this.db.prepare('UPDATE outbox_episodes SET end_steps = ?, end_status = ? WHERE id = ?'),
      ack: this.db.prepare('UPDATE outbox_episodes SET acked_up_to = max(acked_up_to, ?) WHERE id = ?'),
      dropSteps: this.db.prepare('DELETE FROM outbox_steps WHERE episode = ? AND seq <= ?'),
      dropEpisode: this.db.prepare('DELETE FROM outbox_episodes WHERE id = ?'),
      dropAllSteps: this.db.prepare('DELETE FROM outbox_steps WHERE episode = ?'),
      episodes: this.db.prepare('SELECT * FROM outbox_episodes ORDER BY rowid'),
      stepsOf: this.db.prepare('SELECT msg FROM outbox_steps WHERE episode = ? ORDER BY seq'),
    };
  }

  /** Opens (creating if needed) the outbox file. */
  static open(file: string): EpisodeOutbox {
    return new EpisodeOutbox(file);
  }

  begin(meta: WireMeta): void {
    this.q.begin!.run(meta.id, JSON.stringify(meta));
  }

  /** Durable when it returns. */
  step(m: EpisodeStepMsg): void {
    this.db.transaction(() => {
      this.q.step!.run(m.episodeId, m.seq, JSON.stringify(m));
      this.q.next!.run(m.seq + 1, m.episodeId);
    })();
  }

  end(episodeId: string, steps: number, status: 'complete' | 'partial'): void {
    this.q.end!.run(steps, status, episodeId);
  }

  /** The service stored steps 0..upTo: they leave the outbox. */
  acked(episodeId: string, upTo: number): void {
    this.db.transaction(() => {
      this.q.ack!.run(upTo, episodeId);
      this.q.dropSteps!.run(episodeId, upTo);
    })();
  }

  /** The service holds the whole episode and its end: it leaves the outbox. */
  done(episodeId: string): void {
    this.db.transaction(() => {
      this.q.dropAllSteps!.run(episodeId);
      this.q.dropEpisode!.run(episodeId);
    })();
  }

  /** Everything not yet fully acknowledged, oldest episode first. */
  pending(): OutboxEpisode[] {
    const rows = this.q.episodes!.all() as Array<{ id: string; meta: string; next_seq: number; acked_up_to: number; end_steps: number | null; end_status: 'complete' | 'partial' | null }>;
    return rows.map((r) => ({
      meta: JSON.parse(r.meta) as WireMeta,
      nextSeq: r.next_seq,
      ackedUpTo: r.acked_up_to,
      ...(r.end_steps !== null && r.end_status !== null ? { end: { steps: r.end_steps, status: r.end_status } } : {}),
      steps: (this.q.stepsOf!.all(r.id) as Array<{ msg: string }>).map((s) => JSON.parse(s.msg) as EpisodeStepMsg),
    }));
  }

  close(): void {
    this.db.close();
  }
}
