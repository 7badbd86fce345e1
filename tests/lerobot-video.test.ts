// LeRobot v3.0 `video` features through Debian's ffmpeg: episodes with camera frames export as LeRobot's recorder
// writes them (mp4 per camera and file, from/to timestamps, float32 state, timestamp = frame_index / fps,
// per-episode stats) and import back with frames within the codec's loss; a dataset built here the way the
// recorder builds one (an mp4 per episode, concatenated without re-encoding, timestamps from the files' durations)
// imports; a missing ffmpeg, a missing video file and a camera whose frames do not fit its feature are refused.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { defineLayout } from '../common/layout.js';
import { exportLeRobot } from '../episodes/lerobot/export.js';
import { importLeRobot } from '../episodes/lerobot/import.js';
import { readParquet, writeParquet, type Column } from '../episodes/lerobot/parquet.js';
import { EpisodeStore } from '../episodes/store/store.js';
import type { Episode } from '../episodes/types.js';
import { meta, rng } from './helpers/episode-data.js';

const tmp = (p: string) => mkdtempSync(join(tmpdir(), p));
const FPS = 30;
const ARM = defineLayout([{ name: 'shoulder', unit: 'rad' }, { name: 'elbow', unit: 'rad' }], [{ name: 'gripper', unit: '1' }]);
const encoders = spawnSync('ffmpeg', ['-hide_banner', '-encoders'], { encoding: 'utf8' }).stdout;

/** A smooth scene (what a codec keeps well) with a square that moves every frame, so a frame is told from its neighbours. */
function scene(w: number, h: number, t: number): Uint8Array {
  const px = new Uint8Array(w * h * 3);
  const sx = 4 + ((5 * t) % (w - 20)), sy = 4 + ((3 * t) % (h - 20));
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const inSquare = x >= sx && x < sx + 14 && y >= sy && y < sy + 14;
      px.set(inSquare ? [225, 40, 50] : [40 + Math.round((150 * x) / w), 60 + Math.round((120 * y) / h), 120 + (t % 7) * 8], (y * w + x) * 3);
    }
  }
  return px;
}

const meanAbs = (a: Uint8Array, b: Uint8Array) => a.reduce((s, v, i) => s + Math.abs(v - b[i]!), 0) / a.length;

/** Episodes of a 2-joint arm with a gripper feature and a camera, frames `t0`, `t0 + 1`, … of the scene. */
function cameraEpisodes(lengths: number[], w: number, h: number, seed = 1): Episode[] {
  const r = rng(seed);
  let t = 0;
  return lengths.map((n, e) => ({
    meta: meta(`cam-${e}`),
    status: 'complete' as const,
    steps: Array.from({ length: n }, (_, seq) => {
      const tObs = 1_700_000_000 + e * 100 + seq / FPS + r() * 1e-3;
      return {
        seq,
        tObs,
        tAct: tObs + 0.002,
        obs: {
          stamp: tObs,
          position: Float64Array.from({ length: 2 }, () => r() * 6 - 3),
          velocity: Float64Array.from({ length: 2 }, () => r() * 2 - 1),
          features: Float32Array.from([r()]),
          image: { width: w, height: h, encoding: 'rgb8' as const, data: scene(w, h, t++) },
          instruction: e % 2 ? 'place the cube' : 'pick the cube',
        },
        action: Float32Array.from({ length: 2 }, () => r() * 2 - 1),
        reward: r(),
        done: seq === n - 1,
      };
    }),
  }));
}

/** Each imported frame is close to its own original and farther from the originals one frame before and after. */
function expectFramesMatch(orig: Episode[], back: Episode[], maxMeanAbs: number): void {
  for (const [e, ep] of back.entries()) {
    ep.steps.forEach((s, k) => {
      const own = orig[e]!.steps[k]!.obs.image!.data;
      expect(s.obs.image).toMatchObject({ width: orig[e]!.steps[k]!.obs.image!.width, height: orig[e]!.steps[k]!.obs.image!.height, encoding: 'rgb8' });
      const err = meanAbs(s.obs.image!.data, own);
      expect(err, `episode ${e} frame ${k}`).toBeLessThan(maxMeanAbs);
      for (const j of [k - 1, k + 1]) {
        const other = orig[e]!.steps[j]?.obs.image?.data;
        if (other) expect(meanAbs(s.obs.image!.data, other), `episode ${e} frame ${k} vs ${j}`).toBeGreaterThan(err);
      }
    });
  }
}

/** numpy's population std and linear-interpolated quantile, written out independently of the exporter. */
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const std = (xs: number[]) => Math.sqrt(mean(xs.map((x) => (x - mean(xs)) ** 2)));
function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b), pos = q * (s.length - 1), lo = Math.floor(pos);
  return s[lo]! + (s[Math.ceil(pos)]! - s[lo]!) * (pos - lo);
}

describe('LeRobot video export → import through ffmpeg', () => {
  it('writes the camera as observation.images.<cam> video files with from/to timestamps, float32 state, timestamp = frame_index / fps and per-episode stats, and imports it back', async () => {
    const orig = cameraEpisodes([6, 4, 5], 64, 64);
    const dir = join(tmp('lrv-'), 'ds');
    const res = await exportLeRobot(orig, dir, { layout: ARM, fps: FPS, camera: 'front', framesPerFile: 10 });
    const key = 'observation.images.front';
    const codec = encoders.includes('libsvtav1') ? 'av1' : 'h264';
    expect(res).toMatchObject({ episodes: 3, frames: 15, camera: { key, dtype: 'video', codec } });
    expect(res.videoFiles).toEqual([`videos/${key}/chunk-000/file-000.mp4`, `videos/${key}/chunk-000/file-001.mp4`]);
    expect(res.dataFiles).toEqual(['data/chunk-000/file-000.parquet', 'data/chunk-000/file-001.parquet']);

    // info.json: the video feature as LeRobot's recorder declares it, its codec the one ffprobe reads from the file
    const info = JSON.parse(readFileSync(join(dir, 'meta/info.json'), 'utf8'));
    const probe = JSON.parse(spawnSync('ffprobe', ['-v', 'error', '-select_streams', 'v:0', '-show_entries', 'stream=codec_name,pix_fmt,width,height', '-of', 'json', join(dir, res.videoFiles[0]!)], { encoding: 'utf8' }).stdout).streams[0];
    expect(probe).toMatchObject({ codec_name: codec, pix_fmt: 'yuv420p', width: 64, height: 64 });
    expect(info.video_path).toBe('videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4');
    expect(info.features[key]).toMatchObject({
      dtype: 'video', shape: [64, 64, 3], names: ['height', 'width', 'channels'],
      info: { 'video.height': 64, 'video.width': 64, 'video.codec': codec, 'video.pix_fmt': 'yuv420p', 'video.fps': FPS, 'video.channels': 3, 'video.g': 2, 'video.crf': 30, is_depth_map: false, has_audio: false },
    });
    expect(info.features['observation.state']).toMatchObject({ dtype: 'float32', shape: [5] });
    expect(info.features['observation.image']).toBeUndefined();

    // frames: no image column (the frames live in the mp4s), timestamps exactly frame_index / fps in float32
    const data = await readParquet(join(dir, res.dataFiles[0]!));
    expect(data.columns).not.toContain(key);
    expect(data.rows.map((r) => r.timestamp)).toEqual(data.rows.map((r) => Math.fround(Number(r.frame_index) / FPS)));
    expect(data.rows.map((r) => Number(r.frame_index))).toEqual([0, 1, 2, 3, 4, 5, 0, 1, 2, 3]);
    data.rows.forEach((r, i) => {
      const s = orig[i < 6 ? 0 : 1]!.steps[i < 6 ? i : i - 6]!;
      expect(r['observation.state']).toEqual([...s.obs.position, ...s.obs.velocity, ...s.obs.features!].map(Math.fround));
    });

    // episode rows: which file, from/to timestamps within it, and each episode's stats
    const eps = (await readParquet(join(dir, 'meta/episodes/chunk-000/file-000.parquet'))).rows;
    expect(eps.map((r) => [r[`videos/${key}/file_index`], r[`videos/${key}/from_timestamp`], r[`videos/${key}/to_timestamp`]])).toEqual([[0n, 0, 6 / FPS], [0n, 6 / FPS, 10 / FPS], [1n, 0, 5 / FPS]]);
    for (const [e, row] of eps.entries()) {
      const st = orig[e]!.steps;
      const states = st.map((s) => [...s.obs.position, ...s.obs.velocity, ...s.obs.features!].map(Math.fround));
      const entry = (i: number) => states.map((v) => v[i]!);
      for (let i = 0; i < 5; i++) {
        expect((row['stats/observation.state/min'] as number[])[i]).toBe(Math.min(...entry(i)));
        expect((row['stats/observation.state/max'] as number[])[i]).toBe(Math.max(...entry(i)));
        expect((row['stats/observation.state/mean'] as number[])[i]).toBeCloseTo(mean(entry(i)), 12);
        expect((row['stats/observation.state/std'] as number[])[i]).toBeCloseTo(std(entry(i)), 12);
        expect((row['stats/observation.state/q50'] as number[])[i]).toBeCloseTo(quantile(entry(i), 0.5), 12);
        expect((row['stats/observation.state/q90'] as number[])[i]).toBeCloseTo(quantile(entry(i), 0.9), 12);
      }
      expect(row['stats/observation.state/count']).toEqual([BigInt(st.length)]);
      expect((row['stats/action/q10'] as number[])[1]).toBeCloseTo(quantile(st.map((s) => s.action[1]!), 0.1), 12);
      expect(row['stats/timestamp/max']).toEqual([Math.fround((st.length - 1) / FPS)]);
      expect(row['stats/episode_index/mean']).toEqual([e]);
      // the camera: per channel over the original pixels, in [0, 1], shaped [3][1][1] as LeRobot's image stats
      const channel = (c: number) => st.flatMap((s) => Array.from(s.obs.image!.data.filter((_, i) => i % 3 === c)));
      const camMean = row[`stats/${key}/mean`] as number[][][];
      expect(camMean.map((c) => c.length === 1 && c[0]!.length === 1)).toEqual([true, true, true]);
      for (let c = 0; c < 3; c++) {
        expect(camMean[c]![0]![0]).toBeCloseTo(mean(channel(c)) / 255, 12);
        expect((row[`stats/${key}/max`] as number[][][])[c]![0]![0]).toBe(Math.max(...channel(c)) / 255);
        expect((row[`stats/${key}/q50`] as number[][][])[c]![0]![0]).toBeCloseTo(quantile(channel(c), 0.5) / 255, 12);
      }
      expect(row[`stats/${key}/count`]).toEqual([BigInt(st.length)]);
    }
    const stats = JSON.parse(readFileSync(join(dir, 'meta/stats.json'), 'utf8'));
    expect(stats['observation.state'].count).toEqual([15]);
    expect(stats[key].mean).toHaveLength(3);
    expect(stats[key].count).toEqual([15]);

    // back: states and actions exact, frames within the codec's loss and each at its own timestamp
    const back = await importLeRobot(dir, { layout: ARM, actionDim: 2 });
    expect(back.episodes.map((e) => e.meta.id)).toEqual(['cam-0', 'cam-1', 'cam-2']);
    back.episodes.forEach((ep, e) => ep.steps.forEach((s, k) => {
      const o = orig[e]!.steps[k]!;
      expect([s.obs.position, s.obs.velocity, s.obs.features, s.action, s.tObs]).toEqual([o.obs.position, o.obs.velocity, o.obs.features, o.action, o.tObs]);
    }));
    expectFramesMatch(orig, back.episodes, 8);
    // one episode alone finds its frames in the second file
    const one = await importLeRobot(dir, { layout: ARM, episodes: [2] });
    expectFramesMatch(orig.slice(2), one.episodes, 8);
  }, 120_000);

  it('falls back to libx264 for frames under SVT-AV1\'s 64 px minimum', async () => {
    const orig = cameraEpisodes([5, 3], 48, 32, 2);
    const dir = join(tmp('lrv-small-'), 'ds');
    const res = await exportLeRobot(orig, dir, { layout: ARM, fps: FPS });
    expect(res.camera).toEqual({ key: 'observation.images.camera', dtype: 'video', codec: 'h264' });
    expect(JSON.parse(readFileSync(join(dir, 'meta/info.json'), 'utf8')).features['observation.images.camera'].info['video.codec']).toBe('h264');
    expectFramesMatch(orig, (await importLeRobot(dir, { layout: ARM })).episodes, 12);
  }, 60_000);

  it('refuses a missing ffmpeg, frames a yuv420p video cannot hold, a missing video file and a camera whose frames do not fit its feature', async () => {
    const orig = cameraEpisodes([4, 3], 64, 64, 3);
    await expect(exportLeRobot(orig, join(tmp('lrv-noff-'), 'ds'), { layout: ARM, ffmpeg: '/nonexistent/bin/ffmpeg' }))
      .rejects.toThrow(/\/nonexistent\/bin\/ffmpeg: cannot run \(ENOENT\); LeRobot video features are encoded and decoded with ffmpeg: install it \(Debian: apt-get install ffmpeg\)/);
    await expect(exportLeRobot(cameraEpisodes([2], 64, 63), join(tmp('lrv-odd-'), 'ds'), { layout: ARM }))
      .rejects.toThrow(/feature 'observation\.images\.camera': frames are 64x63; a yuv420p video needs even sides/);

    const dir = join(tmp('lrv-bad-'), 'ds');
    await exportLeRobot(orig, dir, { layout: ARM, fps: FPS });
    await expect(importLeRobot(dir, { layout: ARM, ffmpeg: '/nonexistent/bin/ffmpeg' })).rejects.toThrow(/\/nonexistent\/bin\/ffmpeg: cannot run \(ENOENT\)/);

    const infoFile = join(dir, 'meta/info.json');
    const info = readFileSync(infoFile, 'utf8');
    const wider = JSON.parse(info);
    wider.features['observation.images.camera'].shape = [64, 80, 3];
    writeFileSync(infoFile, JSON.stringify(wider));
    await expect(importLeRobot(dir, { layout: ARM })).rejects.toThrow(/file-000\.mp4: frames are 64x64, feature 'observation\.images\.camera' has shape \[64, 80, 3\] \(80x64\)/);
    writeFileSync(infoFile, info);

    rmSync(join(dir, 'videos/observation.images.camera/chunk-000/file-000.mp4'));
    await expect(importLeRobot(dir, { layout: ARM })).rejects.toThrow(/videos\/observation\.images\.camera\/chunk-000\/file-000\.mp4: missing; feature 'observation\.images\.camera' keeps the frames of episodes 0, 1 there/);
  }, 60_000);
});

// ------------------------------------------------------------ a dataset written the way LeRobot's recorder writes it
// Built here from LeRobot's recorder (datasets/dataset_writer.py, video_utils.py), not from the exporter: each
// episode's frames encoded to their own mp4 (libsvtav1, yuv420p, g=2, crf=30), the episodes' mp4s concatenated
// into one file by ffmpeg's concat demuxer without re-encoding, from/to timestamps summed from each episode file's
// stream duration, float32 columns, stats per episode in its row, the camera only in the mp4.

function ffmpeg(args: string[], input?: Uint8Array): void {
  const r = spawnSync('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-y', ...args], { input, env: { ...process.env, SVT_LOG: '1' } });
  if (r.status !== 0) throw new Error(`ffmpeg ${args.join(' ')}: ${r.stderr}`);
}
const streamDuration = (file: string) =>
  Number(spawnSync('ffprobe', ['-v', 'error', '-select_streams', 'v:0', '-show_entries', 'stream=duration', '-of', 'csv=p=0', file], { encoding: 'utf8' }).stdout.trim());

function recorderDataset(): { dir: string; episodes: Episode[] } {
  const dir = tmp('lrv-recorder-');
  const W = 64, H = 64, key = 'observation.images.wrist';
  const episodes = cameraEpisodes([6, 4], W, H, 7);
  const work = tmp('lrv-recorder-work-');
  const epFiles = episodes.map((e, i) => {
    const f = join(work, `${key}_${String(i).padStart(3, '0')}.mp4`);
    const raw = Buffer.concat(e.steps.map((s) => s.obs.image!.data));
    const codec = encoders.includes('libsvtav1') ? ['-c:v', 'libsvtav1', '-preset', '12'] : ['-c:v', 'libx264'];
    ffmpeg(['-f', 'rawvideo', '-pix_fmt', 'rgb24', '-s', `${W}x${H}`, '-r', String(FPS), '-i', 'pipe:0', ...codec, '-pix_fmt', 'yuv420p', '-g', '2', '-crf', '30', f], raw);
    return f;
  });
  const list = join(work, 'list.ffconcat');
  writeFileSync(list, `ffconcat version 1.0\n${epFiles.map((f) => `file '${f}'`).join('\n')}\n`);
  const video = join(dir, `videos/${key}/chunk-000/file-000.mp4`);
  mkdirSync(join(video, '..'), { recursive: true });
  ffmpeg(['-f', 'concat', '-safe', '0', '-i', list, '-c', 'copy', '-movflags', 'faststart', video]);
  const durations = epFiles.map(streamDuration);
  const from = durations.map((_, i) => durations.slice(0, i).reduce((a, b) => a + b, 0));

  const rows = episodes.flatMap((e, ei) => e.steps.map((s, k) => ({ e: ei, k, s })));
  const offset = [0, episodes[0]!.steps.length];
  const f32 = (xs: ArrayLike<number>) => Array.from(xs, Math.fround);
  const data: Column[] = [
    { name: 'action', kind: 'list<float>', data: rows.map(({ s }) => f32(s.action)) },
    { name: 'observation.state', kind: 'list<float>', data: rows.map(({ s }) => f32([...s.obs.position, ...s.obs.velocity, ...s.obs.features!])) },
    { name: 'timestamp', kind: 'float', data: rows.map(({ k }) => k / FPS) },
    { name: 'frame_index', kind: 'int64', data: rows.map(({ k }) => BigInt(k)) },
    { name: 'episode_index', kind: 'int64', data: rows.map(({ e }) => BigInt(e)) },
    { name: 'index', kind: 'int64', data: rows.map(({ e, k }) => BigInt(offset[e]! + k)) },
    { name: 'task_index', kind: 'int64', data: rows.map(({ e }) => BigInt(e)) },
  ];
  mkdirSync(join(dir, 'data/chunk-000'), { recursive: true });
  writeParquet(join(dir, 'data/chunk-000/file-000.parquet'), data);
  mkdirSync(join(dir, 'meta/episodes/chunk-000'), { recursive: true });
  const perEp = (f: (e: Episode) => unknown) => episodes.map(f);
  writeParquet(join(dir, 'meta/episodes/chunk-000/file-000.parquet'), [
    { name: 'episode_index', kind: 'int64', data: [0n, 1n] },
    { name: 'tasks', kind: 'list<string>', data: [['pick the cube'], ['place the cube']] },
    { name: 'length', kind: 'int64', data: perEp((e) => BigInt(e.steps.length)) },
    { name: 'data/chunk_index', kind: 'int64', data: [0n, 0n] },
    { name: 'data/file_index', kind: 'int64', data: [0n, 0n] },
    { name: 'dataset_from_index', kind: 'int64', data: [0n, BigInt(offset[1]!)] },
    { name: 'dataset_to_index', kind: 'int64', data: [BigInt(offset[1]!), BigInt(rows.length)] },
    { name: `videos/${key}/chunk_index`, kind: 'int64', data: [0n, 0n] },
    { name: `videos/${key}/file_index`, kind: 'int64', data: [0n, 0n] },
    { name: `videos/${key}/from_timestamp`, kind: 'double', data: from },
    { name: `videos/${key}/to_timestamp`, kind: 'double', data: from.map((f, i) => f + durations[i]!) },
    { name: 'stats/action/mean', kind: 'list<double>', data: perEp((e) => [0, 1].map((i) => mean(e.steps.map((s) => s.action[i]!)))) },
    { name: `stats/${key}/mean`, kind: 'list<list<list<double>>>', data: perEp(() => [[[0.5]], [[0.5]], [[0.5]]]) },
    { name: 'meta/episodes/chunk_index', kind: 'int64', data: [0n, 0n] },
    { name: 'meta/episodes/file_index', kind: 'int64', data: [0n, 0n] },
  ]);
  writeParquet(join(dir, 'meta/tasks.parquet'), [
    { name: 'task_index', kind: 'int64', data: [0n, 1n] },
    { name: 'task', kind: 'string', data: ['pick the cube', 'place the cube'] },
  ], { pandas: JSON.stringify({ index_columns: ['task'], columns: [{ name: 'task_index' }, { name: 'task' }] }) });
  const probe = JSON.parse(spawnSync('ffprobe', ['-v', 'error', '-select_streams', 'v:0', '-show_entries', 'stream=codec_name,pix_fmt', '-of', 'json', video], { encoding: 'utf8' }).stdout).streams[0];
  writeFileSync(join(dir, 'meta/info.json'), JSON.stringify({
    codebase_version: 'v3.0', robot_type: 'so101_follower', total_episodes: 2, total_frames: rows.length, total_tasks: 2,
    chunks_size: 1000, data_files_size_in_mb: 100, video_files_size_in_mb: 200, fps: FPS, splits: { train: '0:2' },
    data_path: 'data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet',
    video_path: 'videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4',
    features: {
      action: { dtype: 'float32', shape: [2], names: ['shoulder.pos', 'elbow.pos'] },
      'observation.state': { dtype: 'float32', shape: [5], names: ['shoulder.pos', 'elbow.pos', 'shoulder.vel', 'elbow.vel', 'gripper.pos'] },
      [key]: {
        dtype: 'video', shape: [H, W, 3], names: ['height', 'width', 'channels'],
        info: { 'video.height': H, 'video.width': W, 'video.codec': probe.codec_name, 'video.pix_fmt': probe.pix_fmt, 'video.fps': FPS, 'video.channels': 3, 'video.g': 2, 'video.crf': 30, is_depth_map: false, has_audio: false },
      },
      timestamp: { dtype: 'float32', shape: [1], names: null },
      frame_index: { dtype: 'int64', shape: [1], names: null },
      episode_index: { dtype: 'int64', shape: [1], names: null },
      index: { dtype: 'int64', shape: [1], names: null },
      task_index: { dtype: 'int64', shape: [1], names: null },
    },
  }, null, 4));
  rmSync(work, { recursive: true });
  return { dir, episodes };
}

describe('LeRobot import of a video dataset written the way LeRobot\'s recorder writes one', () => {
  it('decodes each episode\'s frames from the concatenated mp4 at from_timestamp + timestamp; states, actions and tasks as written', async () => {
    const { dir, episodes } = recorderDataset();
    const ds = await importLeRobot(dir, { layout: ARM, actionDim: 2 });
    expect(ds.tasks).toEqual(['pick the cube', 'place the cube']);
    expect(ds.episodes.map((e) => e.steps.length)).toEqual([6, 4]);
    ds.episodes.forEach((ep, e) => {
      expect(ep.meta).toMatchObject({ robot: 'so101_follower', task: ['pick the cube', 'place the cube'][e] });
      ep.steps.forEach((s, k) => {
        const o = episodes[e]!.steps[k]!;
        expect(Array.from(s.obs.position)).toEqual(Array.from(o.obs.position, Math.fround));
        expect(Array.from(s.action)).toEqual(Array.from(o.action));
        expect(s.tObs).toBe(Math.fround(k / FPS));
      });
    });
    expectFramesMatch(episodes, ds.episodes, 8);
  }, 60_000);
});

describe('wmrl episodes export-lerobot / import-lerobot with a video camera', () => {
  const wmrl = (args: string[], env: NodeJS.ProcessEnv = process.env) =>
    spawnSync(process.execPath, ['--import', 'tsx', 'bin/wmrl.ts', ...args], { encoding: 'utf8', timeout: 120_000, env });

  it('exports the camera as video by default and imports it back; without ffmpeg on PATH it exits 1 saying so', () => {
    const dir = tmp('lrv-cli-');
    const orig = cameraEpisodes([5, 4], 64, 64, 9);
    const s = EpisodeStore.open(join(dir, 'a.db'));
    try {
      for (const e of orig) {
        for (const step of e.steps) s.ingest(e.meta, step);
        s.finish(e.meta.id, { status: 'complete' });
      }
    } finally {
      s.close();
    }
    const e = wmrl(['episodes', 'export-lerobot', join(dir, 'a.db'), join(dir, 'ds'), '--camera', 'front', '--fps', String(FPS)]);
    expect(e.status, e.stderr).toBe(0);
    expect(e.stdout).toMatch(/9 frames in 1 data file\(s\); camera observation\.images\.front as (av1|h264) video in 1 mp4 file\(s\)/);
    const i = wmrl(['episodes', 'import-lerobot', join(dir, 'ds'), join(dir, 'b.db')]);
    expect(i.status, i.stderr).toBe(0);
    const b = EpisodeStore.open(join(dir, 'b.db'));
    try {
      expectFramesMatch(orig, orig.map((o) => b.get(o.meta.id)), 8);
    } finally {
      b.close();
    }
    const noFfmpeg = wmrl(['episodes', 'export-lerobot', join(dir, 'a.db'), join(dir, 'ds2')], { ...process.env, PATH: '/nonexistent' });
    expect(noFfmpeg.status).toBe(1);
    expect(noFfmpeg.stderr).toMatch(/ffmpeg: cannot run \(ENOENT\).*apt-get install ffmpeg.*--images png/);
  }, 180_000);
});
