// The durable end of MQTT episode upload: steps arriving from remote robots go into the SQLite
// episode store, which dedupes by (episode, seq) and commits before the ingest acknowledges.
import type { EpisodeStore } from '../../episodes/store/store.js';
import type { EpisodeSink } from './episodes.js';

export function storeSink(store: EpisodeStore): EpisodeSink {
  return {
    ingest: (meta, step) => store.ingest(meta, step).inserted,
    // The store ignores a repeated finish with the same status, as a restarted service may repeat it.
    end: (meta, { status }) => store.finish(meta.id, { status }),
  };
}
