// The Foxglove WebSocket endpoint (foxglove.websocket.v1), on the topics a ROS 2 user expects: /joint_states
// (sensor_msgs/msg/JointState), /tf (tf2_msgs/msg/TFMessage, the scene's body poses) and /robot_description
// (std_msgs/msg/String, the URDF, latched) in CDR with their ros2msg schemas; the imagined rollouts as a
// foxglove.SceneUpdate ghost; and, as JSON, the commands the robots apply and the imagined rollouts' joint positions.
import { readFileSync } from 'node:fs';
import { FoxgloveServer } from './foxglove-protocol.js';
import { WebSocketServer, type WebSocket } from 'ws';
import type { AddressInfo } from 'node:net';
import { HostPolicy } from '../common/host-policy.js';
import { codecFor } from '../episodes/mcap/schemas.js';
import { SCENE_UPDATE_SCHEMA, frameNames, ghostGeoms, ghostSceneUpdate, tfTransforms, type RosTime } from './foxglove-scene.js';
import type { RobotHost } from './robot-host.js';
import type { RunManager } from './runs.js';
import type { StreamEvent } from './schemas.js';

export interface FoxgloveEndpoint {
  url: string;
  port: number;
  clients(): number;
  /** Message frames not sent to clients that fell behind (their socket buffered over the limit). */
  dropped(): number;
  close(): Promise<void>;
}

const timestamp = { type: 'object', properties: { sec: { type: 'integer' }, nsec: { type: 'integer' } } };
const command = { type: 'object', properties: { timestamp, name: { type: 'array', items: { type: 'string' } }, effort: { type: 'array', items: { type: 'number' } } } };
const imagined = {
  type: 'object',
  properties: { timestamp, run: { type: 'string' }, episode: { type: 'string' }, source: { type: 'string' }, t: { type: 'integer' }, name: { type: 'array', items: { type: 'string' } }, members: { type: 'array', items: { type: 'array', items: { type: 'number' } } } },
};

/** Client messages are subscribe/unsubscribe requests: a few KiB at most. */
export const FOXGLOVE_MAX_PAYLOAD = 64 * 1024;
/** Bytes a client's socket may hold unsent before its message frames are dropped. */
export const FOXGLOVE_MAX_BUFFERED = 1024 * 1024;

export interface FoxgloveOptions {
  host: string;
  port: number;
  robots: RobotHost[];
  runs: RunManager;
  onError(e: Error): void;
  /** Which Host headers and browser Origins may connect (default: loopback and the bound host, no foreign origin). */
  hosts?: HostPolicy;
  maxPayload?: number;
  maxBufferedBytes?: number;
}

/**
 * Drops message-data frames (never control messages) for a client whose socket holds more than
 * `limit` unsent bytes: a slow or stalled client costs the service bounded memory, not all it has.
 */
function withBackpressure(conn: WebSocket, limit: number, onDrop: () => void): void {
  const send = conn.send.bind(conn) as (data: unknown, opts?: { fin?: boolean }) => void;
  let dropping = false;
  // Two parameters: the protocol library sends a message's header and payload as two fragments then.
  (conn as unknown as { send: (data: unknown, opts?: { fin?: boolean }) => void }).send = (data, opts) => {
    if (typeof data === 'string') return send(data, opts); // control messages (JSON text) always go
    if (opts?.fin === true) {
      // The payload fragment follows its header fragment's fate.
      if (!dropping) return send(data, opts);
      dropping = false;
      return onDrop();
    }
    if (conn.bufferedAmount > limit) {
      dropping = opts?.fin === false;
      if (!dropping) onDrop();
      return;
    }
    send(data, opts);
  };
}

/** Wall-clock ns since the epoch, with sub-millisecond digits from the monotonic clock. */
function stampNs(): bigint {
  return BigInt(Date.now()) * 1_000_000n + (process.hrtime.bigint() % 1_000_000n);
}
const rosTime = (ns: bigint): RosTime => ({ sec: Number(ns / 1_000_000_000n), nanosec: Number(ns % 1_000_000_000n) });
const jsonTime = (t: RosTime) => ({ sec: t.sec, nsec: t.nanosec });

/** foxglove.websocket.v1's binary opcode of a message-data frame. */
const MESSAGE_DATA = 0x01;

/**
 * Sends each latched channel's message to `conn` when it subscribes to that channel (again after an unsubscribe),
 * framed as the protocol server frames a message: only that client gets it, as a ROS latched topic does.
 */
function sendLatchedOnSubscribe(conn: WebSocket, latched: ReadonlyMap<number, Uint8Array>, now: () => bigint): void {
  // Subscription id → channel, for this client's latched subscriptions.
  const subs = new Map<number, number>();
  conn.on('message', (data, isBinary) => {
    if (isBinary) return;
    let msg: { op?: unknown; subscriptions?: unknown; subscriptionIds?: unknown };
    try {
      msg = JSON.parse(String(data)) as typeof msg;
    } catch {
      return; // the protocol server has already reported this message as malformed
    }
    if (msg.op === 'unsubscribe' && Array.isArray(msg.subscriptionIds)) {
      for (const id of msg.subscriptionIds) subs.delete(id as number);
      return;
    }
    if (msg.op !== 'subscribe' || !Array.isArray(msg.subscriptions)) return;
    for (const sub of msg.subscriptions as Array<{ id?: unknown; channelId?: unknown }>) {
      const { id, channelId } = sub;
      if (typeof id !== 'number' || typeof channelId !== 'number') continue;
      const payload = latched.get(channelId);
      // The protocol server ignores a reused subscription id and a second subscription to one channel: so does this.
      if (payload === undefined || subs.has(id) || [...subs.values()].includes(channelId)) continue;
      subs.set(id, channelId);
      const frame = Buffer.alloc(13 + payload.byteLength);
      frame.writeUInt8(MESSAGE_DATA, 0);
      frame.writeUInt32LE(id, 1);
      frame.writeBigUInt64LE(now(), 5);
      frame.set(payload, 13);
      conn.send(frame);
    }
  });
}

export async function startFoxglove(o: FoxgloveOptions): Promise<FoxgloveEndpoint> {
  // Read before listening: a URDF that cannot be read fails the start with nothing left open.
  const urdfs = new Map<string, string>();
  for (const r of o.robots) {
    if (!r.urdf) continue;
    try {
      urdfs.set(r.id, readFileSync(r.urdf, 'utf8'));
    } catch (e) {
      throw new Error(`foxglove endpoint: robot '${r.id}': its URDF ${r.urdf} cannot be read for /robot_description: ${(e as Error).message}`, { cause: e });
    }
  }
  const server = new FoxgloveServer({ name: 'wmrl-bridge' });
  const hosts = o.hosts ?? new HostPolicy({ bind: o.host });
  const limit = o.maxBufferedBytes ?? FOXGLOVE_MAX_BUFFERED;
  let dropped = 0;
  const wss = new WebSocketServer({
    host: o.host,
    port: o.port,
    maxPayload: o.maxPayload ?? FOXGLOVE_MAX_PAYLOAD,
    handleProtocols: (protocols) => server.handleProtocols(protocols),
    // The same rules as the HTTP API: no rebinding host, no browser page of another origin.
    verifyClient: ({ origin, req }, done) => {
      if (!hosts.hostAllowed(req.headers.host)) return done(false, 421, 'Misdirected Request: host not allowed (WMRL_MISDIRECTED)');
      if (!hosts.originAllowed(origin || undefined, req.headers.host)) return done(false, 403, `origin '${String(origin).slice(0, 200)}' may not connect (WMRL_FORBIDDEN_ORIGIN); --allowed-origin adds one`);
      done(true);
    },
  });
  await new Promise<void>((resolve, reject) => {
    wss.once('listening', resolve);
    wss.once('error', reject);
  });
  wss.on('error', (e) => o.onError(new Error(`foxglove endpoint: ${e.message}`, { cause: e })));
  server.on('error', (e) => o.onError(new Error(`foxglove endpoint: ${e.message}`, { cause: e })));
  // Latched topics (a robot's URDF): channel → the message each new subscriber gets once.
  const latched = new Map<number, Uint8Array>();
  let clients = 0;
  wss.on('connection', (conn, req) => {
    clients++;
    conn.once('close', () => clients--);
    // A client's protocol fault (a message over maxPayload, a bad frame): ws closes it (1009, 1002);
    // reported, and it must not reach the process as an unhandled 'error'.
    conn.on('error', (e) => o.onError(new Error(`foxglove client ${req.socket.remoteAddress}:${req.socket.remotePort}: ${e.message}; connection closed`, { cause: e })));
    withBackpressure(conn, limit, () => dropped++);
    server.handleConnection(conn, `${req.socket.remoteAddress}:${req.socket.remotePort}`);
    // Registered after the protocol server's own handler, so a subscription it accepted is in place.
    if (latched.size > 0) sendLatchedOnSubscribe(conn, latched, stampNs);
  });
  const enc = new TextEncoder();
  // Messages are sent after the current task, never inside the control step that made them.
  let pending: Array<() => void> = [];
  const later = (f: () => void) => {
    if (pending.push(f) === 1) setImmediate(() => {
      const q = pending;
      pending = [];
      for (const g of q) g();
    });
  };
  // Encoding costs only for channels someone subscribes to.
  const subscribed = new Set<number>();
  server.on('subscribe', (ch) => subscribed.add(ch));
  server.on('unsubscribe', (ch) => subscribed.delete(ch));
  const cdrChannel = (topic: string, type: string) => {
    const codec = codecFor(type);
    return { ch: server.addChannel({ topic, encoding: 'cdr', schemaName: codec.name, schemaEncoding: 'ros2msg', schema: codec.text }), write: (msg: unknown) => codec.writer.writeMessage(msg) as Uint8Array<ArrayBuffer> };
  };
  const unsubscribe: Array<() => void> = [];
  const imaginedCh = new Map<string, { ch: number; joints: string[]; scene?: { ch: number; geoms: ReturnType<typeof ghostGeoms>; world: string } }>();
  for (const r of o.robots) {
    const prefix = o.robots.length === 1 ? '' : `/${r.id}`;
    const framePrefix = o.robots.length === 1 ? '' : `${r.id}/`;
    const js = cdrChannel(`${prefix}/joint_states`, 'sensor_msgs/msg/JointState');
    const cmd = server.addChannel({ topic: `${prefix}/wmrl/command`, encoding: 'json', schemaName: 'wmrl.Command', schema: JSON.stringify(command) });
    const scene = r.scene ?? null;
    const frames = scene ? frameNames(scene, framePrefix) : [];
    const tf = scene ? cdrChannel(`${prefix}/tf`, 'tf2_msgs/msg/TFMessage') : null;
    const urdf = urdfs.get(r.id);
    if (urdf !== undefined) {
      const description = cdrChannel(`${prefix}/robot_description`, 'std_msgs/msg/String');
      latched.set(description.ch, description.write({ data: urdf }));
    }
    imaginedCh.set(r.id, {
      ch: server.addChannel({ topic: `${prefix}/wmrl/imagined`, encoding: 'json', schemaName: 'wmrl.ImaginedRollout', schema: JSON.stringify(imagined) }),
      joints: r.spec.joints,
      ...(scene
        ? { scene: { ch: server.addChannel({ topic: `${prefix}/wmrl/imagined/scene`, encoding: 'json', schemaName: 'foxglove.SceneUpdate', schemaEncoding: 'jsonschema', schema: SCENE_UPDATE_SCHEMA }), geoms: ghostGeoms(scene), world: frames[0]! } }
        : {}),
    });
    const names = r.spec.joints;
    const actuators = r.spec.action.names;
    const none = new Float64Array(0);
    const onStep = (s: { q: number[]; command: number[]; poses?: number[] }) => {
      if (clients === 0) return;
      const t = stampNs();
      later(() => {
        const ros = rosTime(t);
        if (subscribed.has(js.ch)) server.sendMessage(js.ch, t, js.write({ header: { stamp: ros, frame_id: '' }, name: names, position: s.q, velocity: none, effort: none }));
        if (subscribed.has(cmd)) server.sendMessage(cmd, t, enc.encode(JSON.stringify({ timestamp: jsonTime(ros), name: actuators, effort: s.command })));
        if (tf && scene && s.poses?.length && subscribed.has(tf.ch)) server.sendMessage(tf.ch, t, tf.write({ transforms: tfTransforms(scene, frames, s.poses, ros) }));
      });
    };
    r.events.on('step', onStep);
    unsubscribe.push(() => r.events.off('step', onStep));
  }
  const onRun = (ev: StreamEvent) => {
    if (ev.type !== 'imagined' || clients === 0) return;
    const c = imaginedCh.get(ev.robot);
    if (!c) return;
    const t = stampNs();
    later(() => {
      const ros = rosTime(t);
      if (subscribed.has(c.ch)) server.sendMessage(c.ch, t, enc.encode(JSON.stringify({ timestamp: jsonTime(ros), run: ev.run, episode: ev.episode, source: ev.source, t: ev.t, name: c.joints, members: ev.members })));
      const sc = c.scene;
      if (sc && ev.poses.length > 0 && subscribed.has(sc.ch)) {
        const update = ghostSceneUpdate(sc.geoms, sc.world, ev.poses, ros, { run: ev.run, episode: ev.episode, source: ev.source, t: String(ev.t) });
        server.sendMessage(sc.ch, t, enc.encode(JSON.stringify(update)));
      }
    });
  };
  o.runs.events.on('event', onRun);
  unsubscribe.push(() => o.runs.events.off('event', onRun));
  const port = (wss.address() as AddressInfo).port;
  return {
    url: `ws://${o.host}:${port}`,
    port,
    clients: () => clients,
    dropped: () => dropped,
    close: async () => {
      for (const u of unsubscribe) u();
      for (const c of wss.clients) c.terminate();
      await new Promise<void>((resolve, reject) => wss.close((e) => (e ? reject(e) : resolve())));
    },
  };
}
