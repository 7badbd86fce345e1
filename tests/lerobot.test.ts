// LeRobot v3.0 datasets: the project's episodes survive export → import exactly (camera frames as PNG images;
// video features: lerobot-video.test.ts); a dataset laid out the way LeRobot writes it (built here independently
// of the exporter, from LeRobot's documented layout) imports; a dataset that does not fit the robot is refused
// with an error naming the feature, column or file.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { deflateSync } from 'node:zlib';
import { parquetWriteBuffer, type ColumnSource, type SchemaElement } from 'hyparquet-writer';
import { parquetMetadata } from 'hyparquet';
import jpeg from 'jpeg-js';
import { describe, expect, it } from 'vitest';
import { defineLayout } from '../common/layout.js';
import { exportLeRobot } from '../episodes/lerobot/export.js';
import { LeRobotError } from '../episodes/lerobot/format.js';
import { importLeRobot } from '../episodes/lerobot/import.js';
import { readParquet } from '../episodes/lerobot/parquet.js';
import { decodePng, encodePng } from '../common/png.js';
import { EpisodeStore } from '../episodes/store/store.js';
import type { Episode } from '../episodes/types.js';
import { richEpisode, rng } from './helpers/episode-data.js';

const tmp = (p: string) => mkdtempSync(join(tmpdir(), p));

/** Stores episodes the way a recording does, and returns them as the store gives them back. */
function storeEpisodes(file: string, eps: Episode[]): Episode[] {
  const s = EpisodeStore.open(file);
  try {
    for (const e of eps) {
      for (const step of e.steps) s.ingest(e.meta, step);
      s.finish(e.meta.id, { status: e.status === 'recording' ? 'partial' : e.status });
    }
    return eps.map((e) => s.get(e.meta.id));
  } finally {
    s.close();
  }
}

/** richEpisode's png/jpeg frames are random bytes: give them real encodings of random pixels, which LeRobot readers decode. */
function decodableImages(e: Episode, seed: number): Episode {
  const r = rng(seed);
  for (const s of e.steps) {
    const im = s.obs.image;
    if (!im || im.encoding === 'rgb8') continue;
    const rgb = Uint8Array.from({ length: im.width * im.height * 3 }, () => Math.floor(r() * 256));
    if (im.encoding === 'png') im.data = encodePng(rgb, im.width, im.height);
    else {
      const rgba = new Uint8Array(im.width * im.height * 4);
      for (let i = 0; i < im.width * im.height; i++) rgba.set([rgb[i * 3]!, rgb[i * 3 + 1]!, rgb[i * 3 + 2]!, 255], i * 4);
      im.data = new Uint8Array(jpeg.encode({ data: rgba, width: im.width, height: im.height }, 90).data);
    }
  }
  return e;
}

const ROBOT = defineLayout(
  ['j0', 'j1', 'j2', 'j3'].map((name) => ({ name, unit: 'rad' as const })),
  ['f0', 'f1', 'f2', 'f3', 'f4'].map((name) => ({ name, unit: 'm' })),
);

describe('LeRobot export → import', () => {
  it('re-imports a project-exported dataset identically (PNG images from rgb8/png/jpeg, NaN reward, partial, seq gaps, several data files)', async () => {
    const a = richEpisode('ep-rgb', 7, 'rgb8', 1);
    const b = decodableImages(richEpisode('ep-png', 5, 'png', 2), 2);
    const c = decodableImages(richEpisode('ep-jpeg', 4, 'jpeg', 3), 3);
    b.steps[2]!.reward = NaN;
    b.steps[3]!.seq = 9; // a gap the store allows
    b.steps[4]!.seq = 10;
    c.status = 'partial';
    for (const s of c.steps) delete s.obs.instruction;
    c.meta.instruction = 'stack the blue block';
    const d = richEpisode('ep-other-task', 3, 'rgb8', 4);
    for (const s of d.steps) s.obs.instruction = 'open the drawer';
    const original = storeEpisodes(join(tmp('lr-a-'), 'a.db'), [a, b, c, d]);

    const dir = join(tmp('lr-ds-'), 'ds');
    const res = await exportLeRobot(original, dir, { layout: ROBOT, fps: 20, framesPerFile: 10, images: 'png' });
    expect(res).toMatchObject({ episodes: 4, frames: 19, videoFiles: [], camera: { key: 'observation.images.camera', dtype: 'image' } });
    expect(res.dataFiles).toEqual(['data/chunk-000/file-000.parquet', 'data/chunk-000/file-001.parquet', 'data/chunk-000/file-002.parquet']);
    const info = JSON.parse(readFileSync(join(dir, 'meta/info.json'), 'utf8'));
    expect(info).toMatchObject({ codebase_version: 'v3.0', fps: 20, total_episodes: 4, total_frames: 19, total_tasks: 3, splits: { train: '0:4' }, video_path: null });
    expect(info.features['observation.images.camera']).toEqual({ dtype: 'image', shape: [3, 4, 3], names: ['height', 'width', 'channels'], info: { is_depth_map: false } });
    expect(info.features['observation.state']).toMatchObject({ dtype: 'float32', shape: [13] });
    // LeRobot's frame columns: float32 state, timestamp = frame_index / fps (not the robot clock, which wmrl.t_obs keeps)
    const meta = parquetMetadata(new Uint8Array(readFileSync(join(dir, res.dataFiles[0]!))).buffer);
    const leaf = (name: string) => meta.schema[meta.schema.findIndex((e) => e.name === name) + 2]!.type;
    expect([leaf('observation.state'), leaf('action'), leaf('wmrl.state')]).toEqual(['FLOAT', 'FLOAT', 'DOUBLE']);
    const rows = (await readParquet(join(dir, res.dataFiles[0]!))).rows;
    expect(rows.map((r) => r.timestamp)).toEqual(rows.map((r) => Math.fround(Number(r.frame_index) / 20)));

    const back = await importLeRobot(dir, { layout: ROBOT, actionDim: 4 });
    expect(back.tasks).toEqual(['touch the red cube', 'stack the blue block', 'open the drawer']);
    expect(back.episodes).toHaveLength(4);
    const again = storeEpisodes(join(tmp('lr-b-'), 'b.db'), back.episodes);
    expect(again).toEqual(original);
    expect(Number.isNaN(again[1]!.steps[2]!.reward)).toBe(true);
  });

  it('refuses to write into a folder that holds files', async () => {
    const dir = tmp('lr-full-');
    writeFileSync(join(dir, 'keep.txt'), 'x');
    await expect(exportLeRobot([richEpisode('e', 2)], dir)).rejects.toThrow(/not empty/);
    expect(readFileSync(join(dir, 'keep.txt'), 'utf8')).toBe('x');
  });
});

// ------------------------------------------------------------ a dataset written the way LeRobot writes it
// Built from LeRobot's documented v3.0 layout (src/lerobot/datasets/utils.py, dataset_metadata.py), not from
// the exporter: float32 list columns in a different order, two episodes in one data file, per-episode
// stats/* columns, tasks.parquet from a pandas DataFrame indexed by `task`, a stats.json, PNGs with row filters.

/** A PNG as PIL writes it: RGBA here, rows filtered with each of the five filters in turn. */
function pilPng(rgb: Uint8Array, w: number, h: number): Uint8Array {
  const ch = 4, stride = w * ch;
  const px = new Uint8Array(stride * h);
  for (let i = 0; i < w * h; i++) px.set([rgb[i * 3]!, rgb[i * 3 + 1]!, rgb[i * 3 + 2]!, 255], i * 4);
  const raw = new Uint8Array((stride + 1) * h);
  for (let y = 0; y < h; y++) {
    const f = y % 5;
    raw[y * (stride + 1)] = f;
    for (let x = 0; x < stride; x++) {
      const v = px[y * stride + x]!;
      const a = x >= ch ? px[y * stride + x - ch]! : 0;
      const b = y > 0 ? px[(y - 1) * stride + x]! : 0;
      const c = x >= ch && y > 0 ? px[(y - 1) * stride + x - ch]! : 0;
      const p = a + b - c, pa = Math.abs(p - a), pb = Math.abs(p - b), pc = Math.abs(p - c);
      const pred = [0, a, b, (a + b) >> 1, pa <= pb && pa <= pc ? a : pb <= pc ? b : c][f]!;
      raw[y * (stride + 1) + 1 + x] = (v - pred) & 0xff;
    }
  }
  const chunk = (type: string, data: Uint8Array) => {
    const b = Buffer.alloc(12 + data.length);
    b.writeUInt32BE(data.length, 0);
    b.write(type, 4, 'ascii');
    Buffer.from(data).copy(b, 8);
    // CRC left 0: readers that check CRCs would refuse it, ours reads the data only
    return b;
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr[8] = 8;
  ihdr[9] = 6;
  return new Uint8Array(Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk('IHDR', ihdr), chunk('IDAT', deflateSync(raw)), chunk('IEND', new Uint8Array())]));
}

const optional = { repetition_type: 'OPTIONAL' as const };
const listOf = (name: string, type: 'FLOAT' | 'DOUBLE' | 'BYTE_ARRAY', utf8 = false): SchemaElement[] => [
  { name, ...optional, converted_type: 'LIST', num_children: 1 },
  { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
  { name: 'element', type, ...optional, ...(utf8 ? { converted_type: 'UTF8' as const } : {}) },
];
const scalar = (name: string, type: 'FLOAT' | 'INT64' | 'BOOLEAN' | 'BYTE_ARRAY', utf8 = false): SchemaElement[] => [{ name, type, ...optional, ...(utf8 ? { converted_type: 'UTF8' as const } : {}) }];

function writePq(file: string, cols: Array<{ schema: SchemaElement[]; data: unknown[] }>, kv: Record<string, string> = {}): void {
  mkdirSync(join(file, '..'), { recursive: true });
  const names = cols.map((c) => c.schema[0]!.name);
  const buf = parquetWriteBuffer({
    columnData: cols.map((c, i) => ({ name: names[i]!, data: c.data as ColumnSource['data'] })),
    schema: [{ name: 'schema', num_children: cols.length }, ...cols.flatMap((c) => c.schema)],
    kvMetadata: Object.entries(kv).map(([key, value]) => ({ key, value })),
  });
  writeFileSync(file, new Uint8Array(buf));
}

interface Fixture {
  dir: string;
  states: number[][][];
  actions: number[][][];
  images: Uint8Array[][];
}

/** Two episodes (5 and 3 frames) of a 2-joint arm with 1 feature, an 8x6 camera, two tasks. */
type InfoDoc = { features: Record<string, { dtype: string; shape: number[]; names: unknown }>; [key: string]: unknown };

function lerobotFixture(mutate: { info?: (i: InfoDoc) => void; dropColumn?: string } = {}): Fixture {
  const dir = tmp('lr-fixture-');
  const r = rng(42);
  const lengths = [5, 3];
  const W = 8, H = 6;
  const states = lengths.map((n) => Array.from({ length: n }, () => Array.from({ length: 5 }, () => Math.fround(r() * 2 - 1))));
  const actions = lengths.map((n) => Array.from({ length: n }, () => Array.from({ length: 2 }, () => Math.fround(r() * 2 - 1))));
  const images = lengths.map((n) => Array.from({ length: n }, () => Uint8Array.from({ length: W * H * 3 }, () => Math.floor(r() * 256))));
  const info: InfoDoc = {
    codebase_version: 'v3.0',
    robot_type: 'so100',
    total_episodes: 2,
    total_frames: 8,
    total_tasks: 2,
    chunks_size: 1000,
    data_files_size_in_mb: 100,
    video_files_size_in_mb: 500,
    fps: 30,
    splits: { train: '0:2' },
    data_path: 'data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet',
    video_path: 'videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4',
    features: {
      action: { dtype: 'float32', shape: [2], names: ['shoulder.pos', 'elbow.pos'] },
      'observation.state': { dtype: 'float32', shape: [5], names: ['shoulder.pos', 'elbow.pos', 'shoulder.vel', 'elbow.vel', 'gripper'] },
      'observation.images.front': { dtype: 'image', shape: [H, W, 3], names: ['height', 'width', 'channels'] },
      timestamp: { dtype: 'float32', shape: [1], names: null },
      frame_index: { dtype: 'int64', shape: [1], names: null },
      episode_index: { dtype: 'int64', shape: [1], names: null },
      index: { dtype: 'int64', shape: [1], names: null },
      task_index: { dtype: 'int64', shape: [1], names: null },
    },
  };
  mutate.info?.(info);
  mkdirSync(join(dir, 'meta'), { recursive: true });
  writeFileSync(join(dir, 'meta/info.json'), JSON.stringify(info, null, 4));
  writeFileSync(join(dir, 'meta/stats.json'), JSON.stringify({ action: { min: [-1, -1], max: [1, 1], mean: [0, 0], std: [0.5, 0.5], count: [8] } }));
  writePq(join(dir, 'meta/tasks.parquet'), [
    { schema: scalar('task_index', 'INT64'), data: [0n, 1n] },
    { schema: scalar('task', 'BYTE_ARRAY', true), data: ['pick the cube', 'place the cube'] },
  ], { pandas: JSON.stringify({ index_columns: ['task'], columns: [{ name: 'task_index' }, { name: 'task' }] }) });
  writePq(join(dir, 'meta/episodes/chunk-000/file-000.parquet'), [
    { schema: scalar('episode_index', 'INT64'), data: [0n, 1n] },
    { schema: scalar('data/chunk_index', 'INT64'), data: [0n, 0n] },
    { schema: scalar('data/file_index', 'INT64'), data: [0n, 0n] },
    { schema: scalar('dataset_from_index', 'INT64'), data: [0n, 5n] },
    { schema: scalar('dataset_to_index', 'INT64'), data: [5n, 8n] },
    { schema: listOf('tasks', 'BYTE_ARRAY', true), data: [['pick the cube'], ['place the cube']] },
    { schema: scalar('length', 'INT64'), data: [5n, 3n] },
    { schema: listOf('stats/action/mean', 'DOUBLE'), data: [[0, 0], [0, 0]] },
    { schema: scalar('meta/episodes/chunk_index', 'INT64'), data: [0n, 0n] },
    { schema: scalar('meta/episodes/file_index', 'INT64'), data: [0n, 0n] },
  ]);
  // frames, episode 1 before episode 0 and each episode's frames reversed: the reader must not rely on row order
  const rows: Array<{ e: number; k: number }> = [];
  for (const e of [1, 0]) for (let k = lengths[e]! - 1; k >= 0; k--) rows.push({ e, k });
  const from = [0, 5];
  const cols = [
    { schema: scalar('index', 'INT64'), data: rows.map(({ e, k }) => BigInt(from[e]! + k)) },
    { schema: listOf('observation.state', 'FLOAT'), data: rows.map(({ e, k }) => states[e]![k]) },
    { schema: scalar('timestamp', 'FLOAT'), data: rows.map(({ k }) => k / 30) },
    { schema: [{ name: 'observation.images.front', ...optional, num_children: 2 }, { name: 'bytes', type: 'BYTE_ARRAY' as const, ...optional }, { name: 'path', type: 'BYTE_ARRAY' as const, converted_type: 'UTF8' as const, ...optional }], data: rows.map(({ e, k }) => ({ bytes: pilPng(images[e]![k]!, W, H), path: `frame-${String(k).padStart(6, '0')}.png` })) },
    { schema: scalar('episode_index', 'INT64'), data: rows.map(({ e }) => BigInt(e)) },
    { schema: listOf('action', 'FLOAT'), data: rows.map(({ e, k }) => actions[e]![k]) },
    { schema: scalar('frame_index', 'INT64'), data: rows.map(({ k }) => BigInt(k)) },
    { schema: scalar('task_index', 'INT64'), data: rows.map(({ e }) => BigInt(e)) },
  ].filter((c) => c.schema[0]!.name !== mutate.dropColumn);
  writePq(join(dir, 'data/chunk-000/file-000.parquet'), cols);
  return { dir, states, actions, images };
}

const ARM = defineLayout([{ name: 'shoulder', unit: 'rad' }, { name: 'elbow', unit: 'rad' }], [{ name: 'gripper', unit: '1' }]);

describe('LeRobot import of a dataset written the way LeRobot writes it', () => {
  it('imports both episodes: states split by the layout, actions, PNG images, tasks, frame order', async () => {
    const f = lerobotFixture();
    const ds = await importLeRobot(f.dir, { layout: ARM, actionDim: 2 });
    expect(ds.tasks).toEqual(['pick the cube', 'place the cube']);
    expect(ds.episodes.map((e) => e.steps.length)).toEqual([5, 3]);
    for (const [e, ep] of ds.episodes.entries()) {
      expect(ep.meta).toMatchObject({ robot: 'so100', task: ['pick the cube', 'place the cube'][e] });
      ep.steps.forEach((s, k) => {
        expect(s.seq).toBe(k);
        expect(Array.from(s.obs.position)).toEqual(f.states[e]![k]!.slice(0, 2));
        expect(Array.from(s.obs.velocity)).toEqual(f.states[e]![k]!.slice(2, 4));
        expect(Array.from(s.obs.features!)).toEqual(f.states[e]![k]!.slice(4));
        expect(Array.from(s.action)).toEqual(f.actions[e]![k]);
        expect(s.obs.image).toMatchObject({ width: 8, height: 6, encoding: 'rgb8' });
        expect(Buffer.from(s.obs.image!.data).equals(Buffer.from(f.images[e]![k]!))).toBe(true);
        expect(s.obs.instruction).toBe(['pick the cube', 'place the cube'][e]);
        expect(s.tObs).toBeCloseTo(k / 30, 6);
        expect(s.done).toBe(k === ep.steps.length - 1);
      });
    }
    // and the store takes them
    const stored = storeEpisodes(join(tmp('lr-c-'), 'c.db'), ds.episodes);
    expect(stored[1]!.steps[2]!.action).toEqual(ds.episodes[1]!.steps[2]!.action);
  });

  it('refuses a state feature whose shape differs from the robot layout, naming it', async () => {
    const f = lerobotFixture();
    const threeJoints = defineLayout(['a', 'b', 'c'].map((name) => ({ name, unit: 'rad' as const })));
    await expect(importLeRobot(f.dir, { layout: threeJoints })).rejects.toThrow(/feature 'observation\.state' has shape \[5\], the robot's observation layout has 6 entries/);
    await expect(importLeRobot(f.dir, { layout: ARM, actionDim: 3 })).rejects.toThrow(/feature 'action' has shape \[2\], the robot takes 3/);
    await expect(importLeRobot(f.dir)).rejects.toThrow(/declares no observation layout; pass the robot's layout/);
  });

  it('refuses a data file missing a column, naming the column and the file', async () => {
    const f = lerobotFixture({ dropColumn: 'action' });
    await expect(importLeRobot(f.dir, { layout: ARM })).rejects.toThrow(LeRobotError);
    await expect(importLeRobot(f.dir, { layout: ARM })).rejects.toThrow(/data\/chunk-000\/file-000\.parquet: missing column 'action'/);
  });

  it('refuses other codebase versions, a video the episode index does not place, an unknown camera and a missing feature, naming each', async () => {
    await expect(importLeRobot(lerobotFixture({ info: (i) => (i.codebase_version = 'v2.1') }).dir, { layout: ARM })).rejects.toThrow(/codebase_version is v2\.1/);
    const video = lerobotFixture({ info: (i) => (i.features['observation.images.front']!.dtype = 'video') });
    await expect(importLeRobot(video.dir, { layout: ARM })).rejects.toThrow(/episode 0 has no 'videos\/observation\.images\.front\/chunk_index'/);
    await expect(importLeRobot(video.dir, { layout: ARM, imageKey: 'observation.images.wrist' })).rejects.toThrow(/no camera feature 'observation\.images\.wrist' \(image and video features: observation\.images\.front\)/);
    await expect(importLeRobot(lerobotFixture({ info: (i) => delete i.features.action }).dir, { layout: ARM })).rejects.toThrow(/features lack 'action'/);
    await expect(importLeRobot(lerobotFixture({ info: (i) => delete i.fps }).dir, { layout: ARM })).rejects.toThrow(/info\.json: .*fps/);
  });

  it('refuses a project dataset on a robot whose layout differs, naming the joint', async () => {
    const dir = join(tmp('lr-d-'), 'ds');
    await exportLeRobot([richEpisode('e', 3)], dir, { layout: ROBOT, images: 'png' });
    const renamed = defineLayout([{ name: 'j0', unit: 'rad' }, { name: 'jX', unit: 'rad' }, { name: 'j2', unit: 'rad' }, { name: 'j3', unit: 'rad' }], ROBOT.features);
    await expect(importLeRobot(dir, { layout: renamed })).rejects.toThrow(/joint 1: robot has 'jX' \(rad\), dataset has 'j1' \(rad\)/);
    rmSync(dir, { recursive: true });
  });
});

describe('PNG codec', () => {
  it('decodes all five row filters and RGBA, and round-trips its own RGB encoding', () => {
    const r = rng(3);
    const rgb = Uint8Array.from({ length: 7 * 9 * 3 }, () => Math.floor(r() * 256));
    expect(Buffer.from(decodePng(pilPng(rgb, 7, 9)).rgb).equals(Buffer.from(rgb))).toBe(true);
    expect(Buffer.from(decodePng(encodePng(rgb, 7, 9)).rgb).equals(Buffer.from(rgb))).toBe(true);
  });
});

describe('wmrl episodes export-lerobot / import-lerobot', () => {
  const wmrl = (...args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', 'bin/wmrl.ts', ...args], { encoding: 'utf8', timeout: 120_000 });

  it('exports a store as a dataset and imports it into another store; a dataset that does not fit the robot exits 1 naming the feature', () => {
    const dir = tmp('lr-cli-');
    const original = storeEpisodes(join(dir, 'a.db'), [richEpisode('cli-1', 4, 'rgb8', 5), richEpisode('cli-2', 3, 'rgb8', 6)]);
    const e = wmrl('episodes', 'export-lerobot', join(dir, 'a.db'), join(dir, 'ds'), '--images', 'png');
    expect(e.status, e.stderr).toBe(0);
    expect(e.stdout).toMatch(/wrote LeRobot v3\.0 dataset .*: 2 episode\(s\), 7 frames in 1 data file\(s\); camera observation\.images\.camera as PNG images/);
    const i = wmrl('episodes', 'import-lerobot', join(dir, 'ds'), join(dir, 'b.db'));
    expect(i.status, i.stderr).toBe(0);
    const s = EpisodeStore.open(join(dir, 'b.db'));
    try {
      expect(original.map((o) => s.get(o.meta.id))).toEqual(original);
    } finally {
      s.close();
    }
    const bad = wmrl('episodes', 'import-lerobot', lerobotFixture().dir, join(dir, 'c.db'), '--robot', 'sim:reach');
    expect(bad.status).toBe(1);
    expect(bad.stderr).toMatch(/feature 'observation\.state' has shape \[5\], the robot's observation layout has \d+ entries/);
  });
});
