// Generators of malformed MQTT payloads (fast-check) and hand-written nasty cases, shared by
// the parser fuzz test and the through-the-broker test. Every payload here must be rejected.

import fc from 'fast-check';
import type { MqttMessage } from '../../bridge/mqtt/messages.js';

const enc = (s: string): Uint8Array => new TextEncoder().encode(s);

/** Valid messages per topic channel, mutated below into invalid ones. */
export const VALID: Array<{ channel: 'state' | 'cmd' | 'episodes' | 'ack' | 'spec'; msg: MqttMessage }> = [
  { channel: 'state', msg: { type: 'state', stamp: 1.5, position: [0, 1], velocity: [0, 0], features: [1], instruction: 'pick' } },
  { channel: 'cmd', msg: { type: 'command', session: 's', seq: 3, stamp: 10, deadline: 20, action: [0.1, -0.1] } },
  { channel: 'cmd', msg: { type: 'request', id: 'r1', op: 'estop', stamp: 1, deadline: 2 } },
  {
    channel: 'episodes',
    msg: {
      type: 'episode_step', episodeId: 'e', seq: 0, ackedUpTo: -1, tObs: 0, tAct: 0.01,
      obs: { stamp: 0, position: [0], velocity: [0] }, action: [0], reward: 0, done: false,
    },
  },
  { channel: 'episodes', msg: { type: 'episode_end', episodeId: 'e', steps: 3, status: 'complete', ackedUpTo: 1 } },
  { channel: 'ack', msg: { type: 'ack', episodeId: 'e', upTo: 4, complete: false } },
  {
    channel: 'spec',
    msg: {
      type: 'spec', robotId: 'r', spec: {
        name: 'r', joints: ['a'], positionLimits: [[null, 1]], velocityLimits: [1],
        action: { kind: 'normalized', names: ['a'], low: [-1], high: [1] }, controlHz: 50,
      },
    },
  },
];

/** Replace one required top-level field by a value of the wrong kind. */
const wrongValue = fc.oneof(
  fc.constantFrom<unknown>('NaN', 'Infinity', '-Infinity', '1e999', null, true, [], {}, [['x']], '', 'a'.repeat(300)),
  fc.string(),
  fc.dictionary(fc.string(), fc.integer()),
);

/** A value that cannot be valid for `field` (every top-level field accepts one JS type only). */
function breakField(field: string, orig: unknown, v: unknown): unknown {
  if (typeof orig === 'string') {
    if (typeof v !== 'string') return v;
    return field === 'type' || field === 'op' || field === 'status' ? `~${v}` : 12345;
  }
  return typeof v === typeof orig ? `not-a-${typeof orig}` : v;
}

export const mutatedField = fc
  .tuple(fc.integer({ min: 0, max: VALID.length - 1 }), fc.nat(), wrongValue)
  .map(([i, k, v]) => {
    const { channel, msg } = VALID[i];
    const keys = Object.keys(msg).filter((f) => f !== 'features' && f !== 'instruction');
    const field = keys[k % keys.length];
    const out = { ...msg } as Record<string, unknown>;
    out[field] = breakField(field, out[field], v);
    return { channel, bytes: enc(JSON.stringify(out)) };
  });

const deepNesting = fc.tuple(fc.integer({ min: 17, max: 50_000 }), fc.constantFrom('[', '{"a":')).map(([n, open]) => {
  const close = open === '[' ? ']' : '}';
  return { channel: 'state' as const, bytes: enc(open.repeat(n) + close.repeat(n)) };
});

const hugeArray = fc.integer({ min: 257, max: 4_000 }).map((n) => ({
  channel: 'state' as const,
  bytes: enc(JSON.stringify({ type: 'state', stamp: 0, position: new Array(n).fill(0), velocity: [] })),
}));

const randomBytes = fc.uint8Array({ maxLength: 600 }).map((bytes) => ({ channel: 'episodes' as const, bytes }));

const randomJson = fc.jsonValue({ maxDepth: 6 }).map((v) => ({ channel: 'cmd' as const, bytes: enc(JSON.stringify(v) ?? 'undefined') }));

const truncated = fc.tuple(fc.integer({ min: 0, max: VALID.length - 1 }), fc.double({ min: 0, max: 0.999, noNaN: true })).map(([i, f]) => {
  const s = JSON.stringify(VALID[i].msg);
  return { channel: VALID[i].channel, bytes: enc(s.slice(0, Math.floor(s.length * f))) };
});

/** A valid message on a topic that does not carry its type. */
const wrongTopic = fc.integer({ min: 0, max: VALID.length - 1 }).map((i) => ({
  channel: (VALID[i].channel === 'ack' ? 'state' : 'ack') as 'state' | 'ack',
  bytes: enc(JSON.stringify(VALID[i].msg)),
}));

/** Invalid numeric content that JSON can still spell: 1e999 → Infinity, negative seq, fractional seq. */
const badNumbers = fc.constantFrom(
  '{"type":"state","stamp":1e999,"position":[0],"velocity":[0]}',
  '{"type":"state","stamp":0,"position":[-1e999],"velocity":[0]}',
  '{"type":"command","session":"s","seq":-1,"stamp":0,"deadline":1,"action":[0]}',
  '{"type":"command","session":"s","seq":1.5,"stamp":0,"deadline":1,"action":[0]}',
  '{"type":"command","session":"s","seq":1,"stamp":0,"deadline":1,"action":[]}',
  '{"type":"command","session":"s","seq":1,"stamp":0,"deadline":1,"action":["NaN"]}',
  '{"type":"ack","episodeId":"e","upTo":-2,"complete":false}',
  '{"type":"ack","episodeId":"","upTo":1,"complete":false}',
  '{"type":"ack","episodeId":"e","upTo":1e400,"complete":false}',
  '{"type":"state","stamp":0,"position":[0],"velocity":[0],"image":{"width":1,"height":1,"encoding":"rgb8","data":"@@@"}}',
  '{"type":"state","stamp":0,"position":[0],"velocity":[0],"image":{"width":0,"height":1,"encoding":"rgb8","data":""}}',
  '{"__proto__":{"type":"state"},"stamp":0,"position":[0],"velocity":[0]}',
  '{"type":"constructor"}', '{"type":"toString"}', '{"type":"__proto__"}', '{"type":null}', '{}', '[]', 'null', '0', '"state"',
  '{"type":"state","type":"spec"}',
  '\uFEFF{"type":"ack","episodeId":"e","upTo":1,"complete":false}x',
).map((s) => ({ channel: 'state' as const, bytes: enc(s) }));

export const malformed = fc.oneof(
  { weight: 4, arbitrary: mutatedField },
  { weight: 3, arbitrary: randomBytes },
  { weight: 3, arbitrary: randomJson },
  { weight: 2, arbitrary: truncated },
  { weight: 1, arbitrary: wrongTopic },
  { weight: 1, arbitrary: badNumbers },
  { weight: 1, arbitrary: deepNesting },
  { weight: 1, arbitrary: hugeArray },
);

/** Hand-written cases that generators reach rarely: invalid UTF-8, oversize, megabyte strings. */
export function nastyCases(): Array<{ channel: 'state' | 'episodes'; bytes: Uint8Array; maxBytes?: number }> {
  return [
    { channel: 'state', bytes: new Uint8Array(0) },
    { channel: 'state', bytes: Uint8Array.of(0xc3, 0x28) },
    { channel: 'state', bytes: Uint8Array.of(0x7b, 0xff, 0xfe, 0x7d) },
    { channel: 'state', bytes: enc('{"type":"state"'.padEnd(11 * 1024 * 1024, ' ')) },
    { channel: 'state', bytes: enc('{"type":"state","stamp":0,"position":[0],"velocity":[0]}'), maxBytes: 10 },
    { channel: 'episodes', bytes: enc(`{"type":"episode_step","episodeId":"${'x'.repeat(5000)}"}`) },
    { channel: 'state', bytes: enc(`{"type":"state","stamp":0,"position":[0],"velocity":[0],"instruction":"${'y'.repeat(2_000_000)}"}`) },
    { channel: 'state', bytes: enc('"'.repeat(100_000)) },
    { channel: 'state', bytes: enc('[' + '"\\\\[",'.repeat(20_000) + '0]') },
    { channel: 'episodes', bytes: enc('{"type":"episode_begin","meta":{"id":"e","robot":"r","policyVersion":"","hardwareProfile":"","startedAt":0,"extra":' + '{"a":'.repeat(30) + '1' + '}'.repeat(30) + '}}') },
  ];
}
