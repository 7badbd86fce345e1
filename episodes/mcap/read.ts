// Reads any ros2-profile MCAP: every CDR message is decoded from the ros2msg schema embedded in the
// file (parsed with @foxglove/rosmsg), never from a built-in list of types. Every failure (not
// MCAP, truncated, corrupt, unsupported encoding or compression, undecodable message) is a
// McapReadError naming the file and the problem.

import * as fzstd from 'fzstd';
import * as lz4 from 'lz4js';
import { readFile } from 'node:fs/promises';
import { McapStreamReader, hasMcapPrefix, type DecompressHandlers } from '@mcap/core';
import { MessageReader } from '@foxglove/rosmsg2-serialization';
import { parseRos2msg } from './schemas.js';

export class McapReadError extends Error {
  constructor(
    readonly file: string,
    readonly problem: string,
  ) {
    super(`${file}: ${problem}`);
    this.name = 'McapReadError';
  }
}

export interface McapSchemaInfo {
  id: number;
  name: string;
  encoding: string;
  text: string;
}

export interface McapChannelInfo {
  id: number;
  topic: string;
  schemaName: string;
  messageEncoding: string;
  metadata: Record<string, string>;
}

export interface DecodedMessage {
  topic: string;
  channelId: number;
  /** Schema name, e.g. `sensor_msgs/msg/JointState`. */
  schemaName: string;
  sequence: number;
  /** ns since the epoch (or since the robot clock's zero). */
  logTime: bigint;
  publishTime: bigint;
  /** The decoded message: plain objects, typed arrays for numeric arrays, bigint for 64-bit ints. */
  data: unknown;
  /** The payload had bytes past the message's end: CDR allows it, but it hints at a schema mismatch. */
  trailingBytes: boolean;
}

export interface McapContents {
  profile: string;
  library: string;
  schemas: McapSchemaInfo[];
  channels: McapChannelInfo[];
  messages: DecodedMessage[];
  metadata: Array<{ name: string; metadata: Record<string, string> }>;
}

export interface ReadOptions {
  /** Chunk decompressors by name; zstd and lz4 (what rosbag2 writes) are built in. */
  decompressHandlers?: DecompressHandlers;
}

/** rosbag2's MCAP writer compresses chunks with zstd (or lz4); pure-JS decoders for both. */
export const DEFAULT_DECOMPRESS: DecompressHandlers = {
  zstd: (buf, size) => fzstd.decompress(buf, new Uint8Array(Number(size))),
  lz4: (buf, size) => Uint8Array.from(lz4.decompress(buf, Number(size))),
};

const message = (e: unknown): string => (e instanceof Error ? e.message : String(e));

/** Reads and decodes MCAP bytes; `source` names the file in errors. */
export function readMcapBytes(bytes: Uint8Array, source: string, opts: ReadOptions = {}): McapContents {
  const fail = (problem: string): never => {
    throw new McapReadError(source, problem);
  };
  if (!hasMcapPrefix(new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength))) {
    fail(bytes.length < 8 ? `not an MCAP file (${bytes.length} bytes, shorter than the magic)` : 'not an MCAP file (no MCAP magic bytes at the start)');
  }
  const reader = new McapStreamReader({ decompressHandlers: { ...DEFAULT_DECOMPRESS, ...opts.decompressHandlers }, validateCrcs: true });
  const out: McapContents = { profile: '', library: '', schemas: [], channels: [], messages: [], metadata: [] };
  const schemas = new Map<number, McapSchemaInfo>();
  const channels = new Map<number, McapChannelInfo & { schemaId: number }>();
  const decoders = new Map<number, MessageReader>();
  const raw: Array<{ channelId: number; sequence: number; logTime: bigint; publishTime: bigint; data: Uint8Array }> = [];
  try {
    reader.append(bytes);
    for (let rec = reader.nextRecord(); rec !== undefined; rec = reader.nextRecord()) {
      switch (rec.type) {
        case 'Header':
          out.profile = rec.profile;
          out.library = rec.library;
          break;
        case 'Schema':
          if (rec.id !== 0) schemas.set(rec.id, { id: rec.id, name: rec.name, encoding: rec.encoding, text: new TextDecoder().decode(rec.data) });
          break;
        case 'Channel':
          channels.set(rec.id, {
            id: rec.id,
            topic: rec.topic,
            schemaId: rec.schemaId,
            schemaName: '',
            messageEncoding: rec.messageEncoding,
            metadata: Object.fromEntries(rec.metadata),
          });
          break;
        case 'Message':
          raw.push({ channelId: rec.channelId, sequence: rec.sequence, logTime: rec.logTime, publishTime: rec.publishTime, data: rec.data });
          break;
        case 'Metadata':
          out.metadata.push({ name: rec.name, metadata: Object.fromEntries(rec.metadata) });
          break;
        default:
          break;
      }
    }
  } catch (e) {
    const m = message(e);
    const unsupported = /Unsupported compression (\S+)/.exec(m);
    if (unsupported) fail(`chunk compression '${unsupported[1]}' is not supported (no decompressor for it was given)`);
    fail(`malformed MCAP: ${m}`);
  }
  if (!reader.done()) {
    fail(`truncated: the file ends inside a record or before the footer (${reader.bytesRemaining()} bytes of an incomplete record)`);
  }

  for (const c of channels.values()) {
    const s = schemas.get(c.schemaId);
    c.schemaName = s?.name ?? '';
  }
  for (const m of raw) {
    const c = channels.get(m.channelId);
    if (c === undefined) fail(`message on channel ${m.channelId}, which has no channel record`);
    const ch = c as McapChannelInfo & { schemaId: number };
    const at = `message ${m.sequence} on ${ch.topic} at logTime ${m.logTime}`;
    let decoder = decoders.get(ch.id);
    if (decoder === undefined) {
      if (ch.messageEncoding !== 'cdr') fail(`channel ${ch.topic}: message encoding '${ch.messageEncoding}' is not supported (only cdr)`);
      const s = schemas.get(ch.schemaId);
      if (s === undefined) fail(`channel ${ch.topic}: schema ${ch.schemaId} is missing`);
      const schema = s as McapSchemaInfo;
      if (schema.encoding !== 'ros2msg') fail(`channel ${ch.topic}: schema encoding '${schema.encoding}' of ${schema.name} is not supported (only ros2msg)`);
      try {
        decoder = new MessageReader(parseRos2msg(schema.text));
      } catch (e) {
        fail(`schema ${schema.name} (channel ${ch.topic}) does not parse as ros2msg: ${message(e)}`);
      }
      decoders.set(ch.id, decoder as MessageReader);
    }
    let data: unknown;
    try {
      data = (decoder as MessageReader).readMessage(m.data);
    } catch (e) {
      fail(`${at}: CDR payload does not decode as ${ch.schemaName}: ${message(e)}`);
    }
    const trailingBytes = (decoder as MessageReader).lastReadHadTrailingBytes();
    out.messages.push({ topic: ch.topic, channelId: ch.id, schemaName: ch.schemaName, sequence: m.sequence, logTime: m.logTime, publishTime: m.publishTime, data, trailingBytes });
  }
  out.schemas = [...schemas.values()];
  out.channels = [...channels.values()].map(({ schemaId: _schemaId, ...c }) => c);
  // Chunks may be written out of time order; readers expect log-time order.
  out.messages.sort((a, b) => (a.logTime < b.logTime ? -1 : a.logTime > b.logTime ? 1 : 0));
  return out;
}

/** Reads an MCAP file and decodes all its messages. */
export async function readMcap(path: string, opts: ReadOptions = {}): Promise<McapContents> {
  let bytes: Uint8Array;
  try {
    bytes = await readFile(path);
  } catch (e) {
    throw new McapReadError(path, `cannot read: ${message(e)}`);
  }
  return readMcapBytes(bytes, path, opts);
}
