// Episode → MCAP (profile ros2, CDR messages, ros2msg schemas), readable by rosbag2, Foxglove and
// any MCAP reader. Every message of a step carries the step's seq as its MCAP `sequence`, and the
// episode's metadata goes in a Metadata record, so importEpisode() restores the episode exactly.

import { open } from 'node:fs/promises';
import { PassThrough, type Readable } from 'node:stream';
import * as zlib from 'node:zlib';
import { McapWriter, type IWritable } from '@mcap/core';
import * as lz4 from 'lz4js';
import type { Episode, EpisodeStep } from '../types.js';
import { codecFor } from './schemas.js';

export const TOPICS = {
  jointStates: '/joint_states',
  action: '/wmrl/action',
  reward: '/wmrl/reward',
  done: '/wmrl/done',
  success: '/wmrl/success',
  image: '/camera/image',
  instruction: '/wmrl/instruction',
  features: '/wmrl/features',
} as const;

/** Name of the Metadata record holding the episode's metadata. */
export const EPISODE_METADATA = 'wmrl/episode';
export const EPISODE_FORMAT = 'wmrl-episode/1';

/**
 * The QoS every exported topic offers, as rosbag2 keeps it (a YAML list in a string, its enums as numbers): reliable,
 * volatile, keep-last 10. rosbag2 needs one per channel to replay it.
 */
export const OFFERED_QOS = [
  '- history: 1',
  '  depth: 10',
  '  reliability: 1',
  '  durability: 2',
  '  deadline:\n    sec: 9223372036\n    nsec: 854775807',
  '  lifespan:\n    sec: 9223372036\n    nsec: 854775807',
  '  liveliness: 1',
  '  liveliness_lease_duration:\n    sec: 9223372036\n    nsec: 854775807',
  '  avoid_ros_namespace_conventions: false',
].join('\n');

export interface ExportOptions {
  /** Joint names for JointState.name; default meta.extra.joints when it fits, else joint_0, joint_1, … */
  jointNames?: string[];
  /** Chunk compression: none (default), lz4 or zstd (rosbag2's own choice; needs a Node with zlib zstd), all of which rosbag2 and Foxglove read. */
  compression?: Compression;
}

export const COMPRESSIONS = ['none', 'lz4', 'zstd'] as const;
export type Compression = (typeof COMPRESSIONS)[number];

type Compress = (data: Uint8Array) => Uint8Array;
// node:zlib has zstd from Node 22.15 and 23.8; the types of the Node 20 line do not declare it.
const zstdCompressSync = (zlib as unknown as { zstdCompressSync?: (data: Uint8Array) => Uint8Array }).zstdCompressSync;

/** Whether this Node can write zstd chunks (node:zlib has zstd from Node 22.15). */
export const ZSTD_AVAILABLE = typeof zstdCompressSync === 'function';

/** Refuses zstd on a Node without it, naming the Node and the way out; other compressions pass. */
export function checkCompression(c: Compression | undefined): void {
  if (c === 'zstd' && !ZSTD_AVAILABLE) {
    throw new Error(`zstd compression needs node:zlib's zstd (Node >= 22.15); this is Node ${process.version}: use lz4 (or none), or run on Node 22`);
  }
  if (c !== undefined && !(COMPRESSIONS as readonly string[]).includes(c)) throw new Error(`compression '${String(c)}' is not one of ${COMPRESSIONS.join(', ')}`);
}

function compressor(c: Compression | undefined): { compression: string; compress: Compress } | undefined {
  checkCompression(c);
  if (c === 'lz4') return { compression: 'lz4', compress: (data) => Uint8Array.from(lz4.compress(data)) };
  if (c === 'zstd') return { compression: 'zstd', compress: zstdCompressSync! };
  return undefined;
}

export interface RosTime {
  sec: number;
  nanosec: number;
}

/** Seconds → builtin_interfaces/Time. Splitting off whole seconds first keeps ns exact at epoch scale. */
export function toRosTime(t: number, field: string): RosTime {
  if (!Number.isFinite(t) || t < 0) throw new Error(`${field}: ${t} is not a time an MCAP file can hold (finite, ≥ 0 s)`);
  let sec = Math.floor(t);
  let nanosec = Math.round((t - sec) * 1e9);
  if (nanosec >= 1e9) {
    sec += 1;
    nanosec -= 1e9;
  }
  if (sec > 0x7fffffff) throw new Error(`${field}: ${t} s does not fit builtin_interfaces/Time (int32 seconds)`);
  return { sec, nanosec };
}

export const fromRosTime = (t: RosTime): number => t.sec + t.nanosec / 1e9;
const ns = (t: RosTime): bigint => BigInt(t.sec) * 1_000_000_000n + BigInt(t.nanosec);

/** What an export reads: an Episode, or its steps as they come (EpisodeStore.stream), never all held at once. */
export interface EpisodeSource extends Pick<Episode, 'meta' | 'status'> {
  steps: Iterable<EpisodeStep>;
}

/**
 * Where a bag goes as it is written, in order. `bytes` is the writer's buffer, reused once write()
 * returns: a sink that keeps the bytes copies them.
 */
export interface McapSink {
  write(bytes: Uint8Array): Promise<void>;
}

function jointNamesFor(e: Pick<Episode, 'meta'>, first: EpisodeStep | undefined, opts: ExportOptions): string[] {
  const n = first?.obs.position.length ?? 0;
  const fromMeta = e.meta.extra?.joints;
  const names =
    opts.jointNames ??
    (Array.isArray(fromMeta) && fromMeta.length === n && fromMeta.every((x) => typeof x === 'string') ? (fromMeta as string[]) : undefined);
  if (names !== undefined && names.length !== n) throw new Error(`jointNames: ${names.length} names for ${n} joints`);
  return names ?? Array.from({ length: n }, (_, i) => `joint_${i}`);
}

/** The writer's view of a sink: it also needs the byte position. */
class SinkWritable implements IWritable {
  private size = 0n;
  constructor(private readonly sink: McapSink) {}
  async write(buffer: Uint8Array): Promise<void> {
    this.size += BigInt(buffer.byteLength);
    await this.sink.write(buffer);
  }
  position(): bigint {
    return this.size;
  }
}

/** Encodes an episode as MCAP bytes, in memory (a long episode streams better: episodeMcapStream). */
export async function encodeEpisodeMcap(e: EpisodeSource, opts: ExportOptions = {}): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let size = 0;
  const sink: McapSink = {
    async write(b) {
      parts.push(Uint8Array.prototype.slice.call(b)); // a copy, even when handed a Buffer
      size += b.byteLength;
    },
  };
  await writeEpisodeMcap(e, sink, opts);
  // A plain Uint8Array (a Buffer's slice() would share memory, surprising callers).
  const all = new Uint8Array(size);
  let at = 0;
  for (const p of parts) {
    all.set(p, at);
    at += p.length;
  }
  return all;
}

/**
 * The bag as a byte stream, written as its reader takes it (the writer waits while the reader is
 * behind): memory stays at about one MCAP chunk whatever the episode's length. A fault while
 * writing destroys the stream with that error.
 */
export function episodeMcapStream(e: EpisodeSource, opts: ExportOptions = {}): Readable {
  const out = new PassThrough();
  const sink: McapSink = {
    async write(bytes) {
      if (out.destroyed) throw new Error('MCAP export: the reader went away');
      if (!out.write(Buffer.from(bytes))) await drained(out);
    },
  };
  writeEpisodeMcap(e, sink, opts).then(
    () => out.end(),
    (err: Error) => out.destroy(err),
  );
  return out;
}

function drained(s: PassThrough): Promise<void> {
  return new Promise((resolve, reject) => {
    const onDrain = () => {
      s.off('close', onClose);
      resolve();
    };
    const onClose = () => {
      s.off('drain', onDrain);
      reject(new Error('MCAP export: the reader went away'));
    };
    s.once('drain', onDrain);
    s.once('close', onClose);
  });
}

/** Writes an episode as MCAP through `sink`, step by step: only the chunk being built is held. */
export async function writeEpisodeMcap(e: EpisodeSource, sink: McapSink, opts: ExportOptions = {}): Promise<void> {
  const packer = compressor(opts.compression);
  const steps = e.steps[Symbol.iterator]();
  const head = steps.next();
  const first = head.done ? undefined : head.value;
  const joints = jointNamesFor(e, first, opts);
  const out = new SinkWritable(sink);
  const writer = new McapWriter({
    writable: out,
    useChunks: true,
    useStatistics: true,
    // Channel ids from 1, as rosbag2 numbers them.
    startChannelId: 1,
    ...(packer ? { compressChunk: (data: Uint8Array) => ({ compression: packer.compression, compressedData: packer.compress(data) }) } : {}),
  });
  await writer.start({ profile: 'ros2', library: 'wmrl-bridge' });
  const channels = new Map<string, number>();
  const schemaIds = new Map<string, number>();

  const channel = async (topic: string, type: string): Promise<number> => {
    const key = `${topic} ${type}`;
    let id = channels.get(key);
    if (id === undefined) {
      const codec = codecFor(type);
      let schemaId = schemaIds.get(type);
      if (schemaId === undefined) {
        schemaId = await writer.registerSchema({ name: codec.name, encoding: 'ros2msg', data: new TextEncoder().encode(codec.text) });
        schemaIds.set(type, schemaId);
      }
      id = await writer.registerChannel({ topic, schemaId, messageEncoding: 'cdr', metadata: new Map([['offered_qos_profiles', OFFERED_QOS], ['topic_type_hash', '']]) });
      channels.set(key, id);
    }
    return id;
  };
  const publish = async (topic: string, type: string, seq: number, time: RosTime, msg: unknown): Promise<void> => {
    const channelId = await channel(topic, type);
    const t = ns(time);
    await writer.addMessage({ channelId, sequence: seq, logTime: t, publishTime: t, data: codecFor(type).writer.writeMessage(msg) });
  };

  const stampOverrides: Array<[number, string]> = [];
  const imageSizes: Array<[number, number, number]> = [];
  if (first !== undefined) await writeStep(first, joints, publish, stampOverrides, imageSizes);
  for (let next = steps.next(); !next.done; next = steps.next()) {
    await writeStep(next.value, joints, publish, stampOverrides, imageSizes);
  }
  const metadata = new Map<string, string>([
    ['format', EPISODE_FORMAT],
    ['meta', JSON.stringify(e.meta)],
    ['status', e.status],
    ['joints', JSON.stringify(joints)],
  ]);
  if (stampOverrides.length > 0) metadata.set('obs_stamps', JSON.stringify(stampOverrides));
  if (imageSizes.length > 0) metadata.set('image_sizes', JSON.stringify(imageSizes));
  await writer.addMetadata({ name: EPISODE_METADATA, metadata });
  await writer.end();
}

type Publish = (topic: string, type: string, seq: number, time: RosTime, msg: unknown) => Promise<void>;

async function writeStep(
  s: EpisodeStep,
  joints: string[],
  publish: Publish,
  stampOverrides: Array<[number, string]>,
  imageSizes: Array<[number, number, number]>,
): Promise<void> {
  if (!Number.isInteger(s.seq) || s.seq < 0 || s.seq > 0xffffffff) throw new Error(`step.seq: ${s.seq} does not fit an MCAP sequence (uint32)`);
  const at = `step ${s.seq}`;
  const tObs = toRosTime(s.tObs, `${at} tObs`);
  const tAct = toRosTime(s.tAct, `${at} tAct`);
  const header = { stamp: tObs, frame_id: '' };
  // JointState carries tObs; a different obs.stamp (rare) is kept in the metadata record.
  // Kept as text: JSON numbers lose -0 and NaN.
  if (!Object.is(s.obs.stamp, s.tObs)) stampOverrides.push([s.seq, Object.is(s.obs.stamp, -0) ? '-0' : String(s.obs.stamp)]);
  await publish(TOPICS.jointStates, 'sensor_msgs/msg/JointState', s.seq, tObs, {
    header,
    name: joints,
    position: s.obs.position,
    velocity: s.obs.velocity,
    effort: new Float64Array(0),
  });
  const img = s.obs.image;
  if (img !== undefined) {
    if (img.encoding === 'rgb8') {
      await publish(TOPICS.image, 'sensor_msgs/msg/Image', s.seq, tObs, {
        header,
        height: img.height,
        width: img.width,
        encoding: 'rgb8',
        is_bigendian: 0,
        step: img.width * 3,
        data: img.data,
      });
    } else {
      // CompressedImage has no size fields: keep width/height beside the episode metadata.
      imageSizes.push([s.seq, img.width, img.height]);
      await publish(TOPICS.image, 'sensor_msgs/msg/CompressedImage', s.seq, tObs, { header, format: img.encoding, data: img.data });
    }
  }
  if (s.obs.instruction !== undefined) await publish(TOPICS.instruction, 'std_msgs/msg/String', s.seq, tObs, { data: s.obs.instruction });
  if (s.obs.features !== undefined) {
    const n = s.obs.features.length;
    await publish(TOPICS.features, 'std_msgs/msg/Float32MultiArray', s.seq, tObs, {
      layout: { dim: [{ label: 'features', size: n, stride: n }], data_offset: 0 },
      data: s.obs.features,
    });
  }
  const n = s.action.length;
  await publish(TOPICS.action, 'std_msgs/msg/Float64MultiArray', s.seq, tAct, {
    layout: { dim: [{ label: 'action', size: n, stride: n }], data_offset: 0 },
    data: Float64Array.from(s.action),
  });
  await publish(TOPICS.reward, 'std_msgs/msg/Float64', s.seq, tAct, { data: s.reward });
  await publish(TOPICS.done, 'std_msgs/msg/Bool', s.seq, tAct, { data: s.done });
  if (s.success !== undefined) await publish(TOPICS.success, 'std_msgs/msg/Bool', s.seq, tAct, { data: s.success });
}

/** Writes an episode to an MCAP file, as it is encoded. */
export async function exportEpisode(e: EpisodeSource, path: string, opts: ExportOptions = {}): Promise<void> {
  const file = await open(path, 'w');
  try {
    const sink: McapSink = {
      async write(b) {
        for (let off = 0; off < b.length; ) off += (await file.write(b, off, b.length - off)).bytesWritten;
      },
    };
    await writeEpisodeMcap(e, sink, opts);
  } finally {
    await file.close();
  }
}
