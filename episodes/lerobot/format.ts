// The LeRobot v3.0 dataset layout (huggingface/lerobot, src/lerobot/datasets/utils.py), declared once for
// the exporter and the importer:
//   meta/info.json                                  codebase_version "v3.0", fps, features, path templates, totals
//   meta/tasks.parquet                              task (the pandas index) → task_index
//   meta/episodes/chunk-{chunk:03d}/file-{file:03d}.parquet        one row per episode: length, tasks, where its frames are
//   data/chunk-{chunk:03d}/file-{file:03d}.parquet                 one row per frame, many episodes per file
//   videos/{video_key}/chunk-{chunk:03d}/file-{file:03d}.mp4       a camera's frames, many episodes per file
//   meta/stats.json                                 per-feature min / max / mean / std / count / quantiles
// Vectors are list columns, `image` features are structs {bytes, path} holding PNG bytes (HF datasets' Image);
// `video` features live in the mp4 files only: an episode row says which file and from/to which timestamp.
// Each episode row also carries that episode's stats as `stats/<feature>/<stat>` columns.
// Columns named `wmrl.*` (frames) and `wmrl/episode` (episodes) carry what a LeRobot dataset has no
// field for (robot-clock stamps, the episode's metadata), so a dataset this project wrote re-imports exactly.
import { Type, type Static } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';

export const CODEBASE_VERSION = 'v3.0';
export const INFO_PATH = 'meta/info.json';
export const STATS_PATH = 'meta/stats.json';
export const TASKS_PATH = 'meta/tasks.parquet';
export const EPISODES_DIR = 'meta/episodes';
export const DATA_PATH = 'data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet';
export const EPISODES_PATH = 'meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet';
export const VIDEO_PATH = 'videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4';
export const DEFAULT_CHUNKS_SIZE = 1000;

/** The per-frame columns every LeRobot dataset has (DEFAULT_FEATURES), and the two a policy trains on. */
export const COLUMNS = {
  state: 'observation.state',
  action: 'action',
  timestamp: 'timestamp',
  frameIndex: 'frame_index',
  episodeIndex: 'episode_index',
  index: 'index',
  taskIndex: 'task_index',
  reward: 'next.reward',
  done: 'next.done',
  success: 'next.success',
  // this project's, for an exact round trip
  state64: 'wmrl.state',
  seq: 'wmrl.seq',
  tObs: 'wmrl.t_obs',
  tAct: 'wmrl.t_act',
  stamp: 'wmrl.stamp',
  hasInstruction: 'wmrl.has_instruction',
  imageEncoding: 'wmrl.image_encoding',
} as const;

/** A camera named NAME is the feature `observation.images.NAME` (LeRobot's recorder); older datasets have `observation.image`. */
export const CAMERA_PREFIX = 'observation.images.';
export const LEGACY_IMAGE_KEY = 'observation.image';
export const cameraKey = (name: string): string => `${CAMERA_PREFIX}${name}`;

/** The columns of an episode row that place one video feature's frames. */
export const videoColumns = (key: string) => ({
  chunk: `videos/${key}/chunk_index`,
  file: `videos/${key}/file_index`,
  from: `videos/${key}/from_timestamp`,
  to: `videos/${key}/to_timestamp`,
});

/** The statistics LeRobot keeps per feature, per episode and for the dataset. */
export const STAT_NAMES = ['min', 'max', 'mean', 'std', 'count', 'q01', 'q10', 'q50', 'q90', 'q99'] as const;
export const statColumn = (key: string, stat: string): string => `stats/${key}/${stat}`;

export const EPISODE_COLUMNS = {
  episodeIndex: 'episode_index',
  tasks: 'tasks',
  length: 'length',
  dataChunk: 'data/chunk_index',
  dataFile: 'data/file_index',
  from: 'dataset_from_index',
  to: 'dataset_to_index',
  metaChunk: 'meta/episodes/chunk_index',
  metaFile: 'meta/episodes/file_index',
  wmrl: 'wmrl/episode',
} as const;

export const FeatureSchema = Type.Object({
  dtype: Type.String({ minLength: 1 }),
  shape: Type.Array(Type.Integer({ minimum: 0 })),
  names: Type.Optional(Type.Union([Type.Null(), Type.Array(Type.String()), Type.Record(Type.String(), Type.Array(Type.String()))])),
  info: Type.Optional(Type.Unknown()),
});
export type Feature = Static<typeof FeatureSchema>;

export const InfoSchema = Type.Object({
  codebase_version: Type.String(),
  robot_type: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  total_episodes: Type.Integer({ minimum: 0 }),
  total_frames: Type.Integer({ minimum: 0 }),
  total_tasks: Type.Integer({ minimum: 0 }),
  chunks_size: Type.Integer({ minimum: 1 }),
  data_files_size_in_mb: Type.Optional(Type.Number()),
  video_files_size_in_mb: Type.Optional(Type.Number()),
  fps: Type.Number({ exclusiveMinimum: 0 }),
  splits: Type.Record(Type.String(), Type.String()),
  data_path: Type.String({ minLength: 1 }),
  video_path: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  features: Type.Record(Type.String(), FeatureSchema),
  /** This project's: the observation layout (common/layout.ts JSON) of `observation.state`. */
  wmrl: Type.Optional(Type.Object({ format: Type.String(), observation_layout: Type.String() })),
});
export type Info = Static<typeof InfoSchema>;

export const WMRL_FORMAT = 'wmrl-lerobot/1';

/** Every refusal of the LeRobot reader and writer; the message names the file and the feature or column. */
export class LeRobotError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'LeRobotError';
  }
}

/** Validates info.json; `file` names it in the error. */
export function parseInfo(text: string, file: string): Info {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new LeRobotError(`${file}: not JSON (${(e as Error).message})`);
  }
  if (!Value.Check(InfoSchema, v)) {
    const first = Value.Errors(InfoSchema, v).First();
    throw new LeRobotError(`${file}: ${first?.path || '/'}: ${first?.message ?? 'does not match the LeRobot info.json layout'}`);
  }
  if (v.codebase_version !== CODEBASE_VERSION) {
    throw new LeRobotError(`${file}: codebase_version is ${v.codebase_version}; this reader takes ${CODEBASE_VERSION} (convert older datasets with lerobot's convert_dataset_v21_to_v30)`);
  }
  return v;
}

/** Fills a LeRobot path template: `{chunk_index:03d}`, `{file_index:03d}` and (videos) `{video_key}`. */
export function fillPath(template: string, chunk: number, file: number, videoKey?: string): string {
  const pad = (n: number, spec: string | undefined) => (spec ? String(n).padStart(Number(spec.replace(/\D/g, '')), '0') : String(n));
  const filled = template.replace(/\{(chunk_index|file_index)(?::(0?\d+d))?\}/g, (_, key: string, spec: string | undefined) => pad(key === 'chunk_index' ? chunk : file, spec));
  return videoKey === undefined ? filled : filled.replace(/\{video_key\}/g, videoKey);
}

/** The struct HF datasets' Image feature stores. */
export interface ImageCell {
  bytes: Uint8Array | null;
  path: string | null;
}
