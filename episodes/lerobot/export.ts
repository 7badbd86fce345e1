// Episodes → a LeRobot v3.0 dataset folder (format.ts describes the layout), written the way LeRobot's recorder
// writes one: observation.state float32, `timestamp` = frame_index / fps, the camera as
// `observation.images.<camera>`, a `video` feature by default (an mp4 per data file, its episodes one after another,
// encoded by ffmpeg; video.ts) or PNG `image` features, and each episode's stats in its row. Frames of many episodes
// share a data file; an episode never spans two. The `wmrl.*` columns keep what those fields round (the float64
// joint state, robot-clock stamps), so a dataset with PNG images re-imports exactly.
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { decodeImage } from '../../common/image.js';
import { defineLayout, layoutDim, layoutEntries, layoutToJson, type ObservationLayout } from '../../common/layout.js';
import { encodePng } from '../../common/png.js';
import type { Episode, EpisodeStep } from '../types.js';
import {
  CODEBASE_VERSION, COLUMNS, DATA_PATH, DEFAULT_CHUNKS_SIZE, EPISODE_COLUMNS, EPISODES_PATH, INFO_PATH, STAT_NAMES, STATS_PATH, TASKS_PATH,
  VIDEO_PATH, WMRL_FORMAT, LeRobotError, cameraKey, fillPath, statColumn, videoColumns, type Feature, type ImageCell, type Info,
} from './format.js';
import { writeParquet, type Column, type ColumnKind } from './parquet.js';
import { ImageStats, VectorStats, type FeatureStats } from './stats.js';
import { chooseCodec, encodeVideo, ffmpegTools, probeVideo, type VideoCodec } from './video.js';

export interface LeRobotExportOptions {
  /** The robot's observation layout; default: joints joint_0… (rad) and features feature_0… ('1') sized from the first step. */
  layout?: ObservationLayout;
  /** Action entry names; default action_0… */
  actionNames?: string[];
  /** Frames per second; default: the median step interval of the first episode, rounded (10 when unknown). */
  fps?: number;
  robotType?: string;
  /** Start a new data (and video) file once a file holds this many frames (LeRobot splits at 100 MB); default: one file. */
  framesPerFile?: number;
  chunksSize?: number;
  /** Camera frames as a `video` feature (mp4, LeRobot's recorder default) or PNG `image` features in the parquet (exact). */
  images?: 'video' | 'png';
  /** The camera's name: its feature is observation.images.<camera>. */
  camera?: string;
  /** The ffmpeg binary, a path or a name on PATH (ffprobe is taken from beside it). */
  ffmpeg?: string;
}

export interface LeRobotExportResult {
  episodes: number;
  frames: number;
  dataFiles: string[];
  videoFiles: string[];
  /** The camera feature's key and how it was stored, when the episodes have camera frames. */
  camera?: { key: string; dtype: 'video' | 'image'; codec?: string };
}

/** The per-episode facts a LeRobot episode row has no field for. */
interface WmrlEpisode {
  meta: Episode['meta'];
  status: Episode['status'];
  /** Whether the steps carry a features array (an episode's steps all do or all don't). */
  hasFeatures: boolean;
}

export const DEFAULT_CAMERA = 'camera';

function defaultLayout(s: EpisodeStep): ObservationLayout {
  const nj = s.obs.position.length, nf = s.obs.features?.length ?? 0;
  return defineLayout(
    Array.from({ length: nj }, (_, i) => ({ name: `joint_${i}`, unit: 'rad' as const })),
    Array.from({ length: nf }, (_, i) => ({ name: `feature_${i}`, unit: '1' })),
  );
}

function estimateFps(e: Episode): number {
  const dts = e.steps.slice(1).map((s, i) => s.tObs - e.steps[i]!.tObs).filter((d) => d > 0).sort((a, b) => a - b);
  return dts.length ? Math.max(1, Math.round(1 / dts[Math.floor(dts.length / 2)]!)) : 10;
}

/** The task text of a step: its instruction, else the episode's instruction or task name. */
const taskOf = (e: Episode, s: EpisodeStep): string => s.obs.instruction ?? e.meta.instruction ?? e.meta.task ?? '';

function stateOf(s: EpisodeStep, D: number): Float64Array {
  const v = new Float64Array(D);
  const nj = s.obs.position.length;
  v.set(s.obs.position, 0);
  v.set(s.obs.velocity, nj);
  if (s.obs.features) v.set(s.obs.features, 2 * nj);
  return v;
}

/** An episode placed in the dataset: its index, first global frame index, and first frame within its data file. */
interface Placed {
  e: Episode;
  index: number;
  from: number;
  inFile: number;
  row: Record<string, unknown>;
}

export async function exportLeRobot(episodes: readonly Episode[], dir: string, opts: LeRobotExportOptions = {}): Promise<LeRobotExportResult> {
  if (existsSync(dir) && readdirSync(dir).length > 0) throw new LeRobotError(`${dir}: exists and is not empty; a dataset is written into a new folder`);
  const withSteps = episodes.filter((e) => e.steps.length > 0);
  if (!withSteps.length) throw new LeRobotError(`${dir}: no episode has a step; nothing to export`);
  const first = withSteps[0]!.steps[0]!;
  const layout = opts.layout ?? defaultLayout(first);
  const D = layoutDim(layout);
  const A = first.action.length;
  const actionNames = opts.actionNames ?? Array.from({ length: A }, (_, i) => `action_${i}`);
  if (actionNames.length !== A) throw new LeRobotError(`actionNames: ${actionNames.length} names for actions of ${A} entries`);
  const img = withSteps.flatMap((e) => e.steps).find((s) => s.obs.image)?.obs.image;
  const video = img !== undefined && (opts.images ?? 'video') === 'video';
  const camName = opts.camera ?? DEFAULT_CAMERA;
  if (!/^[\w-]+$/.test(camName)) throw new LeRobotError(`camera '${camName}': a camera name is letters, digits, '_' or '-' (it names the feature observation.images.<camera> and a folder)`);
  const camKey = cameraKey(camName);
  const fps = opts.fps ?? estimateFps(withSteps[0]!);
  if (!(fps > 0)) throw new LeRobotError(`fps ${fps}: must be positive`);
  const chunksSize = opts.chunksSize ?? DEFAULT_CHUNKS_SIZE;
  const framesPerFile = opts.framesPerFile ?? Infinity;

  // Everything is checked before a file is written.
  for (const e of withSteps) {
    for (const [k, s] of e.steps.entries()) {
      const where = `episode ${e.meta.id} step ${s.seq}`;
      if (s.obs.position.length * 2 + (s.obs.features?.length ?? 0) !== D) {
        throw new LeRobotError(`${where}: observation has ${s.obs.position.length} joints and ${s.obs.features?.length ?? 0} features, the layout has ${layout.joints.length} joints and ${layout.features.length} features`);
      }
      if (s.action.length !== A) throw new LeRobotError(`${where}: action has ${s.action.length} entries, the dataset's first step had ${A}`);
      if (img && s.obs.image && (s.obs.image.width !== img.width || s.obs.image.height !== img.height)) {
        throw new LeRobotError(`${where}: image is ${s.obs.image.width}x${s.obs.image.height}, feature '${camKey}' is ${img.width}x${img.height} (one size per dataset)`);
      }
      if (video && !s.obs.image) throw new LeRobotError(`${where}: has no camera frame; a video feature needs one every frame (export PNG images instead: --images png)`);
      if (k > 0 && (s.obs.features === undefined) !== (e.steps[0]!.obs.features === undefined)) {
        throw new LeRobotError(`${where}: some steps of the episode carry features and some do not`);
      }
    }
  }
  const ff = video ? ffmpegTools(opts.ffmpeg) : undefined;
  const codec = ff && img ? chooseCodec(ff, img.width, img.height, `feature '${camKey}'`) : undefined;

  // Tasks in order of first appearance.
  const tasks = new Map<string, number>();
  for (const e of withSteps) for (const s of e.steps) if (!tasks.has(taskOf(e, s))) tasks.set(taskOf(e, s), tasks.size);

  const total = {
    state: new VectorStats(D), action: new VectorStats(A), reward: new VectorStats(1), timestamp: new VectorStats(1), frame: new VectorStats(1),
    episode: new VectorStats(1), index: new VectorStats(1), task: new VectorStats(1), image: new ImageStats(),
  };
  const episodeStats: Array<Record<string, FeatureStats>> = [];
  const dataFiles: string[] = [];
  const videoFiles: string[] = [];
  let frames = 0;
  let chunk = 0, file = 0;
  let pending: Placed[] = [];
  let pendingFrames = 0;

  const flush = async () => {
    if (!pending.length) return;
    const rel = fillPath(DATA_PATH, chunk, file);
    const frameImages = (p: Placed) => p.e.steps.map((s) => (s.obs.image ? decodeImage(s.obs.image, `episode ${p.e.meta.id} step ${s.seq} image`) : undefined)).map((d, k) => {
      if (d && (d.width !== img!.width || d.height !== img!.height)) {
        throw new LeRobotError(`episode ${p.e.meta.id} step ${p.e.steps[k]!.seq}: image decodes to ${d.width}x${d.height}, it says ${img!.width}x${img!.height}`);
      }
      return d?.rgb;
    });
    // Image stats come from the decoded frames: one episode's frames are decoded at a time.
    const imageStats = new Map<number, ImageStats>();
    const statFrame = (index: number, rgb: Uint8Array) => {
      let st = imageStats.get(index);
      if (!st) imageStats.set(index, (st = new ImageStats()));
      st.add(rgb);
      total.image.add(rgb);
    };
    const cells: Array<ImageCell | null> = [];
    if (img && !video) {
      for (const p of pending) {
        frameImages(p).forEach((rgb, k) => {
          const im = p.e.steps[k]!.obs.image;
          if (rgb) statFrame(p.index, rgb);
          cells.push(im && rgb ? { bytes: im.encoding === 'rgb8' ? encodePng(rgb, im.width, im.height) : im.data, path: null } : null);
        });
      }
    }
    mkdirSync(dirname(join(dir, rel)), { recursive: true });
    writeParquet(join(dir, rel), frameColumns(pending, D, A, fps, tasks, img && !video ? { key: camKey, cells } : undefined));
    dataFiles.push(rel);
    if (video) {
      const vrel = fillPath(VIDEO_PATH, chunk, file, camKey);
      mkdirSync(dirname(join(dir, vrel)), { recursive: true });
      const todo = pending;
      function* rgbFrames(): Generator<Uint8Array> {
        for (const p of todo) {
          for (const rgb of frameImages(p)) {
            statFrame(p.index, rgb!);
            yield rgb!;
          }
        }
      }
      const n = await encodeVideo(ff!, join(dir, vrel), rgbFrames(), img!, fps, codec!);
      if (n !== pendingFrames) throw new LeRobotError(`${vrel}: ffmpeg took ${n} of ${pendingFrames} frames`);
      videoFiles.push(vrel);
      const vc = videoColumns(camKey);
      for (const p of pending) {
        Object.assign(p.row, { [vc.chunk]: BigInt(chunk), [vc.file]: BigInt(file), [vc.from]: p.inFile / fps, [vc.to]: (p.inFile + p.e.steps.length) / fps });
      }
    }
    for (const p of pending) {
      const st = imageStats.get(p.index);
      if (st) episodeStats[p.index]![camKey] = st.result();
    }
    pending = [];
    pendingFrames = 0;
    if (file === chunksSize - 1) {
      file = 0;
      chunk++;
    } else file++;
  };

  const episodeRows: Array<Record<string, unknown>> = [];
  for (const [index, e] of withSteps.entries()) {
    if (pendingFrames > 0 && pendingFrames + e.steps.length > framesPerFile) await flush();
    const ep = {
      state: new VectorStats(D), action: new VectorStats(A), reward: new VectorStats(1), timestamp: new VectorStats(1), frame: new VectorStats(1),
      episode: new VectorStats(1), index: new VectorStats(1), task: new VectorStats(1),
    };
    for (const [k, s] of e.steps.entries()) {
      const values: Record<keyof typeof ep, ArrayLike<number>> = {
        state: Float32Array.from(stateOf(s, D)),
        action: s.action,
        reward: [s.reward],
        timestamp: [Math.fround(k / fps)],
        frame: [k],
        episode: [index],
        index: [frames + k],
        task: [tasks.get(taskOf(e, s))!],
      };
      for (const key of Object.keys(ep) as Array<keyof typeof ep>) {
        ep[key].add(values[key]);
        total[key].add(values[key]);
      }
    }
    episodeStats[index] = statsByFeature(ep);
    const wm: WmrlEpisode = { meta: e.meta, status: e.status, hasFeatures: e.steps[0]!.obs.features !== undefined };
    const row: Record<string, unknown> = {
      [EPISODE_COLUMNS.episodeIndex]: BigInt(index),
      [EPISODE_COLUMNS.tasks]: [...new Set(e.steps.map((s) => taskOf(e, s)))],
      [EPISODE_COLUMNS.length]: BigInt(e.steps.length),
      [EPISODE_COLUMNS.dataChunk]: BigInt(chunk),
      [EPISODE_COLUMNS.dataFile]: BigInt(file),
      [EPISODE_COLUMNS.from]: BigInt(frames),
      [EPISODE_COLUMNS.to]: BigInt(frames + e.steps.length),
      [EPISODE_COLUMNS.metaChunk]: 0n,
      [EPISODE_COLUMNS.metaFile]: 0n,
      [EPISODE_COLUMNS.wmrl]: JSON.stringify(wm),
    };
    episodeRows.push(row);
    pending.push({ e, index, from: frames, inFile: pendingFrames, row });
    pendingFrames += e.steps.length;
    frames += e.steps.length;
  }
  await flush();

  // meta/episodes: the placement columns, the video columns, then every feature's stats.
  const epFile = join(dir, fillPath(EPISODES_PATH, 0, 0));
  mkdirSync(dirname(epFile), { recursive: true });
  const col = (name: string, kind: ColumnKind): Column => ({ name, kind, data: episodeRows.map((r) => r[name]) });
  const vc = videoColumns(camKey);
  const statCols: Column[] = [];
  // An episode without camera frames (PNG images are optional per step) has no camera stats: null cells.
  for (const key of [...new Set(episodeStats.flatMap((s) => Object.keys(s)))]) {
    for (const stat of STAT_NAMES) {
      const kind: ColumnKind = stat === 'count' ? 'list<int64>' : key === camKey ? 'list<list<list<double>>>' : 'list<double>';
      const cell = (s: Record<string, FeatureStats>) => {
        const v = s[key]?.[stat];
        return v === undefined ? null : stat === 'count' ? (v as number[]).map(BigInt) : v;
      };
      statCols.push({ name: statColumn(key, stat), kind, data: episodeStats.map(cell) });
    }
  }
  writeParquet(epFile, [
    col(EPISODE_COLUMNS.episodeIndex, 'int64'),
    col(EPISODE_COLUMNS.tasks, 'list<string>'),
    col(EPISODE_COLUMNS.length, 'int64'),
    col(EPISODE_COLUMNS.dataChunk, 'int64'),
    col(EPISODE_COLUMNS.dataFile, 'int64'),
    col(EPISODE_COLUMNS.from, 'int64'),
    col(EPISODE_COLUMNS.to, 'int64'),
    ...(video ? [col(vc.chunk, 'int64'), col(vc.file, 'int64'), col(vc.from, 'double'), col(vc.to, 'double')] : []),
    ...statCols,
    col(EPISODE_COLUMNS.metaChunk, 'int64'),
    col(EPISODE_COLUMNS.metaFile, 'int64'),
    col(EPISODE_COLUMNS.wmrl, 'string'),
  ]);

  // meta/tasks.parquet: pandas writes the DataFrame index `task` as a column and names it in its metadata.
  const taskList = [...tasks.keys()];
  writeParquet(join(dir, TASKS_PATH), [
    { name: 'task_index', kind: 'int64', data: taskList.map((_, i) => BigInt(i)) },
    { name: 'task', kind: 'string', data: taskList },
  ], { pandas: pandasMeta() });

  // meta/info.json and meta/stats.json
  const names = layoutEntries(layout).map((x) => x.label);
  const camera = img ? cameraFeature(img, video, codec, ff && video ? probeVideo(ff, join(dir, videoFiles[0]!)) : undefined, fps) : undefined;
  const features: Record<string, Feature> = {
    [COLUMNS.state]: { dtype: 'float32', shape: [D], names },
    [COLUMNS.action]: { dtype: 'float32', shape: [A], names: actionNames },
    ...(camera ? { [camKey]: camera } : {}),
    [COLUMNS.reward]: { dtype: 'float64', shape: [1], names: null },
    [COLUMNS.done]: { dtype: 'bool', shape: [1], names: null },
    [COLUMNS.success]: { dtype: 'bool', shape: [1], names: null },
    [COLUMNS.state64]: { dtype: 'float64', shape: [D], names },
    [COLUMNS.seq]: { dtype: 'int64', shape: [1], names: null },
    [COLUMNS.tObs]: { dtype: 'float64', shape: [1], names: null },
    [COLUMNS.tAct]: { dtype: 'float64', shape: [1], names: null },
    [COLUMNS.stamp]: { dtype: 'float64', shape: [1], names: null },
    [COLUMNS.hasInstruction]: { dtype: 'bool', shape: [1], names: null },
    ...(img && !video ? { [COLUMNS.imageEncoding]: { dtype: 'string', shape: [1], names: null } } : {}),
    [COLUMNS.timestamp]: { dtype: 'float32', shape: [1], names: null },
    [COLUMNS.frameIndex]: { dtype: 'int64', shape: [1], names: null },
    [COLUMNS.episodeIndex]: { dtype: 'int64', shape: [1], names: null },
    [COLUMNS.index]: { dtype: 'int64', shape: [1], names: null },
    [COLUMNS.taskIndex]: { dtype: 'int64', shape: [1], names: null },
  };
  const info: Info = {
    codebase_version: CODEBASE_VERSION,
    robot_type: opts.robotType ?? withSteps[0]!.meta.robot,
    total_episodes: withSteps.length,
    total_frames: frames,
    total_tasks: tasks.size,
    chunks_size: chunksSize,
    data_files_size_in_mb: 100,
    video_files_size_in_mb: 200,
    fps,
    splits: { train: `0:${withSteps.length}` },
    data_path: DATA_PATH,
    video_path: video ? VIDEO_PATH : null,
    features,
    wmrl: { format: WMRL_FORMAT, observation_layout: layoutToJson(layout) },
  };
  writeFileSync(join(dir, INFO_PATH), JSON.stringify(info, null, 4));
  const stats = statsByFeature(total);
  if (img) stats[camKey] = total.image.result();
  writeFileSync(join(dir, STATS_PATH), JSON.stringify(stats, null, 4));
  return {
    episodes: withSteps.length,
    frames,
    dataFiles,
    videoFiles,
    ...(img ? { camera: { key: camKey, dtype: video ? 'video' as const : 'image' as const, ...(codec ? { codec: codec.codec } : {}) } } : {}),
  };
}

/** The vector features' stats under their LeRobot feature keys. */
function statsByFeature(s: Record<'state' | 'action' | 'reward' | 'timestamp' | 'frame' | 'episode' | 'index' | 'task', VectorStats>): Record<string, FeatureStats> {
  return {
    [COLUMNS.state]: s.state.result(),
    [COLUMNS.action]: s.action.result(),
    [COLUMNS.reward]: s.reward.result(),
    [COLUMNS.timestamp]: s.timestamp.result(),
    [COLUMNS.frameIndex]: s.frame.result(),
    [COLUMNS.episodeIndex]: s.episode.result(),
    [COLUMNS.index]: s.index.result(),
    [COLUMNS.taskIndex]: s.task.result(),
  };
}

/** The camera's feature: LeRobot's shape and names, and for a video what its recorder records of the stream. */
function cameraFeature(img: { width: number; height: number }, video: boolean, codec: VideoCodec | undefined, stream: ReturnType<typeof probeVideo> | undefined, fps: number): Feature {
  const base = { shape: [img.height, img.width, 3], names: ['height', 'width', 'channels'] };
  if (!video || !codec || !stream) return { dtype: 'image', ...base, info: { is_depth_map: false } };
  return {
    dtype: 'video',
    ...base,
    info: {
      'video.height': stream.height,
      'video.width': stream.width,
      'video.codec': stream.codec,
      'video.pix_fmt': stream.pixFmt,
      'video.fps': fps,
      'video.channels': 3,
      ...codec.info,
      is_depth_map: false,
      has_audio: false,
    },
  };
}

function frameColumns(pending: Placed[], D: number, A: number, fps: number, tasks: Map<string, number>, image: { key: string; cells: Array<ImageCell | null> } | undefined): Column[] {
  const c = {
    state: [] as number[][], action: [] as number[][], reward: [] as number[], done: [] as boolean[],
    success: [] as Array<boolean | null>, seq: [] as bigint[], tObs: [] as number[], tAct: [] as number[], stamp: [] as number[],
    hasInstr: [] as boolean[], enc: [] as Array<string | null>, ts: [] as number[], frame: [] as bigint[], ep: [] as bigint[], idx: [] as bigint[], task: [] as bigint[],
  };
  for (const { e, index, from } of pending) {
    e.steps.forEach((s, k) => {
      c.state.push(Array.from(stateOf(s, D)));
      c.action.push(Array.from(s.action.subarray(0, A)));
      c.enc.push(s.obs.image ? s.obs.image.encoding : null);
      c.reward.push(s.reward);
      c.done.push(s.done);
      c.success.push(s.success ?? null);
      c.seq.push(BigInt(s.seq));
      c.tObs.push(s.tObs);
      c.tAct.push(s.tAct);
      c.stamp.push(s.obs.stamp);
      c.hasInstr.push(s.obs.instruction !== undefined);
      c.ts.push(k / fps);
      c.frame.push(BigInt(k));
      c.ep.push(BigInt(index));
      c.idx.push(BigInt(from + k));
      c.task.push(BigInt(tasks.get(taskOf(e, s))!));
    });
  }
  return [
    { name: COLUMNS.state, kind: 'list<float>', data: c.state },
    { name: COLUMNS.action, kind: 'list<float>', data: c.action },
    ...(image ? [{ name: image.key, kind: 'image' as const, data: image.cells }] : []),
    { name: COLUMNS.reward, kind: 'double', data: c.reward },
    { name: COLUMNS.done, kind: 'bool', data: c.done },
    { name: COLUMNS.success, kind: 'bool', data: c.success },
    { name: COLUMNS.state64, kind: 'list<double>', data: c.state },
    { name: COLUMNS.seq, kind: 'int64', data: c.seq },
    { name: COLUMNS.tObs, kind: 'double', data: c.tObs },
    { name: COLUMNS.tAct, kind: 'double', data: c.tAct },
    { name: COLUMNS.stamp, kind: 'double', data: c.stamp },
    { name: COLUMNS.hasInstruction, kind: 'bool', data: c.hasInstr },
    ...(image ? [{ name: COLUMNS.imageEncoding, kind: 'string' as const, data: c.enc }] : []),
    { name: COLUMNS.timestamp, kind: 'float', data: c.ts },
    { name: COLUMNS.frameIndex, kind: 'int64', data: c.frame },
    { name: COLUMNS.episodeIndex, kind: 'int64', data: c.ep },
    { name: COLUMNS.index, kind: 'int64', data: c.idx },
    { name: COLUMNS.taskIndex, kind: 'int64', data: c.task },
  ];
}

/** pandas' description of a DataFrame indexed by `task` with one column `task_index`, so pd.read_parquet restores the index. */
function pandasMeta(): string {
  return JSON.stringify({
    index_columns: ['task'],
    column_indexes: [{ name: null, field_name: null, pandas_type: 'unicode', numpy_type: 'object', metadata: { encoding: 'UTF-8' } }],
    columns: [
      { name: 'task_index', field_name: 'task_index', pandas_type: 'int64', numpy_type: 'int64', metadata: null },
      { name: 'task', field_name: 'task', pandas_type: 'unicode', numpy_type: 'object', metadata: null },
    ],
    creator: { library: 'wmrl-bridge', version: '0.1.0' },
    pandas_version: '2.2.0',
  });
}
