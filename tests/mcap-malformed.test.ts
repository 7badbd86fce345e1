// Malformed MCAP input gives a McapReadError naming the file and the problem, never a crash:
// random bytes, every truncation of a valid file, random byte corruptions (~10^4 cases in all).
// Reproduce: MCAP_FUZZ_SEED=<seed> npx vitest run tests/mcap-malformed.test.ts

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { McapWriter } from '@mcap/core';
import { describe, expect, it } from 'vitest';
import { encodeEpisodeMcap } from '../episodes/mcap/export.js';
import { McapReadError, importEpisode, importEpisodeBytes, readMcap } from '../episodes/mcap/import.js';
import { codecFor } from '../episodes/mcap/schemas.js';
import { richEpisode, rng } from './helpers/episode-data.js';

const SEED = Number(process.env.MCAP_FUZZ_SEED ?? Math.floor(Math.random() * 1e6));
const MAGIC = [0x89, 0x4d, 0x43, 0x41, 0x50, 0x30, 0x0d, 0x0a];

type Outcome = 'episode' | 'error';

function attempt(bytes: Uint8Array, name: string): Outcome {
  try {
    importEpisodeBytes(bytes, name);
    return 'episode';
  } catch (e) {
    // Anything but our error, or our error wrapping an unexpected exception, is a crash.
    if (!(e instanceof McapReadError)) throw new Error(`${name}: crashed with ${String(e)}`, { cause: e });
    if (!e.message.startsWith(`${name}: `) || e.message.includes('internal error')) throw new Error(`${name}: unclear error: ${e.message}`);
    return 'error';
  }
}

async function bagWith(opts: { encoding?: string; schemaEncoding?: string; schemaText?: string; data?: Uint8Array }): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let size = 0n;
  const w = new McapWriter({
    writable: {
      write: async (b: Uint8Array) => {
        parts.push(b.slice());
        size += BigInt(b.length);
      },
      position: () => size,
    },
  });
  await w.start({ profile: 'ros2', library: 'test' });
  const js = codecFor('sensor_msgs/msg/JointState');
  const schemaId = await w.registerSchema({ name: js.name, encoding: opts.schemaEncoding ?? 'ros2msg', data: new TextEncoder().encode(opts.schemaText ?? js.text) });
  const channelId = await w.registerChannel({ topic: '/joint_states', schemaId, messageEncoding: opts.encoding ?? 'cdr', metadata: new Map() });
  const msg = { header: { stamp: { sec: 1, nanosec: 0 }, frame_id: '' }, name: ['a'], position: [1], velocity: [2], effort: [] };
  await w.addMessage({ channelId, sequence: 0, logTime: 1n, publishTime: 1n, data: opts.data ?? js.writer.writeMessage(msg) });
  await w.end();
  return new Uint8Array(Buffer.concat(parts));
}

describe(`malformed MCAP (seed ${SEED})`, () => {
  it('clear errors for the common cases, naming the file and the problem', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mcap-bad-'));
    const file = (name: string, bytes: Uint8Array) => {
      const p = join(dir, name);
      writeFileSync(p, bytes);
      return p;
    };
    const cases: Array<[string, Uint8Array, RegExp]> = [
      ['empty.mcap', new Uint8Array(0), /: not an MCAP file \(0 bytes, shorter than the magic\)$/],
      ['text.mcap', new TextEncoder().encode('hello, this is not a bag at all'), /: not an MCAP file \(no MCAP magic bytes at the start\)$/],
      ['json.mcap', await bagWith({ encoding: 'json' }), /: channel \/joint_states: message encoding 'json' is not supported \(only cdr\)$/],
      ['idl.mcap', await bagWith({ schemaEncoding: 'ros2idl' }), /: channel \/joint_states: schema encoding 'ros2idl' of sensor_msgs\/msg\/JointState is not supported/],
      ['schema.mcap', await bagWith({ schemaText: 'float64[ position' }), /: schema sensor_msgs\/msg\/JointState \(channel \/joint_states\) does not parse as ros2msg: /],
      ['cdr.mcap', await bagWith({ data: new Uint8Array([0, 1, 0, 0, 9]) }), /: message 0 on \/joint_states at logTime 1: CDR payload does not decode as sensor_msgs\/msg\/JointState: /],
    ];
    const good = await encodeEpisodeMcap(richEpisode('t', 2));
    cases.push(['truncated.mcap', good.subarray(0, good.length - 30), /: truncated: the file ends inside a record or before the footer/]);
    const badCrc = good.slice();
    badCrc[Math.floor(good.length / 3)] ^= 0xff;
    cases.push(['crc.mcap', badCrc, /: malformed MCAP: .*crc/i]);
    for (const [name, bytes, msg] of cases) {
      const p = file(name, bytes);
      const err = await importEpisode(p).catch((e: unknown) => e);
      expect(err, name).toBeInstanceOf(McapReadError);
      expect((err as McapReadError).file).toBe(p);
      expect((err as Error).message.startsWith(`${p}: `), name).toBe(true);
      expect((err as Error).message, name).toMatch(msg);
    }
    await expect(readMcap(join(dir, 'missing.mcap'))).rejects.toThrow(/missing\.mcap: cannot read: ENOENT/);
  });

  it('~10^4 random, truncated and corrupted inputs: 0 crashes', async () => {
    const rand = rng(SEED);
    const valid = await encodeEpisodeMcap(richEpisode('f', 2, 'png', SEED));
    const counts = { random: 0, truncated: 0, corrupted: 0, episode: 0, error: 0 };
    // truncations: every prefix length (every other one for files over 4000 bytes)
    const tally = (o: Outcome) => counts[o]++;
    for (let i = 0; i < 2000; i++) {
      const n = Math.floor(rand() * 600);
      const bytes = Uint8Array.from({ length: n }, () => Math.floor(rand() * 256));
      if (i % 2 === 0 && n >= 8) bytes.set(MAGIC); // half pass the magic check and reach the record parser
      tally(attempt(bytes, `random-${i}.mcap`));
      counts.random++;
    }
    for (let len = 0; len < valid.length; len += 1 + (valid.length > 4000 ? 1 : 0)) {
      tally(attempt(valid.subarray(0, len), `truncated-${len}.mcap`));
      counts.truncated++;
    }
    // Byte flips in a whole file mostly meet a CRC; half the cases instead corrupt what the CRCs
    // vouch for (a CDR payload, a schema text) so that decoding and mapping meet bad data too.
    const js = codecFor('sensor_msgs/msg/JointState');
    const payload = js.writer.writeMessage({ header: { stamp: { sec: 3, nanosec: 4 }, frame_id: 'f' }, name: ['a', 'b'], position: [1, 2], velocity: [3, 4], effort: [] });
    const mutate = (b: Uint8Array): Uint8Array => {
      const out = rand() < 0.3 ? b.slice(0, Math.floor(rand() * b.length)) : b.slice();
      const flips = 1 + Math.floor(rand() * 4);
      for (let k = 0; k < flips && out.length > 0; k++) out[Math.floor(rand() * out.length)] = Math.floor(rand() * 256);
      return out;
    };
    while (counts.random + counts.truncated + counts.corrupted < 10_000) {
      const k = counts.corrupted++;
      if (k % 2 === 0) {
        tally(attempt(mutate(valid), `corrupt-${k}.mcap`));
      } else if (k % 4 === 1) {
        tally(attempt(await bagWith({ data: mutate(payload) }), `payload-${k}.mcap`));
      } else {
        const text = new TextDecoder().decode(mutate(new TextEncoder().encode(js.text)));
        tally(attempt(await bagWith({ schemaText: text }), `schema-${k}.mcap`));
      }
    }
    console.log(`malformed MCAP seed ${SEED}: ${JSON.stringify(counts)}`);
    expect(counts.random + counts.truncated + counts.corrupted).toBeGreaterThanOrEqual(10_000);
    // Every truncation is an error: a valid file is only valid whole.
    expect(counts.error).toBeGreaterThanOrEqual(counts.random + counts.truncated);
  });
});
