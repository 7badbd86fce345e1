// In-memory EpisodeSink for transport tests: dedupes by (episode, seq), as the SQLite store does.

import type { EpisodeSink } from '../../bridge/mqtt/episodes.js';
import type { EpisodeMeta, EpisodeStep } from '../../episodes/types.js';

export class MemorySink implements EpisodeSink {
  readonly steps = new Map<string, EpisodeStep>();
  readonly metas = new Map<string, EpisodeMeta>();
  readonly ended = new Map<string, { steps: number; status: string }>();
  inserts = 0;
  duplicates = 0;
  endCalls = 0;

  ingest(meta: EpisodeMeta, step: EpisodeStep): boolean {
    const key = `${meta.id}/${step.seq}`;
    if (this.steps.has(key)) {
      this.duplicates++;
      return false;
    }
    this.metas.set(meta.id, meta);
    this.steps.set(key, step);
    this.inserts++;
    return true;
  }

  /** Idempotent, as EpisodeSink.end must be: a restarted service may finish an episode again. */
  end(meta: EpisodeMeta, info: { steps: number; status: 'complete' | 'partial' }): void {
    this.endCalls++;
    const prev = this.ended.get(meta.id);
    if (prev && (prev.steps !== info.steps || prev.status !== info.status)) throw new Error(`episode ${meta.id} ended twice, differently`);
    this.ended.set(meta.id, info);
  }

  has(episodeId: string, seq: number): boolean {
    return this.steps.has(`${episodeId}/${seq}`);
  }
}
