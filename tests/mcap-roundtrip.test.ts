// Episode ⇄ MCAP: the exported file read back with @mcap/core and decoded from its own embedded
// schemas matches the episode field by field; import(export(e)) equals e, also for random episodes.

import { mkdtempSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { McapIndexedReader } from '@mcap/core';
import { parse } from '@foxglove/rosmsg';
import { MessageReader } from '@foxglove/rosmsg2-serialization';
import { ros2jazzy } from '@foxglove/rosmsg-msgs-common';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TOPICS, encodeEpisodeMcap, episodeMcapStream, exportEpisode, fromRosTime, toRosTime, writeEpisodeMcap } from '../episodes/mcap/export.js';
import { importEpisode, importEpisodeBytes } from '../episodes/mcap/import.js';
import { parseRos2msg, ros2msgSchema } from '../episodes/mcap/schemas.js';
import type { ImageEncoding } from '../common/robot.js';
import type { Episode, EpisodeStep } from '../episodes/types.js';
import { richEpisode } from './helpers/episode-data.js';

const dir = mkdtempSync(join(tmpdir(), 'mcap-'));

async function indexedReader(bytes: Uint8Array): Promise<McapIndexedReader> {
  return McapIndexedReader.Initialize({
    readable: { size: async () => BigInt(bytes.length), read: async (o, n) => bytes.subarray(Number(o), Number(o + n)) },
  });
}

const JOINT_STATE_SCHEMA = `std_msgs/Header header
string[] name
float64[] position
float64[] velocity
float64[] effort
================================================================================
MSG: std_msgs/Header
builtin_interfaces/Time stamp
string frame_id
================================================================================
MSG: builtin_interfaces/Time
int32 sec
uint32 nanosec
`;

describe('MCAP export read back with @mcap/core', () => {
  it('has the ros2 profile, ros2msg schemas, cdr channels, and messages equal to the episode', async () => {
    const e = richEpisode('ep-1', 5, 'rgb8', 3);
    const path = join(dir, 'ep-1.mcap');
    await exportEpisode(e, path);
    const reader = await indexedReader(await readFile(path));
    expect(reader.header.profile).toBe('ros2');
    const schemas = [...reader.schemasById.values()];
    expect(schemas.every((s) => s.encoding === 'ros2msg')).toBe(true);
    const js = schemas.find((s) => s.name === 'sensor_msgs/msg/JointState');
    // The layout rosbag2 writes (stored reference; regenerate with ros2msgSchema('sensor_msgs/msg/JointState')).
    expect(new TextDecoder().decode(js?.data)).toBe(JOINT_STATE_SCHEMA);
    const channels = [...reader.channelsById.values()];
    expect(channels.every((c) => c.messageEncoding === 'cdr' && c.metadata.has('offered_qos_profiles'))).toBe(true);
    expect(channels.map((c) => c.topic).sort()).toEqual(
      [TOPICS.jointStates, TOPICS.image, TOPICS.instruction, TOPICS.features, TOPICS.action, TOPICS.reward, TOPICS.done, TOPICS.success].sort(),
    );

    // Decode with readers built from the embedded schema text by @foxglove/rosmsg itself.
    const decoders = new Map(schemas.map((s) => [s.id, new MessageReader(parse(new TextDecoder().decode(s.data), { ros2: true }))]));
    const got = new Map<string, Array<{ logTime: bigint; seq: number; data: Record<string, unknown> }>>();
    for await (const m of reader.readMessages()) {
      const ch = reader.channelsById.get(m.channelId);
      const data = decoders.get(ch?.schemaId ?? -1)?.readMessage(m.data) as Record<string, unknown>;
      const list = got.get(ch?.topic ?? '') ?? [];
      list.push({ logTime: m.logTime, seq: m.sequence, data });
      got.set(ch?.topic ?? '', list);
    }
    const ns = (t: number) => {
      const r = toRosTime(t, 't');
      return BigInt(r.sec) * 1_000_000_000n + BigInt(r.nanosec);
    };
    e.steps.forEach((s: EpisodeStep, k: number) => {
      const js = got.get(TOPICS.jointStates)?.[k];
      expect(js?.seq).toBe(s.seq);
      expect(js?.logTime).toBe(ns(s.tObs));
      expect(js?.data.name).toEqual(['j0', 'j1', 'j2', 'j3']);
      expect(Array.from(js?.data.position as Float64Array)).toEqual(Array.from(s.obs.position));
      expect(Array.from(js?.data.velocity as Float64Array)).toEqual(Array.from(s.obs.velocity));
      const stamp = (js?.data.header as { stamp: { sec: number; nanosec: number } }).stamp;
      expect(fromRosTime(stamp)).toBe(s.tObs);
      const act = got.get(TOPICS.action)?.[k];
      expect(act?.logTime).toBe(ns(s.tAct));
      expect(Array.from(act?.data.data as Float64Array)).toEqual(Array.from(s.action)); // float32 values, exactly
      expect(got.get(TOPICS.reward)?.[k].data.data).toBe(s.reward);
      expect(got.get(TOPICS.done)?.[k].data.data).toBe(s.done);
      const img = got.get(TOPICS.image)?.[k].data;
      expect([img?.width, img?.height, img?.encoding, img?.step]).toEqual([4, 3, 'rgb8', 12]);
      expect(Array.from(img?.data as Uint8Array)).toEqual(Array.from(s.obs.image?.data ?? []));
      expect(got.get(TOPICS.instruction)?.[k].data.data).toBe(s.obs.instruction);
      expect(Array.from(got.get(TOPICS.features)?.[k].data.data as Float32Array)).toEqual(Array.from(s.obs.features ?? []));
    });
    expect(got.get(TOPICS.success)?.map((m) => [m.seq, m.data.data])).toEqual([[4, true]]);
    const meta = [];
    for await (const m of reader.readMetadata()) meta.push(m);
    expect(JSON.parse(meta[0].metadata.get('meta') ?? '')).toEqual(e.meta);
  });

  it('writes CompressedImage for jpeg and png', async () => {
    for (const enc of ['jpeg', 'png'] as const) {
      const reader = await indexedReader(await encodeEpisodeMcap(richEpisode('c', 2, enc)));
      const s = [...reader.schemasById.values()].find((x) => x.name === 'sensor_msgs/msg/CompressedImage');
      expect(s).toBeDefined();
      const dec = new MessageReader(parse(new TextDecoder().decode(s?.data), { ros2: true }));
      for await (const m of reader.readMessages({ topics: [TOPICS.image] })) expect((dec.readMessage(m.data) as { format: string }).format).toBe(enc);
    }
  });
});

describe('import(export(e)) = e', () => {
  it('for episodes with rgb8, jpeg and png images, through files', async () => {
    for (const enc of ['rgb8', 'jpeg', 'png'] as const) {
      const e = richEpisode(`file-${enc}`, 7, enc, 11);
      const path = join(dir, `${enc}.mcap`);
      await exportEpisode(e, path);
      expect(await importEpisode(path)).toEqual(e);
    }
  });

  it('a long episode is written through the sink as its steps come: bounded writes, the bag round-trips', async () => {
    // 200 steps of 128x128 rgb8 noise frames: about 10 MB of images (lz4 cannot shrink them), produced lazily.
    const N = 200;
    const step = (seq: number): EpisodeStep => {
      const data = new Uint8Array(128 * 128 * 3);
      let x = (seq * 2654435761 + 1) >>> 0;
      for (let i = 0; i < data.length; i++) data[i] = (x = (Math.imul(x, 1103515245) + 12345) >>> 0) >>> 24;
      const t = 1_700_000_000 + seq * 0.02;
      return { seq, tObs: t, tAct: t + 0.001, obs: { stamp: t, position: Float64Array.of(seq, -seq), velocity: Float64Array.of(0.5, 0), image: { width: 128, height: 128, encoding: 'rgb8', data } }, action: Float32Array.of(0.25, -0.5), reward: seq / N, done: seq === N - 1 };
    };
    const base = { meta: { id: 'long', robot: 'arm', policyVersion: 'v', hardwareProfile: 'p', startedAt: 1 }, status: 'complete' as const };
    for (const compression of ['none', 'lz4'] as const) {
      let yielded = 0;
      const steps = function* () {
        for (let k = 0; k < N; k++) {
          yielded++;
          yield step(k);
        }
      };
      const writes: Array<{ bytes: Uint8Array; yielded: number }> = [];
      await writeEpisodeMcap({ ...base, steps: steps() }, { write: async (b) => void writes.push({ bytes: b.slice(), yielded }) }, { compression });
      // Bytes went out long before the last step was read, and no write holds more than about one chunk.
      expect(writes.find((w) => w.bytes.length > 0)!.yielded).toBeLessThan(N / 4);
      expect(writes.filter((w) => w.yielded < N).reduce((n, w) => n + w.bytes.length, 0)).toBeGreaterThan(5_000_000);
      expect(Math.max(...writes.map((w) => w.bytes.length))).toBeLessThan(2 * 1024 * 1024);
      const bag = Buffer.concat(writes.map((w) => w.bytes));
      const back = importEpisodeBytes(bag, 'long.mcap');
      expect(back.steps).toHaveLength(N);
      // Frames compared as bytes (a deep equality over 10 MB of elements takes minutes), the rest field by field.
      const frames = (s: EpisodeStep) => Buffer.from(s.obs.image!.data);
      const noFrames = (s: EpisodeStep) => ({ ...s, obs: { ...s.obs, image: { ...s.obs.image!, data: null } } });
      for (let k = 0; k < N; k++) {
        const want = step(k);
        expect(frames(back.steps[k]!).equals(frames(want))).toBe(true);
        expect(noFrames(back.steps[k]!)).toEqual(noFrames(want));
      }
      expect({ meta: back.meta, status: back.status }).toEqual(base);
    }
  });

  it('as a byte stream: the same bag as the in-memory encoding', async () => {
    const e = richEpisode('s', 30, 'png', 4);
    const parts: Buffer[] = [];
    for await (const c of episodeMcapStream(e, { compression: 'lz4' })) parts.push(c as Buffer);
    expect(new Uint8Array(Buffer.concat(parts))).toEqual(await encodeEpisodeMcap(e, { compression: 'lz4' }));
    // A fault while writing ends the stream with that error.
    const bad = richEpisode('bad', 3);
    bad.steps[2]!.tObs = -1;
    await expect(async () => {
      for await (const _ of episodeMcapStream(bad)) void _;
    }).rejects.toThrow(/step 2 tObs: -1 is not a time/);
  });

  it('with lz4-compressed chunks: smaller, and identical after import', async () => {
    const e = richEpisode('lz4', 20, 'rgb8', 5);
    const plain = await encodeEpisodeMcap(e);
    const packed = await encodeEpisodeMcap(e, { compression: 'lz4' });
    expect(packed.length).toBeLessThan(plain.length);
    expect(importEpisodeBytes(packed, 'lz4.mcap')).toEqual(e);
  });

  it('for a partial episode without images (status and gaps in seq survive)', async () => {
    const e = richEpisode('p', 4, 'rgb8', 2);
    e.status = 'partial';
    e.steps = e.steps.filter((s) => s.seq !== 2).map((s) => ({ ...s, obs: { stamp: s.obs.stamp, position: s.obs.position, velocity: s.obs.velocity } }));
    expect(importEpisodeBytes(await encodeEpisodeMcap(e), 'p.mcap')).toEqual(e);
  });

  it('refuses stamps an MCAP file cannot hold, naming the step', async () => {
    const e = richEpisode('neg', 2);
    e.steps[1].tAct = -1;
    await expect(encodeEpisodeMcap(e)).rejects.toThrow(/step 1 tAct: -1 is not a time/);
  });

  // Time is ns in builtin_interfaces/Time and MCAP, so stamps come back at ns resolution: exactly
  // the same double when they were on a whole ns (as ROS clocks give), else within 0.5 ns.
  it('property: random episodes round-trip (stamps at ns resolution)', async () => {
    const f32 = fc.float({ noDefaultInfinity: false });
    const img = (enc: ImageEncoding) =>
      fc
        .record({ w: fc.integer({ min: 1, max: 3 }), h: fc.integer({ min: 1, max: 3 }), n: fc.integer({ min: 1, max: 30 }) })
        .chain(({ w, h, n }) =>
          fc.uint8Array({ minLength: enc === 'rgb8' ? w * h * 3 : n, maxLength: enc === 'rgb8' ? w * h * 3 : n }).map((data) => ({ width: w, height: h, encoding: enc, data })),
        );
    const stamp = fc.oneof(fc.integer({ min: 0, max: 2e18 }).map((n) => n / 1e9), fc.double({ min: 0, max: 2e9, noNaN: true, noDefaultInfinity: true }));
    const episode = fc
      .record({ joints: fc.integer({ min: 0, max: 5 }), act: fc.integer({ min: 0, max: 4 }), feats: fc.integer({ min: -1, max: 3 }), n: fc.integer({ min: 1, max: 6 }) })
      .chain(({ joints, act, feats, n }) =>
        fc.record({
          meta: fc.record({
            id: fc.string({ minLength: 1 }),
            robot: fc.string(),
            policyVersion: fc.string(),
            hardwareProfile: fc.string(),
            startedAt: fc.integer({ min: 0, max: 2e12 }),
            extra: fc.dictionary(fc.string(), fc.oneof(fc.string(), fc.integer(), fc.boolean())),
          }),
          status: fc.constantFrom('complete' as const, 'partial' as const),
          steps: fc.uniqueArray(fc.integer({ min: 0, max: 1000 }), { minLength: n, maxLength: n }).chain((seqs) =>
            fc.tuple(
              ...[...seqs].sort((a, b) => a - b).map((seq) =>
                fc.record(
                  {
                    seq: fc.constant(seq),
                    tObs: stamp,
                    tAct: stamp,
                    position: fc.float64Array({ minLength: joints, maxLength: joints }),
                    velocity: fc.float64Array({ minLength: joints, maxLength: joints }),
                    action: fc.float32Array({ minLength: act, maxLength: act }),
                    features: feats < 0 ? fc.constant(undefined) : fc.float32Array({ minLength: feats, maxLength: feats }),
                    image: fc.option(fc.constantFrom<ImageEncoding>('rgb8', 'jpeg', 'png').chain(img), { nil: undefined }),
                    instruction: fc.option(fc.string(), { nil: undefined }),
                    reward: fc.double(),
                    done: fc.boolean(),
                    success: fc.option(fc.boolean(), { nil: undefined }),
                    ownStamp: fc.option(f32.filter(Number.isFinite), { nil: undefined }),
                  },
                  { noNullPrototype: true },
                ),
              ),
            ),
          ),
        }),
      );
    const quantize = (t: number) => fromRosTime(toRosTime(t, 't'));
    await fc.assert(
      fc.asyncProperty(episode, async (g) => {
        const e: Episode = {
          meta: g.meta,
          status: g.status,
          steps: g.steps.map((s) => ({
            seq: s.seq,
            tObs: s.tObs,
            tAct: s.tAct,
            obs: {
              stamp: s.ownStamp ?? s.tObs,
              position: s.position,
              velocity: s.velocity,
              ...(s.features ? { features: s.features } : {}),
              ...(s.image ? { image: s.image } : {}),
              ...(s.instruction !== undefined ? { instruction: s.instruction } : {}),
            },
            action: s.action,
            reward: s.reward,
            done: s.done,
            ...(s.success !== undefined ? { success: s.success } : {}),
          })),
        };
        const back = importEpisodeBytes(await encodeEpisodeMcap(e), 'prop.mcap');
        const want: Episode = {
          ...e,
          steps: e.steps.map((s) => ({ ...s, tObs: quantize(s.tObs), tAct: quantize(s.tAct), obs: { ...s.obs, stamp: Object.is(s.obs.stamp, s.tObs) ? quantize(s.tObs) : s.obs.stamp } })),
        };
        expect(back).toEqual(want);
        back.steps.forEach((s, k) => {
          expect(Math.abs(s.tObs - e.steps[k].tObs)).toBeLessThanOrEqual(0.5e-9 + Number.EPSILON * e.steps[k].tObs);
        });
      }),
      { numRuns: 150 },
    );
  });
});

describe('ros2msg schema text', () => {
  it('for every ROS 2 Jazzy message in @foxglove/rosmsg-msgs-common, parses back to its definition', () => {
    const defs = ros2jazzy as unknown as Record<string, { definitions: Array<Record<string, unknown>> }>;
    for (const [name, def] of Object.entries(defs)) {
      const [root] = parseRos2msg(ros2msgSchema(name));
      const strip = (fs: Array<Record<string, unknown>>) => fs.map((f) => ({ name: f.name, type: f.type, isArray: f.isArray ?? false, len: f.arrayLength, value: f.value }));
      expect(strip(root.definitions as Array<Record<string, unknown>>), name).toEqual(strip(def.definitions));
    }
  });

  it('also reads dependency headers spelled pkg/msg/Name', () => {
    const text = JOINT_STATE_SCHEMA.replace('MSG: std_msgs/Header', 'MSG: std_msgs/msg/Header').replace('MSG: builtin_interfaces/Time', 'MSG: builtin_interfaces/msg/Time');
    expect(() => parse(text, { ros2: true })).toThrow(); // the plain parser matches names exactly
    expect(parseRos2msg(text)[0].definitions.map((f) => f.name)).toEqual(['header', 'name', 'position', 'velocity', 'effort']);
  });
});
