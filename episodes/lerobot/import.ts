// A LeRobot v3.0 dataset folder → Episodes. Reads what LeRobot writes (format.ts): info.json's features,
// tasks.parquet, the episode index under meta/episodes/, and the data files it points to (many episodes a
// file, any column order, float32 or float64 vectors, PNG image structs), and decodes a `video` camera from its
// mp4 files with ffmpeg (video.ts). observation.state is split by the robot's observation layout; a dataset whose
// features do not fit that layout is refused with an error naming the feature. The `wmrl.*` columns of a dataset
// this project wrote restore its episodes exactly (camera frames of a video within the codec's loss).
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { assertSameLayout, layoutDim, layoutFromJson, LayoutError, type ObservationLayout } from '../../common/layout.js';
import type { Image } from '../../common/robot.js';
import type { Episode, EpisodeMeta, EpisodeStatus, EpisodeStep } from '../types.js';
import {
  COLUMNS, EPISODE_COLUMNS, EPISODES_DIR, INFO_PATH, LEGACY_IMAGE_KEY, TASKS_PATH, LeRobotError, fillPath, parseInfo, videoColumns, type Feature, type Info,
} from './format.js';
import { readParquet, requireColumns } from './parquet.js';
import { decodePng, isPng } from '../../common/png.js';
import { decodeVideo, ffmpegTools, probeVideo } from './video.js';

export interface LeRobotImportOptions {
  /** The robot's observation layout: observation.state must be [positions, velocities, features] of it. */
  layout?: ObservationLayout;
  /** The robot's action length; a dataset whose `action` differs is refused. */
  actionDim?: number;
  /** Which camera (`image` or `video` feature) becomes the episode image (default: `observation.image`, else the only one). */
  imageKey?: string;
  /** Only these episode indices (default all). */
  episodes?: number[];
  /** The ffmpeg binary that decodes `video` features, a path or a name on PATH (ffprobe is taken from beside it). */
  ffmpeg?: string;
}

export interface LeRobotDataset {
  info: Info;
  layout: ObservationLayout;
  tasks: string[];
  episodes: Episode[];
}

const num = (v: unknown): number => (typeof v === 'bigint' ? Number(v) : (v as number));

function vector(v: unknown, n: number, what: string): number[] {
  if (!Array.isArray(v) && !ArrayBuffer.isView(v)) throw new LeRobotError(`${what}: expected a list of ${n} numbers, got ${v === null ? 'null' : typeof v}`);
  const a = Array.from(v as ArrayLike<number>, num);
  if (a.length !== n) throw new LeRobotError(`${what}: has ${a.length} entries, the feature's shape says ${n}`);
  return a;
}

function featureOf(info: Info, key: string, file: string): Feature {
  const f = info.features[key];
  if (!f) throw new LeRobotError(`${file}: features lack '${key}' (has ${Object.keys(info.features).join(', ')})`);
  return f;
}

function vectorFeature(info: Info, key: string, file: string): number {
  const f = featureOf(info, key, file);
  if (f.dtype !== 'float32' && f.dtype !== 'float64') throw new LeRobotError(`${file}: feature '${key}' has dtype ${f.dtype}; a float32 or float64 vector is needed`);
  if (f.shape.length !== 1) throw new LeRobotError(`${file}: feature '${key}' has shape [${f.shape.join(', ')}]; a vector (one dimension) is needed`);
  return f.shape[0]!;
}

/** The camera feature that becomes the episode image: `image` (PNG in the parquet) or `video` (mp4 files). */
function chooseImage(info: Info, key: string | undefined, file: string): string | undefined {
  const cameras = Object.entries(info.features).filter(([, f]) => f.dtype === 'image' || f.dtype === 'video').map(([k]) => k);
  if (key !== undefined) {
    if (!cameras.includes(key)) throw new LeRobotError(`${file}: no camera feature '${key}' (image and video features: ${cameras.join(', ') || 'none'})`);
    return key;
  }
  if (cameras.includes(LEGACY_IMAGE_KEY)) return LEGACY_IMAGE_KEY;
  if (cameras.length === 1) return cameras[0];
  if (cameras.length > 1) throw new LeRobotError(`${file}: several cameras (${cameras.join(', ')}); choose one with imageKey (--image)`);
  return undefined;
}

/** [height, width] of a camera feature's shape: [H, W, C] (names height, width, channels) or [C, H, W]. */
function cameraSize(shape: number[]): { width: number; height: number } {
  const [h, w] = shape[0] === 3 && shape.length === 3 && shape[2] !== 3 ? [shape[1]!, shape[2]!] : [shape[0]!, shape[1]!];
  return { width: w, height: h };
}

function imageOf(cell: unknown, encoding: unknown, shape: number[], what: string): Image | undefined {
  if (cell === null || cell === undefined) return undefined;
  const bytes = (cell as { bytes?: unknown }).bytes;
  if (!(bytes instanceof Uint8Array)) {
    const path = (cell as { path?: unknown }).path;
    throw new LeRobotError(`${what}: image has no embedded bytes${typeof path === 'string' ? ` (it refers to the file ${path})` : ''}`);
  }
  const { width: w, height: h } = cameraSize(shape);
  if (encoding === 'png' || encoding === 'jpeg') return { width: w, height: h, encoding, data: new Uint8Array(bytes) };
  if (!isPng(bytes)) {
    if (bytes[0] === 0xff && bytes[1] === 0xd8) return { width: w, height: h, encoding: 'jpeg', data: new Uint8Array(bytes) };
    throw new LeRobotError(`${what}: image bytes are neither PNG nor JPEG`);
  }
  const d = decodePng(bytes, what);
  if (d.width !== w || d.height !== h) throw new LeRobotError(`${what}: image is ${d.width}x${d.height}, the feature's shape says ${w}x${h}`);
  return { width: d.width, height: d.height, encoding: 'rgb8', data: d.rgb };
}

function parquetFiles(root: string): string[] {
  if (!existsSync(root)) return [];
  return readdirSync(root).filter((c) => c.startsWith('chunk-')).sort()
    .flatMap((c) => readdirSync(join(root, c)).filter((f) => f.endsWith('.parquet')).sort().map((f) => join(root, c, f)));
}

export async function importLeRobot(dir: string, opts: LeRobotImportOptions = {}): Promise<LeRobotDataset> {
  const infoFile = join(dir, INFO_PATH);
  if (!existsSync(infoFile)) throw new LeRobotError(`${dir}: no ${INFO_PATH}; not a LeRobot dataset folder`);
  const info = parseInfo(readFileSync(infoFile, 'utf8'), infoFile);

  // The layout: the robot's, checked against the one the dataset declares (when it declares one).
  const declared = info.wmrl ? layoutFromJson(info.wmrl.observation_layout, `${infoFile} wmrl.observation_layout`) : undefined;
  const layout = opts.layout ?? declared;
  const D = vectorFeature(info, COLUMNS.state, infoFile);
  if (!layout) {
    throw new LeRobotError(`${infoFile}: feature '${COLUMNS.state}' has ${D} entries and the dataset declares no observation layout; pass the robot's layout to say which are joint positions, velocities and features`);
  }
  if (opts.layout && declared) {
    try {
      assertSameLayout(opts.layout, declared, infoFile, 'robot', 'dataset');
    } catch (e) {
      throw new LeRobotError((e as LayoutError).message);
    }
  }
  const want = layoutDim(layout);
  if (D !== want) {
    throw new LeRobotError(`${infoFile}: feature '${COLUMNS.state}' has shape [${D}], the robot's observation layout has ${want} entries (${layout.joints.length} joint positions, ${layout.joints.length} velocities, ${layout.features.length} features)`);
  }
  const A = vectorFeature(info, COLUMNS.action, infoFile);
  if (opts.actionDim !== undefined && A !== opts.actionDim) {
    throw new LeRobotError(`${infoFile}: feature '${COLUMNS.action}' has shape [${A}], the robot takes ${opts.actionDim} action entries`);
  }
  for (const k of [COLUMNS.frameIndex, COLUMNS.episodeIndex, COLUMNS.taskIndex]) featureOf(info, k, infoFile);
  const imageKey = chooseImage(info, opts.imageKey, infoFile);
  const imageShape = imageKey ? info.features[imageKey]!.shape : [];
  const video = imageKey !== undefined && info.features[imageKey]!.dtype === 'video';
  // ffmpeg is looked for before any file is read, so a machine without it hears so at once.
  const ff = video ? ffmpegTools(opts.ffmpeg) : undefined;
  if (video && !info.video_path) throw new LeRobotError(`${infoFile}: feature '${imageKey}' is a video but video_path is ${info.video_path === null ? 'null' : 'missing'}`);

  // tasks: pandas stores the index `task` as a column (older writers: __index_level_0__).
  const tasksFile = join(dir, TASKS_PATH);
  const tt = await readParquet(tasksFile);
  const taskCol = tt.columns.includes('task') ? 'task' : tt.columns.includes('__index_level_0__') ? '__index_level_0__' : undefined;
  if (!taskCol) throw new LeRobotError(`${tasksFile}: missing column 'task' (the task text; has ${tt.columns.join(', ')})`);
  requireColumns(tt, ['task_index'], tasksFile);
  const tasks: string[] = [];
  for (const r of tt.rows) tasks[num(r.task_index)] = String(r[taskCol]);

  // the episode index
  const epFiles = parquetFiles(join(dir, EPISODES_DIR));
  if (!epFiles.length) throw new LeRobotError(`${join(dir, EPISODES_DIR)}: no episode parquet files (chunk-*/file-*.parquet)`);
  const epRows: Array<Record<string, unknown>> = [];
  for (const f of epFiles) {
    const t = await readParquet(f);
    requireColumns(t, [EPISODE_COLUMNS.episodeIndex, EPISODE_COLUMNS.length, EPISODE_COLUMNS.dataChunk, EPISODE_COLUMNS.dataFile], f);
    epRows.push(...t.rows);
  }
  epRows.sort((a, b) => num(a[EPISODE_COLUMNS.episodeIndex]) - num(b[EPISODE_COLUMNS.episodeIndex]));
  const chosen = opts.episodes ? epRows.filter((r) => opts.episodes!.includes(num(r[EPISODE_COLUMNS.episodeIndex]))) : epRows;

  // frames, one data file at a time
  const byFile = new Map<string, Array<Record<string, unknown>>>();
  for (const r of chosen) {
    const rel = fillPath(info.data_path, num(r[EPISODE_COLUMNS.dataChunk]), num(r[EPISODE_COLUMNS.dataFile]));
    byFile.set(rel, [...(byFile.get(rel) ?? []), r]);
  }
  const frameCols = [COLUMNS.state, COLUMNS.action, COLUMNS.frameIndex, COLUMNS.episodeIndex, COLUMNS.taskIndex, ...(imageKey && !video ? [imageKey] : [])];
  const out = new Map<number, Episode>();
  /** Per episode: the timestamp of each frame, where a video's frames are looked up. */
  const stampsOf = new Map<number, number[]>();
  const name = basename(resolve(dir));
  for (const [rel, eps] of byFile) {
    const file = join(dir, rel);
    const t = await readParquet(file);
    requireColumns(t, frameCols, file);
    const has = (c: string) => t.columns.includes(c);
    const frames = new Map<number, Array<Record<string, unknown>>>();
    for (const row of t.rows) {
      const e = num(row[COLUMNS.episodeIndex]);
      let list = frames.get(e);
      if (!list) frames.set(e, (list = []));
      list.push(row);
    }
    for (const r of eps) {
      const index = num(r[EPISODE_COLUMNS.episodeIndex]);
      const length = num(r[EPISODE_COLUMNS.length]);
      const rows = (frames.get(index) ?? []).sort((a, b) => num(a[COLUMNS.frameIndex]) - num(b[COLUMNS.frameIndex]));
      if (rows.length !== length) throw new LeRobotError(`${file}: episode ${index} has ${rows.length} frames, ${EPISODES_DIR} says length ${length}`);
      const wm = r[EPISODE_COLUMNS.wmrl] === undefined || r[EPISODE_COLUMNS.wmrl] === null
        ? undefined
        : (JSON.parse(String(r[EPISODE_COLUMNS.wmrl])) as { meta: EpisodeMeta; status: EpisodeStatus; hasFeatures: boolean });
      const epTasks = Array.isArray(r[EPISODE_COLUMNS.tasks]) ? (r[EPISODE_COLUMNS.tasks] as unknown[]).map(String) : [];
      const firstTask = tasks[num(rows[0]?.[COLUMNS.taskIndex] ?? 0)] ?? epTasks[0];
      const meta: EpisodeMeta = wm?.meta ?? {
        id: `lerobot-${name}-${index}`,
        robot: info.robot_type ?? 'lerobot',
        policyVersion: 'lerobot-dataset',
        hardwareProfile: 'unknown',
        ...(firstTask !== undefined ? { task: firstTask, instruction: firstTask } : {}),
        startedAt: 0,
      };
      const nj = layout.joints.length;
      const stamps: number[] = [];
      stampsOf.set(index, stamps);
      const steps: EpisodeStep[] = rows.map((row, k) => {
        const what = `${file} episode ${index} frame ${k}`;
        const state = vector(row[has(COLUMNS.state64) ? COLUMNS.state64 : COLUMNS.state], D, `${what} '${has(COLUMNS.state64) ? COLUMNS.state64 : COLUMNS.state}'`);
        const action = vector(row[COLUMNS.action], A, `${what} '${COLUMNS.action}'`);
        const t = has(COLUMNS.timestamp) ? num(row[COLUMNS.timestamp]) : num(row[COLUMNS.frameIndex]) / info.fps;
        stamps.push(t);
        const tObs = has(COLUMNS.tObs) ? num(row[COLUMNS.tObs]) : t;
        const task = tasks[num(row[COLUMNS.taskIndex])];
        if (task === undefined) throw new LeRobotError(`${what}: task_index ${num(row[COLUMNS.taskIndex])} is not in ${TASKS_PATH}`);
        const step: EpisodeStep = {
          seq: has(COLUMNS.seq) ? num(row[COLUMNS.seq]) : k,
          tObs,
          tAct: has(COLUMNS.tAct) ? num(row[COLUMNS.tAct]) : tObs,
          obs: {
            stamp: has(COLUMNS.stamp) ? num(row[COLUMNS.stamp]) : tObs,
            position: Float64Array.from(state.slice(0, nj)),
            velocity: Float64Array.from(state.slice(nj, 2 * nj)),
          },
          action: Float32Array.from(action),
          reward: has(COLUMNS.reward) && row[COLUMNS.reward] !== null ? num(row[COLUMNS.reward]) : 0,
          done: has(COLUMNS.done) && row[COLUMNS.done] !== null ? row[COLUMNS.done] === true : k === rows.length - 1,
        };
        if (wm ? wm.hasFeatures : layout.features.length > 0) step.obs.features = Float32Array.from(state.slice(2 * nj));
        if (imageKey && !video) {
          const im = imageOf(row[imageKey], has(COLUMNS.imageEncoding) ? row[COLUMNS.imageEncoding] : undefined, imageShape, `${what} '${imageKey}'`);
          if (im) step.obs.image = im;
        }
        if (!has(COLUMNS.hasInstruction) || row[COLUMNS.hasInstruction] === true) step.obs.instruction = task;
        if (has(COLUMNS.success) && row[COLUMNS.success] !== null && row[COLUMNS.success] !== undefined) step.success = row[COLUMNS.success] === true;
        return step;
      });
      out.set(index, { meta, status: wm?.status ?? 'complete', steps });
    }
  }
  if (video) await attachVideoFrames(dir, info, imageKey!, chosen, out, stampsOf, ff!);
  return { info, layout, tasks, episodes: [...out.keys()].sort((a, b) => a - b).map((k) => out.get(k)!) };
}

/**
 * Decodes a video camera's mp4 files and gives each step the frame shown at its episode's from_timestamp plus the
 * frame's timestamp, as LeRobot's loader looks frames up. A frame counts when it is within a quarter of a frame
 * period of that time: concatenating episode files shifts later episodes by a fraction of a millisecond.
 */
async function attachVideoFrames(
  dir: string, info: Info, key: string, rows: Array<Record<string, unknown>>, episodes: Map<number, Episode>, stampsOf: Map<number, number[]>, ff: ReturnType<typeof ffmpegTools>,
): Promise<void> {
  const vc = videoColumns(key);
  const size = cameraSize(info.features[key]!.shape);
  const tolerance = 0.25 / info.fps;
  interface Target { t: number; step: EpisodeStep; episode: number; frame: number; error: number }
  const byFile = new Map<string, Target[]>();
  for (const r of rows) {
    const index = num(r[EPISODE_COLUMNS.episodeIndex]);
    for (const c of [vc.chunk, vc.file, vc.from]) {
      if (r[c] === undefined || r[c] === null) throw new LeRobotError(`${join(dir, EPISODES_DIR)}: episode ${index} has no '${c}' (where feature '${key}' keeps its frames)`);
    }
    const rel = fillPath(info.video_path!, num(r[vc.chunk]), num(r[vc.file]), key);
    const from = num(r[vc.from]);
    const list = byFile.get(rel) ?? [];
    byFile.set(rel, list);
    const ep = episodes.get(index)!;
    stampsOf.get(index)!.forEach((ts, k) => list.push({ t: from + ts, step: ep.steps[k]!, episode: index, frame: k, error: Infinity }));
  }
  for (const [rel, targets] of byFile) {
    const file = join(dir, rel);
    if (!existsSync(file)) {
      const eps = [...new Set(targets.map((t) => t.episode))];
      throw new LeRobotError(`${file}: missing; feature '${key}' keeps the frames of episode${eps.length > 1 ? 's' : ''} ${eps.join(', ')} there`);
    }
    const stream = probeVideo(ff, file);
    if (stream.width !== size.width || stream.height !== size.height) {
      throw new LeRobotError(`${file}: frames are ${stream.width}x${stream.height}, feature '${key}' has shape [${info.features[key]!.shape.join(', ')}] (${size.width}x${size.height})`);
    }
    targets.sort((a, b) => a.t - b.t);
    let first = Infinity, last = -Infinity;
    const decoded = await decodeVideo(ff, file, size, (time, rgb) => {
      first = Math.min(first, time);
      last = Math.max(last, time);
      // the targets within tolerance of this frame: binary search for the first at or after time - tolerance
      let lo = 0, hi = targets.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (targets[mid]!.t < time - tolerance) lo = mid + 1;
        else hi = mid;
      }
      for (let i = lo; i < targets.length && targets[i]!.t <= time + tolerance; i++) {
        const tg = targets[i]!;
        const err = Math.abs(tg.t - time);
        if (err < tg.error) {
          tg.error = err;
          tg.step.obs.image = { width: size.width, height: size.height, encoding: 'rgb8', data: rgb };
        }
      }
    });
    const miss = targets.find((t) => t.error === Infinity);
    if (miss) {
      throw new LeRobotError(`${file}: no frame within ${tolerance.toFixed(4)} s of ${miss.t.toFixed(4)} s (feature '${key}', episode ${miss.episode} frame ${miss.frame}); the video has ${decoded} frames${decoded ? ` from ${first.toFixed(4)} to ${last.toFixed(4)} s` : ''}`);
    }
  }
}
