// MCAP → Episode. A bag written by exportEpisode() comes back exactly (its steps are grouped by the
// MCAP `sequence` and its metadata record restores the meta). Any other ros2 bag with
// sensor_msgs/JointState imports too: each JointState is a step, and action/reward/image/
// instruction/features messages join the latest step at or before their log time.

import { basename, extname } from 'node:path';
import type { Image } from '../../common/robot.js';
import type { Episode, EpisodeMeta, EpisodeStatus, EpisodeStep } from '../types.js';
import { EPISODE_FORMAT, EPISODE_METADATA, TOPICS, fromRosTime } from './export.js';
import { McapReadError, readMcap, readMcapBytes, type DecodedMessage, type McapContents, type ReadOptions } from './read.js';

export { McapReadError, readMcap, readMcapBytes };
export type { DecodedMessage, McapContents, ReadOptions };

type Fail = (problem: string) => never;
type Rec = Record<string, unknown>;

const isRec = (v: unknown): v is Rec => typeof v === 'object' && v !== null;

function field(msg: unknown, name: string, what: string, fail: Fail): unknown {
  if (!isRec(msg) || !(name in msg)) fail(`${what} has no field '${name}'`);
  return (msg as Rec)[name];
}

function numbers(v: unknown, what: string, fail: Fail): ArrayLike<number> {
  if ((ArrayBuffer.isView(v) && !(v instanceof DataView) && !(v instanceof BigInt64Array) && !(v instanceof BigUint64Array)) || (Array.isArray(v) && v.every((x) => typeof x === 'number'))) {
    return v as ArrayLike<number>;
  }
  return fail(`${what} is not a numeric array`);
}

function num(v: unknown, what: string, fail: Fail): number {
  if (typeof v === 'number') return v;
  return fail(`${what} is not a number`);
}

function stampOf(msg: unknown, what: string, fail: Fail): number | undefined {
  if (!isRec(msg) || !isRec(msg.header) || !isRec(msg.header.stamp)) return undefined;
  const s = msg.header.stamp;
  const t = fromRosTime({ sec: num(s.sec, `${what} header.stamp.sec`, fail), nanosec: num(s.nanosec, `${what} header.stamp.nanosec`, fail) });
  return t === 0 ? undefined : t; // an unstamped message: fall back to its log time
}

const seconds = (ns: bigint): number => fromRosTime({ sec: Number(ns / 1_000_000_000n), nanosec: Number(ns % 1_000_000_000n) });

/** Width and height from a PNG IHDR or a JPEG SOF marker; undefined when neither is found. */
export function compressedImageSize(data: Uint8Array): [number, number] | undefined {
  const dv = new DataView(data.buffer, data.byteOffset, data.byteLength);
  if (data.length >= 24 && data[0] === 0x89 && data[1] === 0x50 && data[2] === 0x4e && data[3] === 0x47) return [dv.getUint32(16), dv.getUint32(20)];
  if (data.length >= 4 && data[0] === 0xff && data[1] === 0xd8) {
    for (let i = 2; i + 9 < data.length; ) {
      if (data[i] !== 0xff) return undefined;
      const marker = data[i + 1];
      const isSof = marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc;
      if (isSof) return [dv.getUint16(i + 7), dv.getUint16(i + 5)];
      i += 2 + dv.getUint16(i + 2);
    }
  }
  return undefined;
}

function imageOf(m: DecodedMessage, size: [number, number] | undefined, fail: Fail): Image | undefined {
  const what = `${m.schemaName} on ${m.topic}`;
  const data = field(m.data, 'data', what, fail);
  if (!(data instanceof Uint8Array)) return fail(`${what} data is not a byte array`);
  if (m.schemaName === 'sensor_msgs/msg/CompressedImage') {
    const format = String(field(m.data, 'format', what, fail)).toLowerCase();
    const encoding = format.includes('png') ? 'png' : format.includes('jpeg') || format.includes('jpg') ? 'jpeg' : undefined;
    if (encoding === undefined) return undefined;
    const [width, height] = size ?? compressedImageSize(data) ?? [0, 0];
    return { width, height, encoding, data: data.slice() };
  }
  const width = num(field(m.data, 'width', what, fail), `${what} width`, fail);
  const height = num(field(m.data, 'height', what, fail), `${what} height`, fail);
  const step = num(field(m.data, 'step', what, fail), `${what} step`, fail);
  const enc = String(field(m.data, 'encoding', what, fail));
  if (enc !== 'rgb8' && enc !== 'bgr8') return undefined; // not representable as an Episode image
  if (step < width * 3 || data.length < step * height) return fail(`${what}: ${data.length} bytes do not hold ${height} rows of ${step}`);
  const out = new Uint8Array(width * height * 3);
  for (let r = 0; r < height; r++) out.set(data.subarray(r * step, r * step + width * 3), r * width * 3);
  if (enc === 'bgr8') for (let i = 0; i < out.length; i += 3) [out[i], out[i + 2]] = [out[i + 2], out[i]];
  return { width, height, encoding: 'rgb8', data: out };
}

function parseJson(text: string | undefined, what: string, fail: Fail): unknown {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return fail(`metadata ${EPISODE_METADATA}: ${what} is not valid JSON`);
  }
}

function table(text: string | undefined, what: string, width: number, fail: Fail): unknown[][] {
  const v = parseJson(text, what, fail) ?? [];
  if (!Array.isArray(v) || !v.every((r) => Array.isArray(r) && r.length === width)) fail(`metadata ${EPISODE_METADATA}: ${what} is not a list of ${width}-tuples`);
  return v as unknown[][];
}

/** Maps decoded MCAP contents to an Episode; `source` names the file in errors. */
export function episodeFromMcap(c: McapContents, source: string): Episode {
  const fail: Fail = (problem) => {
    throw new McapReadError(source, problem);
  };
  const record = c.metadata.find((m) => m.name === EPISODE_METADATA && m.metadata.format === EPISODE_FORMAT)?.metadata;
  const ours = record !== undefined;

  // One channel per role: our topic name when present, else the first channel of the type.
  const pick = (topic: string, types: string[]): Set<number> => {
    const of = c.channels.filter((ch) => types.includes(ch.schemaName));
    const named = of.filter((ch) => ch.topic === topic);
    return new Set((named.length > 0 ? named : of.slice(0, 1)).map((ch) => ch.id));
  };
  const roles = {
    joints: pick(TOPICS.jointStates, ['sensor_msgs/msg/JointState']),
    action: pick(TOPICS.action, ['std_msgs/msg/Float64MultiArray', 'std_msgs/msg/Float32MultiArray']),
    reward: pick(TOPICS.reward, ['std_msgs/msg/Float64', 'std_msgs/msg/Float32']),
    image: pick(TOPICS.image, ['sensor_msgs/msg/Image', 'sensor_msgs/msg/CompressedImage']),
    instruction: pick(TOPICS.instruction, ['std_msgs/msg/String']),
    features: pick(TOPICS.features, ['std_msgs/msg/Float32MultiArray']),
  };
  // In a foreign bag a second Float32MultiArray is not our features; keep roles apart.
  for (const id of roles.features) if (roles.action.has(id) && !ours) roles.features.delete(id);
  const byTopic = (topic: string) => new Set(c.channels.filter((ch) => ch.topic === topic).map((ch) => ch.id));
  const doneCh = ours ? byTopic(TOPICS.done) : new Set<number>();
  const successCh = ours ? byTopic(TOPICS.success) : new Set<number>();
  if (roles.joints.size === 0) fail('no sensor_msgs/msg/JointState messages: nothing to make episode steps from');

  const imageSizes = new Map(table(record?.image_sizes, 'image_sizes', 3, fail).map(([s, w, h]) => [Number(s), [Number(w), Number(h)] as [number, number]]));
  const obsStamps = new Map(table(record?.obs_stamps, 'obs_stamps', 2, fail).map(([k, v]) => [Number(k), Number(v)]));

  const steps = new Map<number, EpisodeStep>();
  const jointTimes: Array<[bigint, number]> = []; // (log time, step key), in log-time order
  let names: string[] | undefined;
  for (const m of c.messages) {
    if (!roles.joints.has(m.channelId)) continue;
    const what = `${m.schemaName} on ${m.topic} at ${m.logTime} ns`;
    const msgNames = field(m.data, 'name', what, fail);
    const position = numbers(field(m.data, 'position', what, fail), `${what} position`, fail);
    const velocity = numbers(field(m.data, 'velocity', what, fail), `${what} velocity`, fail);
    if (!Array.isArray(msgNames)) fail(`${what} name is not a string array`);
    const got = msgNames as string[];
    if (got.length !== position.length) fail(`${what}: ${got.length} names for ${position.length} positions`);
    names ??= got;
    const first = names;
    const order = first.map((n) => got.indexOf(n));
    if (order.some((i) => i < 0) || got.length !== first.length) fail(`${what}: joints ${String(got)} differ from the first message's ${String(first)}`);
    const key = ours ? m.sequence : jointTimes.length;
    if (steps.has(key)) fail(`${what}: a second JointState for step ${key}`);
    const tObs = stampOf(m.data, what, fail) ?? seconds(m.logTime);
    steps.set(key, {
      seq: key,
      tObs,
      tAct: tObs,
      obs: {
        stamp: obsStamps.get(key) ?? tObs,
        position: Float64Array.from(order, (i) => position[i]),
        // A JointState may leave velocity empty: unknown is NaN, not a made-up 0.
        velocity: Float64Array.from(order, (i) => (velocity.length === position.length ? velocity[i] : NaN)),
      },
      action: new Float32Array(0),
      reward: 0,
      done: false,
    });
    jointTimes.push([m.logTime, key]);
  }
  // Ours: the step with the message's sequence. Foreign: the latest JointState at or before it.
  const stepFor = (m: DecodedMessage): EpisodeStep | undefined => {
    if (ours) return steps.get(m.sequence);
    let lo = 0;
    let hi = jointTimes.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (jointTimes[mid][0] <= m.logTime) lo = mid + 1;
      else hi = mid;
    }
    return lo === 0 ? undefined : steps.get(jointTimes[lo - 1][1]);
  };

  for (const m of c.messages) {
    if (roles.joints.has(m.channelId)) continue;
    const what = `${m.schemaName} on ${m.topic} at ${m.logTime} ns`;
    const step = stepFor(m);
    if (step === undefined) {
      if (ours && [roles.action, roles.reward, roles.image, roles.instruction, roles.features, doneCh, successCh].some((s) => s.has(m.channelId))) {
        fail(`${what}: step ${m.sequence} has no JointState message`);
      }
      continue; // a foreign message before the first JointState
    }
    if (roles.action.has(m.channelId)) {
      step.action = Float32Array.from(numbers(field(m.data, 'data', what, fail), `${what} data`, fail));
      step.tAct = seconds(m.logTime);
    } else if (roles.reward.has(m.channelId)) {
      step.reward = num(field(m.data, 'data', what, fail), `${what} data`, fail);
    } else if (doneCh.has(m.channelId)) {
      step.done = field(m.data, 'data', what, fail) === true;
    } else if (successCh.has(m.channelId)) {
      step.success = field(m.data, 'data', what, fail) === true;
    } else if (roles.image.has(m.channelId)) {
      const img = imageOf(m, imageSizes.get(step.seq), fail);
      if (img !== undefined) step.obs.image = img;
    } else if (roles.instruction.has(m.channelId)) {
      step.obs.instruction = String(field(m.data, 'data', what, fail));
    } else if (roles.features.has(m.channelId)) {
      step.obs.features = Float32Array.from(numbers(field(m.data, 'data', what, fail), `${what} data`, fail));
    }
  }

  const ordered = [...steps.values()].sort((a, b) => a.seq - b.seq);
  if (!ours && ordered.length > 0) ordered[ordered.length - 1].done = true;
  let meta: EpisodeMeta;
  let status: EpisodeStatus = 'complete';
  if (ours) {
    const m = parseJson(record.meta, 'meta', fail);
    if (!isRec(m) || typeof m.id !== 'string' || typeof m.robot !== 'string' || typeof m.startedAt !== 'number') fail(`metadata ${EPISODE_METADATA}: meta lacks id, robot or startedAt`);
    meta = m as unknown as EpisodeMeta;
    const s = record.status;
    if (s !== 'complete' && s !== 'partial' && s !== 'recording') fail(`metadata ${EPISODE_METADATA}: unknown status '${String(s)}'`);
    status = s as EpisodeStatus;
  } else {
    const first = c.messages.find((m) => roles.joints.has(m.channelId));
    meta = {
      id: basename(source, extname(source)),
      robot: 'unknown',
      policyVersion: '',
      hardwareProfile: '',
      startedAt: first ? Number(first.logTime / 1_000_000n) : 0,
      extra: { source, joints: names ?? [] },
    };
  }
  return { meta, status, steps: ordered };
}

/** Imports an Episode from MCAP bytes. Every failure is a McapReadError naming `source`. */
export function importEpisodeBytes(bytes: Uint8Array, source: string, opts: ReadOptions = {}): Episode {
  return mapSafely(readMcapBytes(bytes, source, opts), source);
}

function mapSafely(contents: McapContents, source: string): Episode {
  try {
    return episodeFromMcap(contents, source);
  } catch (e) {
    if (e instanceof McapReadError) throw e;
    // Not expected: every check above names its problem. Still never let a bad file crash a caller.
    throw new McapReadError(source, `internal error while mapping to an episode: ${e instanceof Error ? e.message : String(e)}`);
  }
}

/** Imports an Episode from an MCAP file (ours, or any ros2 bag with sensor_msgs/JointState). */
export async function importEpisode(path: string, opts: ReadOptions = {}): Promise<Episode> {
  return mapSafely(await readMcap(path, opts), path);
}
