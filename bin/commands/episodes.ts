// `wmrl episodes` and `wmrl export`: the recorded episodes — list them, export them to MCAP, import a bag,
// export and import LeRobot v3.0 datasets.
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { ObservationLayout } from '../../common/layout.js';
import { exportLeRobot } from '../../episodes/lerobot/export.js';
import { importLeRobot } from '../../episodes/lerobot/import.js';
import { checkCompression, exportEpisode, type Compression } from '../../episodes/mcap/export.js';
import { importEpisode } from '../../episodes/mcap/import.js';
import { exportRosbag2 } from '../../episodes/mcap/rosbag2.js';
import { EpisodeStore } from '../../episodes/store/store.js';
import { makeEnv } from '../../sim/index.js';
import { progressBar } from '../progress.js';
import { printJson } from '../json-output.js';
import { printTable } from '../table.js';
import { SIM_COMMAND_HISTORY } from '../../recipes/options.js';

async function withStore<T>(file: string, f: (s: EpisodeStore) => Promise<T>): Promise<T> {
  const store = EpisodeStore.open(file);
  try {
    return await f(store);
  } finally {
    store.close();
  }
}

export const list = (o: { store: string; json?: boolean }) =>
  withStore(o.store, async (store) => {
    const all = store.list();
    // The fields of the service's GET /api/episodes.
    if (o.json) {
      return printJson({
        store: o.store,
        episodes: all.map(({ meta: m, status, steps, success }) => ({ id: m.id, robot: m.robot, policyVersion: m.policyVersion, hardwareProfile: m.hardwareProfile, task: m.task ?? null, instruction: m.instruction ?? null, startedAt: m.startedAt, status, steps, success: success ?? null })),
      });
    }
    if (!all.length) console.log(`no episodes in ${o.store}`);
    for (const e of all) {
      const when = new Date(e.meta.startedAt).toISOString();
      console.log(`${e.meta.id}  ${e.status.padEnd(9)} ${String(e.steps).padStart(5)} steps  ${e.success === undefined ? '       ' : e.success ? 'success' : 'failure'}  ${e.meta.robot} (${e.meta.hardwareProfile})  policy ${e.meta.policyVersion}  ${when}`);
    }
  });

/** The export flags: the chunk compression (--lz4 or --zstd) and the form (--rosbag2, or OUT ending in '/': a bag folder). */
export interface ExportFlags {
  lz4?: boolean;
  zstd?: boolean;
  rosbag2?: boolean;
}

function compressionOf(o: ExportFlags): Compression {
  if (o.lz4 && o.zstd) throw new Error('--lz4 and --zstd: give one chunk compression');
  const c: Compression = o.zstd ? 'zstd' : o.lz4 ? 'lz4' : 'none';
  checkCompression(c);
  return c;
}

/** Whether OUT names a rosbag2 bag folder: --rosbag2, or a trailing '/'; a `.mcap` name with --rosbag2 is refused. */
function asFolder(out: string, o: ExportFlags): boolean {
  const folder = o.rosbag2 === true || /[/\\]$/.test(out);
  if (folder && /\.mcap[/\\]?$/i.test(out)) throw new Error(`${out}: a rosbag2 bag is a folder (its file goes inside it as <folder>_0.mcap); name the folder without .mcap, or drop --rosbag2 for one .mcap file`);
  return folder;
}

export const exportOne = (id: string, out: string, o: { store: string } & ExportFlags) => {
  const compression = compressionOf(o);
  const folder = asFolder(out, o);
  return withStore(o.store, async (store) => {
    if (folder) {
      const bag = await exportRosbag2(store.stream(id), out, { compression });
      console.log(`wrote rosbag2 bag ${bag.dir} (${bag.metadata.message_count} messages, ${bag.metadata.topics_with_message_count.length} topics): metadata.yaml, ${bag.metadata.relative_file_paths[0]}`);
      return;
    }
    await exportEpisode(store.stream(id), out, { compression });
    console.log(`wrote ${out}`);
  });
};

export const importOne = (file: string, o: { store: string }) =>
  withStore(o.store, async (store) => {
    const e = await importEpisode(file);
    for (const step of e.steps) store.ingest(e.meta, step);
    store.finish(e.meta.id, { status: e.status === 'recording' ? 'partial' : e.status, success: e.steps.at(-1)?.success });
    console.log(`imported ${e.meta.id}: ${e.steps.length} steps from ${file}`);
  });

/** `wmrl export`: many episodes into a folder, one bag each (`<id>.mcap`, or with --rosbag2 a bag folder `<id>/`), with progress and a summary table. */
export const exportMany = (ids: string[], o: { out: string; store: string; json?: boolean } & ExportFlags) => {
  const compression = compressionOf(o);
  return withStore(o.store, async (store) => {
    const chosen = ids.length ? ids : store.list({ status: 'complete' }).map((e) => e.meta.id);
    if (!chosen.length) throw new Error(`no complete episodes in ${o.store} to export`);
    mkdirSync(o.out, { recursive: true });
    const bar = progressBar();
    const done: Array<{ id: string; steps: number; status: string; robot: string; file: string }> = [];
    for (const [k, id] of chosen.entries()) {
      const e = store.get(id);
      const file = o.rosbag2 ? (await exportRosbag2(e, join(o.out, id), { compression })).dir : join(o.out, `${id}.mcap`);
      if (!o.rosbag2) await exportEpisode(e, file, { compression });
      done.push({ id, steps: e.steps.length, status: e.status, robot: e.meta.robot, file });
      bar(k + 1, chosen.length, id.slice(0, 8));
    }
    if (o.json) return printJson({ out: o.out, episodes: done });
    printTable(`exported ${chosen.length} episode(s) to ${o.out}`, done.map(({ id, ...r }) => ({ episode: id.slice(0, 8), ...r })));
  });
};

/**
 * The observation layout and control rate of `sim:TASK[:PROFILE]` (reporting its last `commandHistory` commands),
 * for naming a dataset's state entries.
 */
async function simLayout(robot: string, commandHistory: number | undefined): Promise<{ layout: ObservationLayout; controlHz: number; actionNames: string[] }> {
  if (!robot.startsWith('sim:')) throw new Error(`--robot ${robot}: give sim:TASK[:PROFILE] (the layout of a robot YAML is its declaration's, not yet read here)`);
  const [, task, profile = 'nominal'] = robot.split(':');
  const env = await makeEnv({ task: task!, profile, commandHistory: commandHistory ?? SIM_COMMAND_HISTORY });
  try {
    return { layout: env.layout, controlHz: env.spec.controlHz, actionNames: [...env.spec.actuatorNames] };
  } finally {
    env.dispose();
  }
}

/** `wmrl episodes export-lerobot DB DIR`: the store's episodes (all, or --ids) as one LeRobot v3.0 dataset. */
export async function exportLeRobotCmd(
  db: string, dir: string,
  o: { robot?: string; ids?: string[]; fps?: number; status?: 'complete' | 'all'; commandHistory?: number; images?: 'video' | 'png'; camera?: string },
): Promise<void> {
  if (o.commandHistory !== undefined && !o.robot) throw new Error('--command-history names the layout of --robot sim:TASK[:PROFILE]; give --robot too');
  const sim = o.robot ? await simLayout(o.robot, o.commandHistory) : undefined;
  await withStore(db, async (store) => {
    const ids = o.ids?.length ? o.ids : store.list(o.status === 'all' ? {} : { status: 'complete' }).map((e) => e.meta.id);
    if (!ids.length) throw new Error(`no ${o.status === 'all' ? '' : 'complete '}episodes in ${db} to export`);
    const bar = progressBar();
    const eps = ids.map((id, k) => {
      bar(k + 1, ids.length, `reading ${id.slice(0, 8)}`);
      return store.get(id);
    });
    const res = await exportLeRobot(eps, dir, {
      layout: sim?.layout, actionNames: sim?.actionNames, fps: o.fps ?? (sim ? Math.round(sim.controlHz) : undefined), images: o.images, camera: o.camera,
    });
    const cam = res.camera ? `; camera ${res.camera.key} as ${res.camera.dtype === 'video' ? `${res.camera.codec} video in ${res.videoFiles.length} mp4 file(s)` : 'PNG images'}` : '';
    console.log(`wrote LeRobot v3.0 dataset ${dir}: ${res.episodes} episode(s), ${res.frames} frames in ${res.dataFiles.length} data file(s)${cam}`);
  });
}

/** `wmrl episodes import-lerobot DIR DB`: a LeRobot v3.0 dataset into the store. */
export async function importLeRobotCmd(dir: string, db: string, o: { robot?: string; image?: string; commandHistory?: number }): Promise<void> {
  if (o.commandHistory !== undefined && !o.robot) throw new Error('--command-history names the layout of --robot sim:TASK[:PROFILE]; give --robot too');
  const sim = o.robot ? await simLayout(o.robot, o.commandHistory) : undefined;
  const ds = await importLeRobot(dir, { layout: sim?.layout, actionDim: sim?.actionNames.length, imageKey: o.image });
  mkdirSync(dirname(db), { recursive: true });
  await withStore(db, async (store) => {
    const bar = progressBar();
    for (const [k, e] of ds.episodes.entries()) {
      for (const step of e.steps) store.ingest(e.meta, step);
      store.finish(e.meta.id, { status: e.status === 'recording' ? 'partial' : e.status, success: e.steps.at(-1)?.success });
      bar(k + 1, ds.episodes.length, e.meta.id);
    }
  });
  console.log(`imported ${ds.episodes.length} episode(s), ${ds.episodes.reduce((n, e) => n + e.steps.length, 0)} frames from ${dir} into ${db}`);
}
