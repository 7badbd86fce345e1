// `wmrl episodes`: the recorded episodes — list them, export one to MCAP, import a bag.
import { parseArgs } from 'node:util';
import { exportEpisode } from '../../episodes/mcap/export.js';
import { importEpisode } from '../../episodes/mcap/import.js';
import { EpisodeStore } from '../../episodes/store/store.js';
import { DEFAULT_STORE } from './drive.js';

export async function episodes(args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { store: { type: 'string', default: DEFAULT_STORE }, lz4: { type: 'boolean', default: false } } });
  const [verb, ...rest] = positionals;
  const store = EpisodeStore.open(values.store!);
  try {
    if (verb === 'list' || verb === undefined) {
      const all = store.list();
      if (!all.length) console.log(`no episodes in ${values.store}`);
      for (const e of all) {
        const when = new Date(e.meta.startedAt).toISOString();
        console.log(`${e.meta.id}  ${e.status.padEnd(9)} ${String(e.steps).padStart(5)} steps  ${e.success === undefined ? '       ' : e.success ? 'success' : 'failure'}  ${e.meta.robot} (${e.meta.hardwareProfile})  policy ${e.meta.policyVersion}  ${when}`);
      }
    } else if (verb === 'export') {
      const [id, out] = rest;
      if (!id || !out) throw new Error('usage: wmrl episodes export <episode-id> <out.mcap> [--lz4]');
      await exportEpisode(store.get(id), out, { compression: values.lz4 ? 'lz4' : 'none' });
      console.log(`wrote ${out}`);
    } else if (verb === 'import') {
      const [file] = rest;
      if (!file) throw new Error('usage: wmrl episodes import <bag.mcap>');
      const e = await importEpisode(file);
      for (const step of e.steps) store.ingest(e.meta, step);
      store.finish(e.meta.id, { status: e.status === 'recording' ? 'partial' : e.status, success: e.steps.at(-1)?.success });
      console.log(`imported ${e.meta.id}: ${e.steps.length} steps from ${file}`);
    } else throw new Error(`unknown episodes verb '${verb}' (list, export, import)`);
  } finally {
    store.close();
  }
}
