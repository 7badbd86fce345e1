// `wmrl episodes` and `wmrl export`: the recorded episodes — list them, export them to MCAP, import a bag.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { exportEpisode } from '../../episodes/mcap/export.js';
import { importEpisode } from '../../episodes/mcap/import.js';
import { EpisodeStore } from '../../episodes/store/store.js';
import { progressBar } from '../progress.js';
import { printTable } from '../table.js';

async function withStore<T>(file: string, f: (s: EpisodeStore) => Promise<T>): Promise<T> {
  const store = EpisodeStore.open(file);
  try {
    return await f(store);
  } finally {
    store.close();
  }
}

export const list = (o: { store: string }) =>
  withStore(o.store, async (store) => {
    const all = store.list();
    if (!all.length) console.log(`no episodes in ${o.store}`);
    for (const e of all) {
      const when = new Date(e.meta.startedAt).toISOString();
      console.log(`${e.meta.id}  ${e.status.padEnd(9)} ${String(e.steps).padStart(5)} steps  ${e.success === undefined ? '       ' : e.success ? 'success' : 'failure'}  ${e.meta.robot} (${e.meta.hardwareProfile})  policy ${e.meta.policyVersion}  ${when}`);
    }
  });

export const exportOne = (id: string, out: string, o: { store: string; lz4: boolean }) =>
  withStore(o.store, async (store) => {
    await exportEpisode(store.get(id), out, { compression: o.lz4 ? 'lz4' : 'none' });
    console.log(`wrote ${out}`);
  });

export const importOne = (file: string, o: { store: string }) =>
  withStore(o.store, async (store) => {
    const e = await importEpisode(file);
    for (const step of e.steps) store.ingest(e.meta, step);
    store.finish(e.meta.id, { status: e.status === 'recording' ? 'partial' : e.status, success: e.steps.at(-1)?.success });
    console.log(`imported ${e.meta.id}: ${e.steps.length} steps from ${file}`);
  });

/** `wmrl export`: many episodes into a folder, one bag each, with progress and a summary table. */
export const exportMany = (ids: string[], o: { out: string; store: string; lz4: boolean }) =>
  withStore(o.store, async (store) => {
    const chosen = ids.length ? ids : store.list({ status: 'complete' }).map((e) => e.meta.id);
    if (!chosen.length) throw new Error(`no complete episodes in ${o.store} to export`);
    mkdirSync(o.out, { recursive: true });
    const bar = progressBar();
    const rows: Array<Record<string, string | number>> = [];
    for (const [k, id] of chosen.entries()) {
      const e = store.get(id);
      const file = join(o.out, `${id}.mcap`);
      await exportEpisode(e, file, { compression: o.lz4 ? 'lz4' : 'none' });
      rows.push({ episode: id.slice(0, 8), steps: e.steps.length, status: e.status, robot: e.meta.robot, file });
      bar(k + 1, chosen.length, id.slice(0, 8));
    }
    printTable(`exported ${chosen.length} episode(s) to ${o.out}`, rows);
  });
