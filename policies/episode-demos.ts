// Behaviour-cloning data from recorded episodes: the episode store (SQLite), an MCAP recording, or a
// LeRobot v3.0 dataset folder, read by the readers of episodes/ and turned into the Demonstrations that
// bc.ts fits (observation vectors of the robot's layout, actions, camera images, instructions).
//
// A source is named `store:PATH`, `mcap:PATH` or `lerobot:DIR`. Every step must fit the robot: its
// observation has the layout's joints and features (common/layout.ts: the error names the episode, the
// step and the layout), its action the robot's length, its image (when the policy reads images) the
// policy's size. A recording that declares joint names (an MCAP bag's JointState, a LeRobot dataset's
// layout) must name the robot's joints in order.
import { readFileSync } from 'node:fs';
import { buildObservation, layoutDim, LayoutError, type ObservationLayout } from '../common/layout.js';
import { cameraRgb } from '../common/image.js';
import { importLeRobot } from '../episodes/lerobot/import.js';
import { importEpisodeBytes } from '../episodes/mcap/import.js';
import { EpisodeStore } from '../episodes/store/store.js';
import type { Episode, EpisodeStatus } from '../episodes/types.js';
import type { Demonstrations } from './bc.js';

export type EpisodeSource = { kind: 'store'; path: string } | { kind: 'mcap'; path: string } | { kind: 'lerobot'; path: string };

/** `store:PATH`, `mcap:PATH` or `lerobot:DIR` → a source. */
export function parseEpisodeSource(spec: string): EpisodeSource {
  const m = /^(store|mcap|lerobot):(.+)$/.exec(spec);
  if (!m) throw new Error(`episode source '${spec}': give store:PATH (an episode store), mcap:PATH (a recording) or lerobot:DIR (a LeRobot v3.0 dataset)`);
  return { kind: m[1] as EpisodeSource['kind'], path: m[2]! };
}

export interface LoadEpisodesOptions {
  /** The robot's observation layout. */
  layout: ObservationLayout;
  /** The robot's action length. */
  actionDim: number;
  /** Store: which episodes (default every complete one). */
  ids?: readonly string[];
  /** Store: also partial episodes (default complete only). */
  status?: EpisodeStatus | 'all';
}

/** The episodes of a source, checked against the robot's layout where the source declares names. */
export async function loadEpisodes(src: EpisodeSource, o: LoadEpisodesOptions): Promise<Episode[]> {
  const where = `${src.kind}:${src.path}`;
  if (src.kind === 'lerobot') return (await importLeRobot(src.path, { layout: o.layout, actionDim: o.actionDim })).episodes;
  if (src.kind === 'mcap') {
    const e = importEpisodeBytes(readFileSync(src.path), src.path);
    const names = (e.meta.extra as { joints?: unknown } | undefined)?.joints;
    if (Array.isArray(names) && names.length > 0) {
      const want = o.layout.joints.map((j) => j.name);
      const i = want.findIndex((n, k) => names[k] !== n);
      if (i >= 0 || names.length !== want.length) {
        const k = i >= 0 ? i : want.length;
        throw new LayoutError(`${where}: the recording's joint ${k} is '${String(names[k] ?? 'nothing')}', the robot's is '${want[k] ?? 'nothing'}' (recording: ${names.join(', ')}; robot: ${want.join(', ')})`);
      }
    }
    return [e];
  }
  const store = EpisodeStore.open(src.path);
  try {
    const ids = o.ids?.length ? o.ids : store.list(o.status === 'all' ? {} : { status: o.status ?? 'complete' }).map((s) => s.meta.id);
    return ids.map((id) => store.get(id));
  } finally {
    store.close();
  }
}

export interface EpisodeDemoOptions {
  layout: ObservationLayout;
  actionDim: number;
  /** Actions per row: the step's action and the next chunk − 1 (the last repeated past the episode's end). */
  chunk?: number;
  /** The policy reads camera images of this size: every step must carry one. */
  image?: { height: number; width: number };
  /** The policy reads instructions: every step (or its episode) must carry one. */
  instructions?: boolean;
  /** Names the source in errors. */
  source: string;
}

/** Demonstrations (one row per step) from episodes, with images and instructions when the policy reads them. */
export function demonstrationsFromEpisodes(episodes: readonly Episode[], o: EpisodeDemoOptions): Demonstrations & { episodes: number; steps: number } {
  const D = layoutDim(o.layout), A = o.actionDim, k = o.chunk ?? 1;
  if (!(Number.isInteger(k) && k >= 1)) throw new Error(`demonstrations: chunk must be a positive integer, got ${k}`);
  const rows = episodes.reduce((n, e) => n + e.steps.length, 0);
  if (rows === 0) throw new Error(`${o.source}: no steps to learn from (${episodes.length} episode(s))`);
  const px = o.image ? o.image.height * o.image.width * 3 : 0;
  const obs = new Float32Array(rows * D), action = new Float32Array(rows * k * A);
  const images = o.image ? new Uint8Array(rows * px) : undefined;
  const instructions: string[] = [];
  let r = 0;
  for (const e of episodes) {
    e.steps.forEach((s, t) => {
      const who = `${o.source} episode ${e.meta.id} step ${s.seq}`;
      buildObservation(o.layout, s.obs, who, obs.subarray(r * D, (r + 1) * D));
      for (let c = 0; c < k; c++) {
        const a = e.steps[Math.min(t + c, e.steps.length - 1)]!.action;
        if (a.length !== A) throw new Error(`${who}: action has ${a.length} entries, the robot takes ${A}`);
        action.set(a, (r * k + c) * A);
      }
      if (images) images.set(rgbOf(s.obs.image, o.image!, who), r * px);
      if (o.instructions) {
        const ins = s.obs.instruction ?? e.meta.instruction;
        if (ins === undefined) throw new Error(`${who}: the policy reads the instruction; neither the step nor its episode has one`);
        instructions.push(ins);
      }
      r++;
    });
  }
  return { obs, action, ...(images ? { images } : {}), ...(o.instructions ? { instructions } : {}), episodes: episodes.length, steps: rows };
}

function rgbOf(img: Episode['steps'][number]['obs']['image'], size: { height: number; width: number }, who: string): Uint8Array {
  if (!img) throw new Error(`${who}: the policy reads camera images; the step has none`);
  return cameraRgb(img, size, `${who}: its camera image`);
}

/** Per-entry mean and std of observation rows (std 1 where an entry never varies), for the policy's fixed normalization. */
export function observationStats(obs: Float32Array, D: number): { mean: number[]; std: number[] } {
  const n = obs.length / D;
  const mean = new Array<number>(D).fill(0), sq = new Array<number>(D).fill(0);
  for (let i = 0; i < n; i++) for (let j = 0; j < D; j++) mean[j]! += obs[i * D + j]! / n;
  for (let i = 0; i < n; i++) for (let j = 0; j < D; j++) sq[j]! += (obs[i * D + j]! - mean[j]!) ** 2 / n;
  return { mean, std: sq.map((v) => (v > 1e-10 ? Math.sqrt(v) : 1)) };
}
