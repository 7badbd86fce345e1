// LeRobot `video` features through ffmpeg (Debian's package: ffmpeg and ffprobe), run as child processes over
// pipes: rgb24 frames in and an mp4 out, the encoder settings LeRobot's recorder uses; an mp4 in and rgb24 frames
// out, each with its presentation time (ffmpeg's showinfo filter reports it on stderr while the frame goes to stdout).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { LeRobotError } from './format.js';

export interface FfmpegTools {
  ffmpeg: string;
  ffprobe: string;
  /** The video encoders this ffmpeg was built with. */
  encoders: Set<string>;
  /** How to keep every decoded frame as it is: `-fps_mode` from ffmpeg 5.1, `-vsync` before (Ubuntu 22.04 has 4.4). */
  passthrough: string[];
}

/** The encoder for a camera, and what info.json records of it (LeRobot's `video.*` keys). */
export interface VideoCodec {
  encoder: 'libsvtav1' | 'libx264';
  /** The codec's canonical name, as LeRobot records it in `video.codec`. */
  codec: 'av1' | 'h264';
  args: string[];
  info: Record<string, unknown>;
}

/** LeRobot's recorder defaults: a keyframe every 2 frames (cheap random access when training), CRF 30. */
const GOP = 2;
const CRF = 30;
const SVT_PRESET = 12;
/** SVT-AV1 refuses frames smaller than this on either side. */
const SVT_MIN_SIDE = 64;

const tools = new Map<string, FfmpegTools>();

const missing = (bin: string, e: NodeJS.ErrnoException) =>
  new LeRobotError(`${bin}: cannot run (${e.code ?? e.message}); LeRobot video features are encoded and decoded with ffmpeg: install it (Debian: apt-get install ffmpeg), or export camera frames as PNG images (--images png)`);

/** Finds ffmpeg (a path, or a name on PATH) and ffprobe beside it; throws naming the binary when it cannot run. */
export function ffmpegTools(ffmpeg = 'ffmpeg'): FfmpegTools {
  const known = tools.get(ffmpeg);
  if (known) return known;
  const ffprobe = ffmpeg.includes('/') ? join(dirname(ffmpeg), 'ffprobe') : 'ffprobe';
  const enc = spawnSync(ffmpeg, ['-hide_banner', '-encoders'], { encoding: 'utf8' });
  if (enc.error) throw missing(ffmpeg, enc.error as NodeJS.ErrnoException);
  if (enc.status !== 0) throw new LeRobotError(`${ffmpeg} -encoders exited ${enc.status}: ${enc.stderr.trim().split('\n').slice(-3).join(' ')}`);
  const probe = spawnSync(ffprobe, ['-version'], { encoding: 'utf8' });
  if (probe.error) throw missing(ffprobe, probe.error as NodeJS.ErrnoException);
  const encoders = new Set([...enc.stdout.matchAll(/^ V\S{5} (\S+)/gm)].map((m) => m[1]!));
  const version = /^ffmpeg version n?(\d+)\.(\d+)/.exec(spawnSync(ffmpeg, ['-version'], { encoding: 'utf8' }).stdout ?? '');
  const old = version !== null && Number(version[1]) * 100 + Number(version[2]) < 501;
  const t = { ffmpeg, ffprobe, encoders, passthrough: old ? ['-vsync', 'passthrough'] : ['-fps_mode', 'passthrough'] };
  tools.set(ffmpeg, t);
  return t;
}

/**
 * SVT-AV1 (LeRobot's default codec) when this ffmpeg has it and the frames are at least 64 px on each side,
 * else libx264; both in yuv420p, so the sides must be even.
 */
export function chooseCodec(t: FfmpegTools, width: number, height: number, what: string): VideoCodec {
  if (width % 2 || height % 2) {
    throw new LeRobotError(`${what}: frames are ${width}x${height}; a yuv420p video needs even sides (export them as PNG images instead: --images png)`);
  }
  const common = { 'video.g': GOP, 'video.crf': CRF, 'video.fast_decode': 0, 'video.video_backend': 'ffmpeg', 'video.extra_options': {} };
  if (t.encoders.has('libsvtav1') && width >= SVT_MIN_SIDE && height >= SVT_MIN_SIDE) {
    return {
      encoder: 'libsvtav1',
      codec: 'av1',
      args: ['-c:v', 'libsvtav1', '-pix_fmt', 'yuv420p', '-g', String(GOP), '-crf', String(CRF), '-preset', String(SVT_PRESET)],
      info: { ...common, 'video.preset': SVT_PRESET },
    };
  }
  if (t.encoders.has('libx264')) {
    return {
      encoder: 'libx264',
      codec: 'h264',
      args: ['-c:v', 'libx264', '-pix_fmt', 'yuv420p', '-g', String(GOP), '-crf', String(CRF)],
      info: { ...common, 'video.preset': null },
    };
  }
  throw new LeRobotError(`${t.ffmpeg}: has neither libsvtav1 nor libx264 among its encoders; LeRobot videos need one of them`);
}

/** Collects a child's stderr, keeping the tail for error messages. */
function stderrTail(p: ChildProcess): () => string {
  let tail = '';
  p.stderr!.setEncoding('utf8');
  p.stderr!.on('data', (s: string) => {
    tail = (tail + s).slice(-4000);
  });
  return () => tail.trim().split('\n').filter((l) => !l.startsWith('Svt[info]')).slice(-4).join(' | ');
}

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Set when the process could not be started. */
  error?: Error;
}

/** Resolves when the child is gone and its pipes are drained; call right after spawn. */
function exitOf(p: ChildProcess): Promise<Exit> {
  return new Promise((resolve) => {
    p.on('close', (code: number | null, signal: NodeJS.Signals | null) => resolve({ code, signal }));
    p.on('error', (error) => {
      if (p.pid === undefined) resolve({ code: null, signal: null, error });
    });
  });
}

/**
 * Encodes rgb24 frames (row-major, width x height x 3 each) into `file` at `fps`. Frames are pulled one at a time
 * and written as ffmpeg takes them, so a long episode is never held raw in memory.
 */
export async function encodeVideo(t: FfmpegTools, file: string, frames: Iterable<Uint8Array>, size: { width: number; height: number }, fps: number, codec: VideoCodec): Promise<number> {
  const { width, height } = size;
  const p = spawn(t.ffmpeg, [
    '-hide_banner', '-loglevel', 'error', '-nostdin', '-y',
    '-f', 'rawvideo', '-pix_fmt', 'rgb24', '-s', `${width}x${height}`, '-r', String(fps), '-i', 'pipe:0',
    '-an', ...codec.args, '-movflags', '+faststart', file,
  ], { stdio: ['pipe', 'ignore', 'pipe'], env: { ...process.env, SVT_LOG: '1' } });
  const exited = exitOf(p);
  let gone = false;
  void exited.then(() => (gone = true));
  const tail = stderrTail(p);
  // ffmpeg closing its input early (it failed) surfaces as EPIPE here; its exit status says why.
  let pipeError: Error | undefined;
  p.stdin!.on('error', (e) => (pipeError = e));
  let n = 0;
  try {
    for (const f of frames) {
      if (f.length !== width * height * 3) throw new LeRobotError(`${file}: frame ${n} holds ${f.length} bytes, a ${width}x${height} rgb24 frame ${width * height * 3}`);
      if (gone || pipeError) break;
      if (!p.stdin!.write(f)) await Promise.race([new Promise((r) => p.stdin!.once('drain', r)), exited]);
      n++;
    }
  } catch (e) {
    p.kill('SIGKILL');
    await exited;
    throw e;
  } finally {
    p.stdin!.end();
  }
  const { code, signal, error } = await exited;
  if (error) throw missing(t.ffmpeg, error as NodeJS.ErrnoException);
  if (code !== 0) throw new LeRobotError(`${file}: ffmpeg (${codec.encoder}) failed (${signal ?? `exit ${code}`}): ${tail() || pipeError?.message || 'no message'}`);
  return n;
}

export interface VideoStream {
  width: number;
  height: number;
  codec: string;
  pixFmt: string;
}

/** The first video stream of `file`: its size, codec and pixel format. */
export function probeVideo(t: FfmpegTools, file: string): VideoStream {
  const r = spawnSync(t.ffprobe, ['-v', 'error', '-select_streams', 'v:0', '-show_entries', 'stream=width,height,codec_name,pix_fmt', '-of', 'json', file], { encoding: 'utf8' });
  if (r.error) throw missing(t.ffprobe, r.error as NodeJS.ErrnoException);
  if (r.status !== 0) throw new LeRobotError(`${file}: not a video ffprobe reads (${r.stderr.trim().split('\n').slice(-2).join(' ')})`);
  const s = (JSON.parse(r.stdout) as { streams?: Array<{ width?: number; height?: number; codec_name?: string; pix_fmt?: string }> }).streams?.[0];
  if (!s?.width || !s.height) throw new LeRobotError(`${file}: has no video stream`);
  return { width: s.width, height: s.height, codec: s.codec_name ?? 'unknown', pixFmt: s.pix_fmt ?? 'unknown' };
}

/**
 * Decodes every frame of `file`'s first video stream in presentation order and hands each to `onFrame` with its
 * time in seconds (pts x time base, as LeRobot's decoders read it); each frame is its own buffer.
 */
export async function decodeVideo(t: FfmpegTools, file: string, size: { width: number; height: number }, onFrame: (time: number, rgb: Uint8Array) => void): Promise<number> {
  const frameBytes = size.width * size.height * 3;
  const p = spawn(t.ffmpeg, [
    '-hide_banner', '-nostats', '-nostdin', '-loglevel', 'info', '-i', file,
    '-map', '0:v:0', '-vf', 'showinfo', ...t.passthrough, '-f', 'rawvideo', '-pix_fmt', 'rgb24', 'pipe:1',
  ], { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = exitOf(p);
  let timeBase: number | undefined;
  const times: number[] = [];
  let tail = '';
  let line = '';
  // Frames can arrive on stdout before their showinfo line on stderr: they wait in `held` until it comes.
  const held: Uint8Array[] = [];
  let n = 0;
  let failure: unknown;
  const deliver = () => {
    try {
      while (!failure && held.length && times[n] !== undefined) {
        const time = times[n]!;
        if (!Number.isFinite(time)) throw new LeRobotError(`${file}: frame ${n} has no presentation time`);
        onFrame(time, held.shift()!);
        n++;
      }
    } catch (e) {
      failure = e;
      p.kill('SIGKILL');
    }
  };
  p.stderr!.setEncoding('utf8');
  p.stderr!.on('data', (s: string) => {
    tail = (tail + s).slice(-4000);
    line += s;
    const lines = line.split('\n');
    line = lines.pop()!;
    for (const l of lines) {
      const tb = /config in time_base: (\d+)\/(\d+)/.exec(l);
      if (tb && timeBase === undefined) timeBase = Number(tb[1]) / Number(tb[2]);
      const f = /\] n: *(\d+) pts: *(-?\d+)/.exec(l);
      if (f) times[Number(f[1])] = Number(f[2]) * (timeBase ?? NaN);
    }
    deliver();
  });
  let buf: Buffer = Buffer.alloc(0);
  p.stdout!.on('data', (chunk: Buffer) => {
    if (failure) return;
    buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
    while (buf.length >= frameBytes) {
      held.push(new Uint8Array(buf.subarray(0, frameBytes)));
      buf = buf.subarray(frameBytes);
    }
    deliver();
  });
  const { code, signal, error } = await exited;
  if (error) throw missing(t.ffmpeg, error as NodeJS.ErrnoException);
  if (failure) throw failure;
  if (code !== 0) throw new LeRobotError(`${file}: ffmpeg could not decode it (${signal ?? `exit ${code}`}): ${tail.trim().split('\n').slice(-3).join(' | ')}`);
  deliver();
  if (failure) throw failure;
  if (buf.length) throw new LeRobotError(`${file}: decoded ${buf.length} bytes past the last whole ${size.width}x${size.height} frame`);
  if (held.length) throw new LeRobotError(`${file}: ${held.length} decoded frame(s) without a presentation time`);
  return n;
}
