// Episode → rosbag2 bag folder (metadata.yaml + <name>_0.mcap): metadata.yaml has the keys and types rosbag2 writes
// and its numbers are the bag's own; the metadata this project derives from an MCAP file equals what rosbag2 wrote
// for its own recordings (shared/fixtures/rosbag2); the bag reads back with the same messages as the single-file
// export; zstd chunks round-trip where the Node has zstd and are refused with a clear error where it has not.

import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { McapIndexedReader } from '@mcap/core';
import { parse } from 'yaml';
import { afterAll, describe, expect, it } from 'vitest';
import { OFFERED_QOS, ZSTD_AVAILABLE, exportEpisode } from '../episodes/mcap/export.js';
import { importEpisode } from '../episodes/mcap/import.js';
import { DEFAULT_DECOMPRESS, readMcap } from '../episodes/mcap/read.js';
import { METADATA_FILE, exportRosbag2, rosbag2MetadataOf } from '../episodes/mcap/rosbag2.js';
import { richEpisode } from './helpers/episode-data.js';

const dir = mkdtempSync(join(tmpdir(), 'rosbag2-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..');
const fixtures = join(repoRoot, '..', 'shared', 'fixtures', 'rosbag2');
const haveFixtures = existsSync(join(fixtures, 'talker.mcap')) && existsSync(join(fixtures, 'cdr_test_0.mcap'));
const noFixtures = `skipped: ${fixtures} is absent (shared/ is not beside this checkout)`;

/** A value's type tree: the keys of maps, the element shape of lists, the YAML type of scalars. */
function shape(v: unknown): unknown {
  if (Array.isArray(v)) return [shape(v[0])];
  if (v === null) return 'null';
  if (typeof v === 'bigint' || (typeof v === 'number' && Number.isInteger(v))) return 'int';
  if (typeof v === 'object') return Object.fromEntries(Object.entries(v as Record<string, unknown>).map(([k, x]) => [k, shape(x)]).sort(([a], [b]) => (a as string).localeCompare(b as string)));
  return typeof v;
}

// The layout rosbag2 writes at metadata version 8 (rosbag2_storage's YAML encoding of BagMetadata): the keys of its
// own recordings' metadata.yaml, with ros_distro (added at version 8); custom_data, a map of strings, is checked apart.
const ROSBAG2_SHAPE = shape({
  version: 8,
  storage_identifier: 'mcap',
  duration: { nanoseconds: 1n },
  starting_time: { nanoseconds_since_epoch: 1n },
  message_count: 1,
  topics_with_message_count: [{ topic_metadata: { name: '/t', type: 'p/msg/T', serialization_format: 'cdr', offered_qos_profiles: 'q', type_description_hash: '' }, message_count: 1 }],
  compression_format: '',
  compression_mode: '',
  relative_file_paths: ['f'],
  files: [{ path: 'f', starting_time: { nanoseconds_since_epoch: 1n }, duration: { nanoseconds: 1n }, message_count: 1 }],
  ros_distro: '',
});

const readYaml = (path: string) => (parse(readFileSync(path, 'utf8'), { intAsBigInt: true }) as { rosbag2_bagfile_information: Record<string, unknown> }).rosbag2_bagfile_information;

async function chunkCompressions(file: string): Promise<string[]> {
  const bytes = await readFile(file);
  const r = await McapIndexedReader.Initialize({
    readable: { size: async () => BigInt(bytes.length), read: async (o, n) => bytes.subarray(Number(o), Number(o + n)) },
    decompressHandlers: DEFAULT_DECOMPRESS,
  });
  return [...new Set(r.chunkIndexes.map((c) => c.compression))];
}

describe('rosbag2 bag folder export', () => {
  it("writes metadata.yaml with rosbag2's keys and types and the bag's own counts and times, beside <name>_0.mcap", async () => {
    const e = richEpisode('ep-bag', 9, 'rgb8', 4);
    const out = join(dir, 'bag1');
    const bag = await exportRosbag2(e, out);
    expect(readdirSync(out).sort()).toEqual(['bag1_0.mcap', METADATA_FILE]);
    expect(bag.file).toBe(join(out, 'bag1_0.mcap'));
    const m = readYaml(join(out, METADATA_FILE));
    const { custom_data: custom, ...rest } = m;
    expect(shape(rest)).toEqual(ROSBAG2_SHAPE);
    expect(custom).toEqual({ 'wmrl.episode': 'ep-bag', 'wmrl.status': e.status });
    expect(m).toMatchObject({ version: 8n, storage_identifier: 'mcap', compression_format: '', compression_mode: '', relative_file_paths: ['bag1_0.mcap'], ros_distro: '' });

    // The numbers are those of the messages in the file, read back.
    const c = await readMcap(bag.file);
    const times = c.messages.map((x) => x.logTime);
    const start = times.reduce((a, b) => (b < a ? b : a));
    const end = times.reduce((a, b) => (b > a ? b : a));
    expect(m.message_count).toBe(BigInt(c.messages.length));
    expect(m.starting_time).toEqual({ nanoseconds_since_epoch: start });
    expect(m.duration).toEqual({ nanoseconds: end - start });
    expect(m.files).toEqual([{ path: 'bag1_0.mcap', starting_time: { nanoseconds_since_epoch: start }, duration: { nanoseconds: end - start }, message_count: BigInt(c.messages.length) }]);
    const topics = m.topics_with_message_count as Array<{ topic_metadata: Record<string, string>; message_count: bigint }>;
    expect(topics.map((t) => t.topic_metadata.name).sort()).toEqual(c.channels.map((ch) => ch.topic).sort());
    for (const t of topics) {
      const ch = c.channels.find((x) => x.topic === t.topic_metadata.name)!;
      expect(t.topic_metadata).toEqual({ name: ch.topic, type: ch.schemaName, serialization_format: 'cdr', offered_qos_profiles: OFFERED_QOS, type_description_hash: '' });
      expect(t.message_count).toBe(BigInt(c.messages.filter((x) => x.topic === ch.topic).length));
    }
    expect(topics.find((t) => t.topic_metadata.name === '/joint_states')).toMatchObject({ topic_metadata: { type: 'sensor_msgs/msg/JointState' }, message_count: 9n });
  });

  it('reads back with the same messages as the single-file export, and imports as the same episode', async () => {
    const e = richEpisode('ep-same', 6, 'png', 8);
    const bag = await exportRosbag2(e, join(dir, 'same'));
    const single = join(dir, 'same.mcap');
    await exportEpisode(e, single);
    const [a, b] = [await readMcap(bag.file), await readMcap(single)];
    const strip = (c: typeof a) => c.messages.map(({ channelId: _id, ...m }) => m);
    expect(a.messages.length).toBeGreaterThan(6 * 4);
    expect(strip(a)).toEqual(strip(b));
    expect(await importEpisode(bag.file)).toEqual(e);
  });

  it('an existing non-empty folder or a file at OUT is refused, naming it', async () => {
    const e = richEpisode('ep-x', 2);
    const full = join(dir, 'full');
    mkdirSync(full);
    writeFileSync(join(full, 'other.txt'), 'x');
    await expect(exportRosbag2(e, full)).rejects.toThrow(/full: the folder exists and is not empty/);
    const file = join(dir, 'afile');
    writeFileSync(file, 'x');
    await expect(exportRosbag2(e, file)).rejects.toThrow(/afile: exists and is not a folder/);
    // An empty folder is taken, as rosbag2's own output folder would be made.
    mkdirSync(join(dir, 'empty'));
    expect((await exportRosbag2(e, join(dir, 'empty'))).file).toBe(join(dir, 'empty', 'empty_0.mcap'));
  });

  it.runIf(ZSTD_AVAILABLE)(`zstd chunks (Node ${process.version} has node:zlib zstd): smaller, read back by the zstd decoder, the same episode`, async () => {
    const e = richEpisode('ep-zstd', 40, 'rgb8', 2);
    const plain = await exportRosbag2(e, join(dir, 'plain'));
    const packed = await exportRosbag2(e, join(dir, 'zstd'), { compression: 'zstd' });
    expect(await chunkCompressions(packed.file)).toEqual(['zstd']);
    expect(readFileSync(packed.file).length).toBeLessThan(readFileSync(plain.file).length);
    expect(await importEpisode(packed.file)).toEqual(e);
    // Chunk compression is MCAP's own: rosbag2's file/message compression stays off.
    expect(readYaml(join(dir, 'zstd', METADATA_FILE))).toMatchObject({ compression_format: '', compression_mode: '', message_count: BigInt(plain.metadata.message_count) });
  });

  it.runIf(!ZSTD_AVAILABLE)(`zstd is refused with a clear error on Node ${process.version}, whose node:zlib has no zstd, and nothing is written`, async () => {
    const out = join(dir, 'nozstd');
    await expect(exportRosbag2(richEpisode('ep-nz', 2), out, { compression: 'zstd' })).rejects.toThrow(/zstd compression needs node:zlib's zstd \(Node >= 22\.15\); this is Node v\d+.*use lz4/);
    expect(existsSync(out)).toBe(false);
    await expect(exportEpisode(richEpisode('ep-nz', 2), join(dir, 'nozstd.mcap'), { compression: 'zstd' })).rejects.toThrow(/Node >= 22\.15/);
  });

  it('lz4 chunks in a bag folder read back', async () => {
    const e = richEpisode('ep-lz4', 5);
    const bag = await exportRosbag2(e, join(dir, 'lz4'), { compression: 'lz4' });
    expect(await chunkCompressions(bag.file)).toEqual(['lz4']);
    expect(await importEpisode(bag.file)).toEqual(e);
  });
});

describe("metadata derived from rosbag2's own recordings equals what rosbag2 wrote for them", () => {
  // Values from the metadata.yaml that rosbag2 wrote beside each fixture (ros2/rosbag2's test resources).
  it.skipIf(!haveFixtures)(`cdr_test_0.mcap ${haveFixtures ? '' : noFixtures}`, async () => {
    const m = await rosbag2MetadataOf(join(fixtures, 'cdr_test_0.mcap'), 'cdr_test_0.mcap');
    expect(m).toMatchObject({ storage_identifier: 'mcap', duration: { nanoseconds: 151137181n }, starting_time: { nanoseconds_since_epoch: 1586406456763032325n }, message_count: 7, relative_file_paths: ['cdr_test_0.mcap'] });
    const qos = (depth: number) =>
      `- history: 3\n  depth: ${depth}\n  reliability: 1\n  durability: 1\n  deadline:\n    sec: 0\n    nsec: 0\n  lifespan:\n    sec: 0\n    nsec: 0\n  liveliness: 1\n  liveliness_lease_duration:\n    sec: 0\n    nsec: 0\n  avoid_ros_namespace_conventions: false`;
    expect(new Set(m.topics_with_message_count.map((t) => JSON.stringify(t)))).toEqual(
      new Set([
        { topic_metadata: { name: '/test_topic', type: 'test_msgs/msg/BasicTypes', serialization_format: 'cdr', offered_qos_profiles: qos(3), type_description_hash: '' }, message_count: 3 },
        { topic_metadata: { name: '/array_topic', type: 'test_msgs/msg/Arrays', serialization_format: 'cdr', offered_qos_profiles: qos(4), type_description_hash: '' }, message_count: 4 },
      ].map((t) => JSON.stringify(t))),
    );
    expect(m.files).toEqual([{ path: 'cdr_test_0.mcap', starting_time: { nanoseconds_since_epoch: 1586406456763032325n }, duration: { nanoseconds: 151137181n }, message_count: 7 }]);
  });

  it.skipIf(!haveFixtures)(`talker.mcap (zstd chunks; a topic without messages) ${haveFixtures ? '' : noFixtures}`, async () => {
    const m = await rosbag2MetadataOf(join(fixtures, 'talker.mcap'), 'talker.mcap');
    expect(m).toMatchObject({ duration: { nanoseconds: 4531096768n }, starting_time: { nanoseconds_since_epoch: 1585866235112411371n }, message_count: 20 });
    expect(Object.fromEntries(m.topics_with_message_count.map((t) => [t.topic_metadata.name, [t.topic_metadata.type, t.message_count]]))).toEqual({
      '/topic': ['std_msgs/msg/String', 10],
      '/rosout': ['rcl_interfaces/msg/Log', 10],
      '/parameter_events': ['rcl_interfaces/msg/ParameterEvent', 0],
    });
  });

  it.skipIf(!haveFixtures)(`our QoS string has the keys of the one rosbag2 records per channel ${haveFixtures ? '' : noFixtures}`, async () => {
    const theirs = (await readMcap(join(fixtures, 'cdr_test_0.mcap'))).channels[0]!.metadata.offered_qos_profiles!;
    const keys = (s: string) => shape((parse(s) as unknown[])[0]);
    expect(keys(OFFERED_QOS)).toEqual(keys(theirs));
  });
});
