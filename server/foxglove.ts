// The Foxglove WebSocket endpoint (foxglove.websocket.v1): live joint states, the commands the robots
// apply, and imagined rollouts as JSON channels, so Foxglove users see them in the tool they use.
import { FoxgloveServer } from './foxglove-protocol.js';
import { WebSocketServer, type WebSocket } from 'ws';
import type { AddressInfo } from 'node:net';
import { HostPolicy } from '../common/host-policy.js';
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

const jointState = {
  type: 'object',
  properties: { timestamp: { type: 'object', properties: { sec: { type: 'integer' }, nsec: { type: 'integer' } } }, name: { type: 'array', items: { type: 'string' } }, position: { type: 'array', items: { type: 'number' } } },
};
const command = { type: 'object', properties: { timestamp: jointState.properties.timestamp, name: { type: 'array', items: { type: 'string' } }, effort: { type: 'array', items: { type: 'number' } } } };
const imagined = {
  type: 'object',
  properties: { timestamp: jointState.properties.timestamp, run: { type: 'string' }, episode: { type: 'string' }, source: { type: 'string' }, t: { type: 'integer' }, name: { type: 'array', items: { type: 'string' } }, members: { type: 'array', items: { type: 'array', items: { type: 'number' } } } },
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

export async function startFoxglove(o: FoxgloveOptions): Promise<FoxgloveEndpoint> {
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
  let clients = 0;
  wss.on('connection', (conn, req) => {
    clients++;
    conn.once('close', () => clients--);
    // A client's protocol fault (a message over maxPayload, a bad frame): ws closes it (1009, 1002);
    // reported, and it must not reach the process as an unhandled 'error'.
    conn.on('error', (e) => o.onError(new Error(`foxglove client ${req.socket.remoteAddress}:${req.socket.remotePort}: ${e.message}; connection closed`, { cause: e })));
    withBackpressure(conn, limit, () => dropped++);
    server.handleConnection(conn, `${req.socket.remoteAddress}:${req.socket.remotePort}`);
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
  const stamp = () => {
    const ns = process.hrtime.bigint();
    const ms = Date.now();
    return { ns: BigInt(ms) * 1_000_000n + (ns % 1_000_000n), ts: { sec: Math.floor(ms / 1000), nsec: (ms % 1000) * 1_000_000 } };
  };
  const unsubscribe: Array<() => void> = [];
  const imaginedCh = new Map<string, { ch: number; joints: string[] }>();
  for (const r of o.robots) {
    const prefix = o.robots.length === 1 ? '' : `/${r.id}`;
    const js = server.addChannel({ topic: `${prefix}/joint_states`, encoding: 'json', schemaName: 'wmrl.JointState', schema: JSON.stringify(jointState) });
    const cmd = server.addChannel({ topic: `${prefix}/wmrl/command`, encoding: 'json', schemaName: 'wmrl.Command', schema: JSON.stringify(command) });
    imaginedCh.set(r.id, { ch: server.addChannel({ topic: `${prefix}/wmrl/imagined`, encoding: 'json', schemaName: 'wmrl.ImaginedRollout', schema: JSON.stringify(imagined) }), joints: r.spec.joints });
    const names = r.spec.joints;
    const actuators = r.spec.action.names;
    const onStep = (s: { q: number[]; command: number[] }) => {
      if (clients === 0) return;
      const t = stamp();
      later(() => {
        server.sendMessage(js, t.ns, enc.encode(JSON.stringify({ timestamp: t.ts, name: names, position: s.q })));
        server.sendMessage(cmd, t.ns, enc.encode(JSON.stringify({ timestamp: t.ts, name: actuators, effort: s.command })));
      });
    };
    r.events.on('step', onStep);
    unsubscribe.push(() => r.events.off('step', onStep));
  }
  const onRun = (ev: StreamEvent) => {
    if (ev.type !== 'imagined' || clients === 0) return;
    const c = imaginedCh.get(ev.robot);
    if (!c) return;
    const t = stamp();
    later(() => server.sendMessage(c.ch, t.ns, enc.encode(JSON.stringify({ timestamp: t.ts, run: ev.run, episode: ev.episode, source: ev.source, t: ev.t, name: c.joints, members: ev.members }))));
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
