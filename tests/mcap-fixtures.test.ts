// Real rosbag2 bags (shared/fixtures/rosbag2, beside the checkout) decode from their embedded
// schemas; and a JointState bag, written by our exporter and by a plain MCAP writer the way another
// tool would, imports as an episode.

import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { McapWriter } from '@mcap/core';
import { describe, expect, it } from 'vitest';
import { exportEpisode } from '../episodes/mcap/export.js';
import { McapReadError, importEpisode, importEpisodeBytes, readMcap } from '../episodes/mcap/import.js';
import { codecFor } from '../episodes/mcap/schemas.js';
import { richEpisode } from './helpers/episode-data.js';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..');
const fixtures = join(repoRoot, '..', 'shared', 'fixtures', 'rosbag2');
const haveFixtures = existsSync(join(fixtures, 'talker.mcap')) && existsSync(join(fixtures, 'cdr_test_0.mcap'));
const noFixtures = `skipped: ${fixtures} is absent (shared/ is not beside this checkout)`;
describe('real rosbag2 bags', () => {
  it.skipIf(!haveFixtures)(`cdr_test_0.mcap: test_msgs/BasicTypes and Arrays decode from the embedded schemas ${haveFixtures ? '' : noFixtures}`, async () => {
    const c = await readMcap(join(fixtures, 'cdr_test_0.mcap'));
    expect(c.profile).toBe('ros2');
    expect(c.channels.map((ch) => [ch.topic, ch.schemaName])).toEqual([
      ['/test_topic', 'test_msgs/msg/BasicTypes'],
      ['/array_topic', 'test_msgs/msg/Arrays'],
    ]);
    const basic = c.messages.filter((m) => m.topic === '/test_topic').map((m) => m.data as Record<string, unknown>);
    const arrays = c.messages.filter((m) => m.topic === '/array_topic').map((m) => m.data as Record<string, unknown>);
    expect([basic.length, arrays.length]).toEqual([3, 4]);
    // Each payload is consumed exactly by its embedded schema.
    expect(c.messages.filter((m) => m.trailingBytes)).toEqual([]);
    for (const b of basic) {
      expect(b).toMatchObject({ bool_value: false, int32_value: 123, uint32_value: 0, float64_value: 0, int64_value: 0n, uint64_value: 0n });
    }
    for (const a of arrays) {
      expect(a.bool_values).toEqual([true, false, true]);
      expect(a.string_values).toEqual(['Complex Hello1', 'Complex Hello2', 'Complex Hello3']);
      expect(a.float32_values).toBeInstanceOf(Float32Array);
      expect(Array.from(a.int32_values as Int32Array)).toEqual([0, 0, 0]);
      expect(a.int64_values).toEqual(new BigInt64Array(3));
      expect((a.basic_types_values as unknown[]).length).toBe(3);
      expect((a.basic_types_values as Array<Record<string, unknown>>)[0]).toHaveProperty('uint64_value', 0n);
    }
    // Not a robot episode: the import says what is missing, naming the file.
    await expect(importEpisode(join(fixtures, 'cdr_test_0.mcap'))).rejects.toThrow(/cdr_test_0\.mcap: no sensor_msgs\/msg\/JointState messages/);
  });

  it.skipIf(!haveFixtures)(
    `talker.mcap (zstd chunks): String, Log and ParameterEvent decode from the embedded schemas ${haveFixtures ? '' : noFixtures}`,
    async () => {
      const path = join(fixtures, 'talker.mcap');
      await expect(readMcap(path, { decompressHandlers: { zstd: () => { throw new Error('corrupt frame'); } } })).rejects.toThrow(McapReadError);
      const c = await readMcap(path);
      expect(c.channels.map((ch) => ch.schemaName).sort()).toEqual(['rcl_interfaces/msg/Log', 'rcl_interfaces/msg/ParameterEvent', 'std_msgs/msg/String']);
      const said = c.messages.filter((m) => m.topic === '/topic').map((m) => (m.data as { data: string }).data);
      expect(said).toEqual(Array.from({ length: 10 }, (_, k) => `Hello, world! ${k}`));
      const logs = c.messages.filter((m) => m.topic === '/rosout').map((m) => m.data as Record<string, unknown>);
      expect(logs).toHaveLength(10);
      expect(logs[0]).toMatchObject({ level: 20, name: 'minimal_publisher', msg: "Publishing: 'Hello, world! 0'", function: 'operator()', line: 38 });
      expect(logs[0].stamp).toEqual({ sec: 1585866235, nanosec: 112130688 });
      expect(c.messages).toHaveLength(20);
      expect(c.messages.filter((m) => m.trailingBytes)).toEqual([]);
    },
  );
});

describe('JointState bags', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mcap-js-'));

  it('written by our exporter import back to the episode', async () => {
    const e = richEpisode('js', 5);
    const path = join(dir, 'ours.mcap');
    await exportEpisode(e, path);
    expect(await importEpisode(path)).toEqual(e);
  });

  it('from another tool (JointState only, joints reordered, no velocity) import with empty actions', async () => {
    const parts: Uint8Array[] = [];
    let size = 0n;
    const writable = {
      write: async (b: Uint8Array) => {
        parts.push(b.slice());
        size += BigInt(b.length);
      },
      position: () => size,
    };
    const w = new McapWriter({ writable });
    await w.start({ profile: 'ros2', library: 'some-other-tool' });
    const js = codecFor('sensor_msgs/msg/JointState');
    const schemaId = await w.registerSchema({ name: js.name, encoding: 'ros2msg', data: new TextEncoder().encode(js.text) });
    const channelId = await w.registerChannel({ topic: '/robot/joint_states', schemaId, messageEncoding: 'cdr', metadata: new Map() });
    const states = [
      { t: 100.5, name: ['a', 'b'], position: [1, 2] },
      { t: 100.6, name: ['b', 'a'], position: [4, 3] },
      { t: 100.7, name: ['a', 'b'], position: [5, 6] },
    ];
    for (const [k, s] of states.entries()) {
      const stamp = { sec: Math.floor(s.t), nanosec: Math.round((s.t % 1) * 1e9) };
      const data = js.writer.writeMessage({ header: { stamp, frame_id: 'base' }, name: s.name, position: s.position, velocity: [], effort: [] });
      const ns = BigInt(stamp.sec) * 1_000_000_000n + BigInt(stamp.nanosec);
      await w.addMessage({ channelId, sequence: 1000 + k, logTime: ns + 5000n, publishTime: ns, data });
    }
    await w.end();
    const e = importEpisodeBytes(Buffer.concat(parts), '/bags/foreign.mcap');
    expect(e.meta).toMatchObject({ id: 'foreign', robot: 'unknown', extra: { joints: ['a', 'b'], source: '/bags/foreign.mcap' } });
    expect(e.status).toBe('complete');
    expect(e.steps.map((s) => s.seq)).toEqual([0, 1, 2]);
    expect(e.steps.map((s) => Array.from(s.obs.position))).toEqual([[1, 2], [3, 4], [5, 6]]);
    expect(e.steps.map((s) => s.tObs)).toEqual([100.5, 100.6, 100.7].map((t) => Math.floor(t) + Math.round((t % 1) * 1e9) / 1e9));
    expect(e.steps.every((s) => s.action.length === 0 && s.reward === 0)).toBe(true);
    expect(e.steps.every((s) => s.obs.velocity.every(Number.isNaN))).toBe(true);
    expect(e.steps.map((s) => s.done)).toEqual([false, false, true]);
  });
});
