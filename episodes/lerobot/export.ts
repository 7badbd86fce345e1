// Episodes → a LeRobot v3.0 dataset folder (format.ts describes the layout). Frames of many episodes share
// a data file; an episode never spans two. observation.state is the layout's vector [positions, velocities,
// features] as float64 (the store keeps joint states in float64, so nothing is rounded); images become
// PNG `image` features.
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { defineLayout, layoutDim, layoutEntries, layoutToJson, type ObservationLayout } from '../../common/layout.js';
import type { Episode, EpisodeStep } from '../types.js';
import {
  CODEBASE_VERSION, COLUMNS, DATA_PATH, DEFAULT_CHUNKS_SIZE, EPISODE_COLUMNS, EPISODES_PATH, IMAGE_KEY, INFO_PATH, STATS_PATH, TASKS_PATH,
  WMRL_FORMAT, LeRobotError, fillPath, type Feature, type ImageCell, type Info,
} from './format.js';
import { writeParquet, type Column } from './parquet.js';
import { encodePng } from '../../common/png.js';

export interface LeRobotExportOptions {
  /** The robot's observation layout; default: joints joint_0… (rad) and features feature_0… ('1') sized from the first step. */
  layout?: ObservationLayout;
  /** Action entry names; default action_0… */
  actionNames?: string[];
  /** Frames per second; default: the median step interval of the first episode, rounded (10 when unknown). */
  fps?: number;
  robotType?: string;
  /** Start a new data file once a file holds this many frames (LeRobot splits at 100 MB); default: one file. */
  framesPerFile?: number;
  chunksSize?: number;
}

export interface LeRobotExportResult {
  episodes: number;
  frames: number;
  dataFiles: string[];
}

/** The per-episode facts a LeRobot episode row has no field for. */
interface WmrlEpisode {
  meta: Episode['meta'];
  status: Episode['status'];
  /** Whether the steps carry a features array (an episode's steps all do or all don't). */
  hasFeatures: boolean;
}

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

class Stats {
  private n = 0;
  private min: number[] = [];
  private max: number[] = [];
  private sum: number[] = [];
  private sq: number[] = [];
  add(v: ArrayLike<number>): void {
    if (this.n === 0) {
      this.min = Array.from(v, () => Infinity);
      this.max = Array.from(v, () => -Infinity);
      this.sum = Array.from(v, () => 0);
      this.sq = Array.from(v, () => 0);
    }
    for (let i = 0; i < v.length; i++) {
      const x = v[i]!;
      if (!Number.isFinite(x)) continue;
      if (x < this.min[i]!) this.min[i] = x;
      if (x > this.max[i]!) this.max[i] = x;
      this.sum[i]! += x;
      this.sq[i]! += x * x;
    }
    this.n++;
  }
  toJson(): Record<string, number[]> | undefined {
    if (this.n === 0) return undefined;
    const mean = this.sum.map((s) => s / this.n);
    return {
      min: this.min,
      max: this.max,
      mean,
      std: this.sq.map((q, i) => Math.sqrt(Math.max(0, q / this.n - mean[i]! ** 2))),
      count: [this.n],
    };
  }
}

export function exportLeRobot(episodes: readonly Episode[], dir: string, opts: LeRobotExportOptions = {}): LeRobotExportResult {
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
  const fps = opts.fps ?? estimateFps(withSteps[0]!);
  const chunksSize = opts.chunksSize ?? DEFAULT_CHUNKS_SIZE;
  const framesPerFile = opts.framesPerFile ?? Infinity;

  // Tasks in order of first appearance.
  const tasks = new Map<string, number>();
  for (const e of withSteps) for (const s of e.steps) if (!tasks.has(taskOf(e, s))) tasks.set(taskOf(e, s), tasks.size);

  const statState = new Stats(), statAction = new Stats(), statReward = new Stats();
  const episodeRows: Array<Record<string, unknown>> = [];
  const dataFiles: string[] = [];
  let frames = 0;
  let chunk = 0, file = 0;
  let pending: Array<{ e: Episode; index: number; from: number }> = [];
  let pendingFrames = 0;

  const flush = () => {
    if (!pending.length) return;
    const rel = fillPath(DATA_PATH, chunk, file);
    const cols = frameColumns(pending, D, A, img !== undefined, tasks);
    mkdirSync(dirname(join(dir, rel)), { recursive: true });
    writeParquet(join(dir, rel), cols);
    dataFiles.push(rel);
    pending = [];
    pendingFrames = 0;
    if (file === chunksSize - 1) {
      file = 0;
      chunk++;
    } else file++;
  };

  withSteps.forEach((e, index) => {
    if (pendingFrames > 0 && pendingFrames + e.steps.length > framesPerFile) flush();
    for (const [k, s] of e.steps.entries()) {
      const where = `episode ${e.meta.id} step ${s.seq}`;
      if (s.obs.position.length * 2 + (s.obs.features?.length ?? 0) !== D) {
        throw new LeRobotError(`${where}: observation has ${s.obs.position.length} joints and ${s.obs.features?.length ?? 0} features, the layout has ${layout.joints.length} joints and ${layout.features.length} features`);
      }
      if (s.action.length !== A) throw new LeRobotError(`${where}: action has ${s.action.length} entries, the dataset's first step had ${A}`);
      if (img && s.obs.image && (s.obs.image.width !== img.width || s.obs.image.height !== img.height)) {
        throw new LeRobotError(`${where}: image is ${s.obs.image.width}x${s.obs.image.height}, feature '${IMAGE_KEY}' is ${img.width}x${img.height} (one size per dataset)`);
      }
      if (k > 0 && (s.obs.features === undefined) !== (e.steps[0]!.obs.features === undefined)) {
        throw new LeRobotError(`${where}: some steps of the episode carry features and some do not`);
      }
      statState.add(stateOf(s, D));
      statAction.add(s.action);
      statReward.add([s.reward]);
    }
    const wm: WmrlEpisode = { meta: e.meta, status: e.status, hasFeatures: e.steps[0]!.obs.features !== undefined };
    const epTasks = [...new Set(e.steps.map((s) => taskOf(e, s)))];
    episodeRows.push({
      [EPISODE_COLUMNS.episodeIndex]: BigInt(index),
      [EPISODE_COLUMNS.tasks]: epTasks,
      [EPISODE_COLUMNS.length]: BigInt(e.steps.length),
      [EPISODE_COLUMNS.dataChunk]: BigInt(chunk),
      [EPISODE_COLUMNS.dataFile]: BigInt(file),
      [EPISODE_COLUMNS.from]: BigInt(frames),
      [EPISODE_COLUMNS.to]: BigInt(frames + e.steps.length),
      [EPISODE_COLUMNS.metaChunk]: 0n,
      [EPISODE_COLUMNS.metaFile]: 0n,
      [EPISODE_COLUMNS.wmrl]: JSON.stringify(wm),
    });
    pending.push({ e, index, from: frames });
    pendingFrames += e.steps.length;
    frames += e.steps.length;
  });
  flush();

  // meta/episodes
  const epFile = join(dir, fillPath(EPISODES_PATH, 0, 0));
  mkdirSync(dirname(epFile), { recursive: true });
  const int = (name: string): Column => ({ name, kind: 'int64', data: episodeRows.map((r) => r[name]) });
  writeParquet(epFile, [
    int(EPISODE_COLUMNS.episodeIndex),
    { name: EPISODE_COLUMNS.tasks, kind: 'list<string>', data: episodeRows.map((r) => r[EPISODE_COLUMNS.tasks]) },
    int(EPISODE_COLUMNS.length),
    int(EPISODE_COLUMNS.dataChunk),
    int(EPISODE_COLUMNS.dataFile),
    int(EPISODE_COLUMNS.from),
    int(EPISODE_COLUMNS.to),
    int(EPISODE_COLUMNS.metaChunk),
    int(EPISODE_COLUMNS.metaFile),
    { name: EPISODE_COLUMNS.wmrl, kind: 'string', data: episodeRows.map((r) => r[EPISODE_COLUMNS.wmrl]) },
  ]);

  // meta/tasks.parquet: pandas writes the DataFrame index `task` as a column and names it in its metadata.
  const taskList = [...tasks.keys()];
  writeParquet(join(dir, TASKS_PATH), [
    { name: 'task_index', kind: 'int64', data: taskList.map((_, i) => BigInt(i)) },
    { name: 'task', kind: 'string', data: taskList },
  ], { pandas: pandasMeta() });

  // meta/info.json and meta/stats.json
  const features: Record<string, Feature> = {
    [COLUMNS.state]: { dtype: 'float64', shape: [D], names: layoutEntries(layout).map((x) => x.label) },
    [COLUMNS.action]: { dtype: 'float32', shape: [A], names: actionNames },
    ...(img ? { [IMAGE_KEY]: { dtype: 'image', shape: [img.height, img.width, 3], names: ['height', 'width', 'channel'] } } : {}),
    [COLUMNS.reward]: { dtype: 'float64', shape: [1], names: null },
    [COLUMNS.done]: { dtype: 'bool', shape: [1], names: null },
    [COLUMNS.success]: { dtype: 'bool', shape: [1], names: null },
    [COLUMNS.seq]: { dtype: 'int64', shape: [1], names: null },
    [COLUMNS.tObs]: { dtype: 'float64', shape: [1], names: null },
    [COLUMNS.tAct]: { dtype: 'float64', shape: [1], names: null },
    [COLUMNS.stamp]: { dtype: 'float64', shape: [1], names: null },
    [COLUMNS.hasInstruction]: { dtype: 'bool', shape: [1], names: null },
    ...(img ? { [COLUMNS.imageEncoding]: { dtype: 'string', shape: [1], names: null } } : {}),
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
    video_path: null,
    features,
    wmrl: { format: WMRL_FORMAT, observation_layout: layoutToJson(layout) },
  };
  writeFileSync(join(dir, INFO_PATH), JSON.stringify(info, null, 4));
  const stats: Record<string, unknown> = {};
  for (const [k, s] of [[COLUMNS.state, statState], [COLUMNS.action, statAction], [COLUMNS.reward, statReward]] as const) {
    const j = s.toJson();
    if (j) stats[k] = j;
  }
  writeFileSync(join(dir, STATS_PATH), JSON.stringify(stats, null, 4));
  return { episodes: withSteps.length, frames, dataFiles };
}

function stateOf(s: EpisodeStep, D: number): Float64Array {
  const v = new Float64Array(D);
  const nj = s.obs.position.length;
  v.set(s.obs.position, 0);
  v.set(s.obs.velocity, nj);
  if (s.obs.features) v.set(s.obs.features, 2 * nj);
  return v;
}

function frameColumns(
  pending: Array<{ e: Episode; index: number; from: number }>, D: number, A: number, images: boolean, tasks: Map<string, number>,
): Column[] {
  const c = {
    state: [] as number[][], action: [] as number[][], image: [] as Array<ImageCell | null>, reward: [] as number[], done: [] as boolean[],
    success: [] as Array<boolean | null>, seq: [] as bigint[], tObs: [] as number[], tAct: [] as number[], stamp: [] as number[],
    hasInstr: [] as boolean[], enc: [] as Array<string | null>, ts: [] as number[], frame: [] as bigint[], ep: [] as bigint[], idx: [] as bigint[], task: [] as bigint[],
  };
  for (const { e, index, from } of pending) {
    const t0 = e.steps[0]!.tObs;
    e.steps.forEach((s, k) => {
      c.state.push(Array.from(stateOf(s, D)));
      c.action.push(Array.from(s.action.subarray(0, A)));
      const im = s.obs.image;
      c.image.push(im ? { bytes: im.encoding === 'rgb8' ? encodePng(im.data, im.width, im.height) : im.data, path: null } : null);
      c.enc.push(im ? im.encoding : null);
      c.reward.push(s.reward);
      c.done.push(s.done);
      c.success.push(s.success ?? null);
      c.seq.push(BigInt(s.seq));
      c.tObs.push(s.tObs);
      c.tAct.push(s.tAct);
      c.stamp.push(s.obs.stamp);
      c.hasInstr.push(s.obs.instruction !== undefined);
      c.ts.push(s.tObs - t0);
      c.frame.push(BigInt(k));
      c.ep.push(BigInt(index));
      c.idx.push(BigInt(from + k));
      c.task.push(BigInt(tasks.get(taskOf(e, s))!));
    });
  }
  return [
    { name: COLUMNS.state, kind: 'list<double>', data: c.state },
    { name: COLUMNS.action, kind: 'list<float>', data: c.action },
    ...(images ? [{ name: IMAGE_KEY, kind: 'image' as const, data: c.image }] : []),
    { name: COLUMNS.reward, kind: 'double', data: c.reward },
    { name: COLUMNS.done, kind: 'bool', data: c.done },
    { name: COLUMNS.success, kind: 'bool', data: c.success },
    { name: COLUMNS.seq, kind: 'int64', data: c.seq },
    { name: COLUMNS.tObs, kind: 'double', data: c.tObs },
    { name: COLUMNS.tAct, kind: 'double', data: c.tAct },
    { name: COLUMNS.stamp, kind: 'double', data: c.stamp },
    { name: COLUMNS.hasInstruction, kind: 'bool', data: c.hasInstr },
    ...(images ? [{ name: COLUMNS.imageEncoding, kind: 'string' as const, data: c.enc }] : []),
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
