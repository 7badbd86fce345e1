// Episode → rosbag2 bag folder: `DIR/metadata.yaml` + `DIR/<name>_0.mcap`, the layout `ros2 bag record -s mcap -o DIR`
// leaves, so `ros2 bag info DIR` and `ros2 bag play DIR` take it. The metadata is read back from the written file's
// MCAP summary (Statistics, channels, schemas), as rosbag2's MCAP storage plugin reads it, never counted separately.
//
// metadata.yaml is written at version 8 (Iron's): the newest layout whose offered_qos_profiles is the string the
// MCAP channels carry, which every reader from Humble on accepts; version 9 (Jazzy) turned it into a YAML list that
// Humble's reader cannot take.

import { existsSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { open, writeFile } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import { McapIndexedReader } from '@mcap/core';
import { stringify } from 'yaml';
import { checkCompression, exportEpisode, type EpisodeSource, type ExportOptions } from './export.js';
import { DEFAULT_DECOMPRESS } from './read.js';

export const METADATA_FILE = 'metadata.yaml';
export const METADATA_VERSION = 8;

export interface Rosbag2Topic {
  topic_metadata: {
    name: string;
    type: string;
    serialization_format: string;
    offered_qos_profiles: string;
    type_description_hash: string;
  };
  message_count: number;
}

export interface Rosbag2Metadata {
  version: number;
  storage_identifier: 'mcap';
  duration: { nanoseconds: bigint };
  starting_time: { nanoseconds_since_epoch: bigint };
  message_count: number;
  topics_with_message_count: Rosbag2Topic[];
  compression_format: string;
  compression_mode: string;
  relative_file_paths: string[];
  files: Array<{ path: string; starting_time: { nanoseconds_since_epoch: bigint }; duration: { nanoseconds: bigint }; message_count: number }>;
  custom_data: Record<string, string> | null;
  ros_distro: string;
}

/**
 * The `rosbag2_bagfile_information` of one MCAP file of a bag, from its summary section. `relativePath` is the file's
 * path from the bag folder. Chunk compression stays inside MCAP: compression_format and compression_mode name
 * rosbag2's own file or message compression, which this file does not use, so they are empty.
 */
export async function rosbag2MetadataOf(file: string, relativePath: string, customData: Record<string, string> | null = null): Promise<Rosbag2Metadata> {
  const fh = await open(file, 'r');
  try {
    const size = (await fh.stat()).size;
    const reader = await McapIndexedReader.Initialize({
      readable: {
        size: async () => BigInt(size),
        read: async (offset, length) => {
          const buf = new Uint8Array(Number(length));
          for (let at = 0; at < buf.length; ) {
            const { bytesRead } = await fh.read(buf, at, buf.length - at, Number(offset) + at);
            if (bytesRead === 0) throw new Error(`${file}: ends at byte ${Number(offset) + at}, inside a record`);
            at += bytesRead;
          }
          return buf;
        },
      },
      decompressHandlers: DEFAULT_DECOMPRESS,
    });
    const stats = reader.statistics;
    if (stats === undefined) throw new Error(`${file}: the MCAP file has no Statistics record, which a bag's metadata is read from`);
    if (reader.header.profile !== 'ros2') throw new Error(`${file}: MCAP profile '${reader.header.profile}', not ros2: not a ROS 2 bag`);
    const topics: Rosbag2Topic[] = [...reader.channelsById.values()]
      .sort((a, b) => a.id - b.id)
      .map((c) => {
        const schema = reader.schemasById.get(c.schemaId);
        if (schema === undefined) throw new Error(`${file}: channel ${c.topic} has no schema (a ROS 2 bag names each topic's type)`);
        return {
          topic_metadata: {
            name: c.topic,
            type: schema.name,
            serialization_format: c.messageEncoding,
            offered_qos_profiles: c.metadata.get('offered_qos_profiles') ?? '',
            type_description_hash: c.metadata.get('topic_type_hash') ?? '',
          },
          message_count: Number(stats.channelMessageCounts.get(c.id) ?? 0n),
        };
      });
    const count = Number(stats.messageCount);
    const start = count > 0 ? stats.messageStartTime : 0n;
    const duration = count > 0 ? stats.messageEndTime - stats.messageStartTime : 0n;
    return {
      version: METADATA_VERSION,
      storage_identifier: 'mcap',
      duration: { nanoseconds: duration },
      starting_time: { nanoseconds_since_epoch: start },
      message_count: count,
      topics_with_message_count: topics,
      compression_format: '',
      compression_mode: '',
      relative_file_paths: [relativePath],
      files: [{ path: relativePath, starting_time: { nanoseconds_since_epoch: start }, duration: { nanoseconds: duration }, message_count: count }],
      custom_data: customData,
      ros_distro: '',
    };
  } finally {
    await fh.close();
  }
}

/** metadata.yaml's text: the information under `rosbag2_bagfile_information`, multi-line strings double-quoted as rosbag2 writes them. */
export function formatRosbag2Metadata(m: Rosbag2Metadata): string {
  return stringify({ rosbag2_bagfile_information: m }, { blockQuote: false, doubleQuotedAsJSON: true, lineWidth: 0, nullStr: '~' });
}

export interface Rosbag2Export {
  dir: string;
  /** The MCAP file, inside `dir`. */
  file: string;
  metadata: Rosbag2Metadata;
}

/**
 * Writes an episode as a rosbag2 bag folder `dir` (made here; an existing non-empty folder is refused, as
 * `ros2 bag record` refuses one): `dir/<name>_0.mcap` and `dir/metadata.yaml`.
 */
export async function exportRosbag2(e: EpisodeSource, dir: string, opts: ExportOptions = {}): Promise<Rosbag2Export> {
  checkCompression(opts.compression);
  const name = basename(resolve(dir));
  if (existsSync(dir)) {
    if (!statSync(dir).isDirectory()) throw new Error(`${dir}: exists and is not a folder; a rosbag2 bag is a folder`);
    if (readdirSync(dir).length > 0) throw new Error(`${dir}: the folder exists and is not empty; a rosbag2 bag goes into a new or empty folder`);
  }
  mkdirSync(dir, { recursive: true });
  const relative = `${name}_0.mcap`;
  const file = join(dir, relative);
  await exportEpisode(e, file, opts);
  const metadata = await rosbag2MetadataOf(file, relative, { 'wmrl.episode': e.meta.id, 'wmrl.status': e.status });
  await writeFile(join(dir, METADATA_FILE), formatRosbag2Metadata(metadata));
  return { dir, file, metadata };
}
