// A rosbridge v2 server over WebSocket: the in-process robot stand-in publishes, subscribes and
// serves services and actions on it, and any rosbridge client (roslib, Foxglove, ROS web tools)
// connects as it would to rosbridge_server. Clients can also advertise topics, services and
// actions to each other; ids are remapped per client so two clients never collide. A client can
// never take over a topic, service or action this process provides, nor one another connected
// client provides, and a server listening beyond loopback requires rosbridge's `auth` op with a
// shared secret before anything else. Like the project's other servers it refuses a foreign Host
// (DNS rebinding) and browser pages of other origins: any page can open a WebSocket to loopback.
import { EventEmitter } from 'node:events';
import type { IncomingMessage } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { hostname } from 'node:os';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import { conform, conformService, knownMessageType, normalizeType } from '../ros/msgs.js';
import { HostPolicy, isLoopback } from '../../common/host-policy.js';
import { AuthChecker } from './auth.js';
import { DEFAULT_FRAGMENT_LIMITS, FragmentBuffer, fragment, type FragmentLimits } from './fragments.js';
import { DEFAULT_LIMITS, GoalStatus, parseFrame, type ParseLimits, type RosbridgeMessage, type SendActionGoal, type Status } from './protocol.js';

export interface RosbridgeServerOptions {
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  limits?: Partial<ParseLimits>;
  fragments?: Partial<FragmentLimits>;
  /** Messages to a client are dropped (and counted) while its socket buffers more than this. */
  maxBufferedBytes?: number;
  /**
   * Shared secret for rosbridge's `auth` op (rosauth's MAC): with it, a client's first op must be a valid
   * `auth`, or the client is refused and disconnected. Required to listen on anything but loopback.
   */
  secret?: string;
  /** Largest clock difference accepted in an auth op, s (default 30). */
  authWindowS?: number;
  /** An unauthenticated client is disconnected after this long, ms (default 10 000). */
  authTimeoutMs?: number;
  /** Until a client authenticates, a frame over this many bytes closes its connection (1009); default 4096. */
  maxUnauthenticatedFrameBytes?: number;
  /** Until a client authenticates, more raw bytes than this from it close its connection (1009) as they arrive; default 256 KiB. */
  maxUnauthenticatedBytes?: number;
  /** Connections waiting to authenticate at once; one more is closed (1013) at once. Default 16. */
  maxUnauthenticated?: number;
  /**
   * Host names the server is reached by besides loopback, IP addresses, `host` and this machine's name
   * ('*': any). A request naming another host is refused (421): that is a DNS-rebinding page.
   */
  allowedHosts?: readonly string[];
  /** Browser origins that may connect besides pages of the server's own host and port, e.g. https://app.foxglove.dev; other pages are refused (403). */
  allowedOrigins?: readonly string[];
}

/** Smallest fragment_size served: smaller requests are raised to it (one frame per character is a flood). */
export const MIN_FRAGMENT_SIZE = 1024;

export type ServiceHandler = (args: Record<string, unknown>) => Promise<Record<string, unknown>> | Record<string, unknown>;
export interface ActionContext {
  feedback(values: unknown): void;
  /** Aborted when the client cancels the goal or disconnects. */
  signal: AbortSignal;
}
export type ActionHandler = (goal: Record<string, unknown>, ctx: ActionContext) => Promise<unknown>;

interface Client {
  no: number;
  ws: WebSocket;
  fragments: FragmentBuffer;
  subs: Map<string, { throttleMs: number; last: number; fragmentSize?: number }>;
  advertised: Set<string>;
  services: Set<string>;
  actions: Set<string>;
  goals: Map<string, AbortController>;
  authenticated: boolean;
  authTimer?: NodeJS.Timeout;
  /** The address the connection arrived on (unlike the Host header, the client cannot choose it). */
  localAddress: string;
}

interface TopicInfo {
  type: string;
  local: Set<(msg: Record<string, unknown>) => void>;
  /** This process publishes it: clients may subscribe, never publish. */
  localPublisher?: boolean;
  latched?: Record<string, unknown>;
}

type Provider = { local: ServiceHandler; type: string } | { client: Client; type: string };
type ActionProvider = { local: ActionHandler; type: string } | { client: Client; type: string };

export interface ServerStats {
  clients: number;
  framesIn: number;
  errors: number;
  dropped: number;
  fragmentsEvicted: number;
}

// uint8[] fields travel as base64 text, as rosbridge sends them. The holder's raw value is read
// because JSON.stringify applies Buffer's own toJSON before a replacer sees the value.
function toJson(m: RosbridgeMessage): string {
  return JSON.stringify(m, function (this: Record<string, unknown>, k: string, v: unknown) {
    const raw = this[k];
    return raw instanceof Uint8Array ? Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('base64') : v;
  });
}

function byteLength(data: RawData): number {
  return Array.isArray(data) ? data.reduce((n, b) => n + b.byteLength, 0) : data.byteLength;
}

/** An address's host (lower-case, IPv6 without brackets) and port (the scheme's default when absent); null when it is not one. */
function hostPort(address: string): { host: string; port: string } | null {
  const defaults: Record<string, string> = { 'ws:': '80', 'http:': '80', 'wss:': '443', 'https:': '443' };
  let u: URL;
  try {
    u = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(address) ? address : `ws://${address}`);
  } catch {
    return null;
  }
  const port = u.port || defaults[u.protocol];
  if (port === undefined || u.username || u.password || !u.hostname) return null;
  return { host: u.hostname.toLowerCase().replace(/^\[(.*)\]$/, '$1').replace(/\.$/, ''), port };
}

export class RosbridgeServer extends EventEmitter {
  private wss?: WebSocketServer;
  private readonly clients = new Set<Client>();
  private readonly topics = new Map<string, TopicInfo>();
  private readonly services = new Map<string, Provider>();
  private readonly actions = new Map<string, ActionProvider>();
  /** Forwarded request id → where its reply goes, and the one client whose reply is accepted. */
  private readonly forwarded = new Map<string, { caller: Client; provider: Client; name: string; id?: string | null; kind: 'service' | 'action' }>();
  private readonly limits: ParseLimits;
  private readonly fragLimits: FragmentLimits;
  private nextClient = 1;
  private nextId = 1;
  private readonly auth?: AuthChecker;
  private readonly hosts: HostPolicy;
  readonly stats: ServerStats = { clients: 0, framesIn: 0, errors: 0, dropped: 0, fragmentsEvicted: 0 };

  constructor(private readonly opts: RosbridgeServerOptions = {}) {
    super();
    this.limits = { ...DEFAULT_LIMITS, ...opts.limits };
    this.fragLimits = { ...DEFAULT_FRAGMENT_LIMITS, ...opts.fragments };
    if (opts.secret !== undefined) this.auth = new AuthChecker(opts.secret, opts.authWindowS);
    this.hosts = new HostPolicy({ bind: opts.host ?? '127.0.0.1', allowedHosts: opts.allowedHosts, allowedOrigins: opts.allowedOrigins });
  }

  async listen(): Promise<number> {
    const host = this.opts.host ?? '127.0.0.1';
    if (!this.auth && !isLoopback(host)) {
      throw new Error(
        `rosbridge: refusing to listen on '${host}' without a shared secret: anyone who can reach it could command the robot; ` +
          'set a secret (sim-robot --secret-env VAR) or listen on 127.0.0.1',
      );
    }
    const wss = new WebSocketServer({
      host,
      port: this.opts.port ?? 9090,
      maxPayload: this.limits.maxFrameLength * 2,
      verifyClient: ({ origin, req }, done) => {
        const h = req.headers.host;
        if (!this.hosts.hostAllowed(h)) return done(false, 421, `Misdirected Request: host '${String(h).slice(0, 200)}' not allowed (WMRL_MISDIRECTED); sim-robot --allowed-host adds one`);
        if (!this.hosts.originAllowed(origin || undefined, h)) return done(false, 403, `origin '${String(origin).slice(0, 200)}' may not connect (WMRL_FORBIDDEN_ORIGIN); sim-robot --allowed-origin adds one`);
        done(true);
      },
    });
    this.wss = wss;
    await new Promise<void>((resolve, reject) => {
      wss.once('listening', resolve);
      wss.once('error', reject);
    });
    wss.on('error', (e) => this.emit('error', e));
    wss.on('connection', (ws, req) => this.accept(ws, req));
    return (wss.address() as AddressInfo).port;
  }

  get port(): number {
    return (this.wss?.address() as AddressInfo | undefined)?.port ?? 0;
  }

  async close(): Promise<void> {
    for (const c of this.clients) c.ws.terminate();
    await new Promise<void>((resolve) => (this.wss ? this.wss.close(() => resolve()) : resolve()));
  }

  // ------------------------------------------------------------ in-process API

  /** Declares a topic this process publishes; returns the publish function. */
  advertise(topic: string, type: string, opts: { latch?: boolean } = {}): (msg: Record<string, unknown>) => void {
    const info = this.topic(topic, type);
    info.localPublisher = true;
    return (msg) => {
      if (opts.latch) info.latched = msg;
      this.deliver(topic, info, msg, null);
    };
  }

  subscribe(topic: string, type: string, handler: (msg: Record<string, unknown>) => void): () => void {
    const info = this.topic(topic, type);
    info.local.add(handler);
    return () => info.local.delete(handler);
  }

  advertiseService(service: string, type: string, handler: ServiceHandler): void {
    this.services.set(service, { local: handler, type });
  }

  advertiseAction(action: string, type: string, handler: ActionHandler): void {
    this.actions.set(action, { local: handler, type });
  }

  /** Incomplete fragmented messages held across all clients, and their size in characters. */
  pendingFragments(): { messages: number; length: number } {
    let messages = 0, length = 0;
    for (const c of this.clients) {
      messages += c.fragments.size;
      length += c.fragments.heldLength;
    }
    return { messages, length };
  }

  /** Closes every client connection (a network drop as the clients see it). */
  dropClients(): void {
    for (const c of this.clients) c.ws.terminate();
  }

  // ------------------------------------------------------------ connections

  private accept(ws: WebSocket, req?: IncomingMessage): void {
    const waiting = [...this.clients].filter((x) => !x.authenticated).length;
    if (this.auth && waiting >= (this.opts.maxUnauthenticated ?? 16)) {
      const why = `too many connections waiting to authenticate (${waiting}); try again later`;
      // A fault on this socket ends it early; it is being closed anyway.
      ws.once('error', () => ws.terminate());
      ws.send(toJson({ op: 'status', level: 'error', msg: why }));
      ws.close(1013, 'too many unauthenticated connections');
      this.emit('auth_failed', 0, why);
      return;
    }
    const c: Client = {
      no: this.nextClient++,
      ws,
      fragments: new FragmentBuffer(this.fragLimits),
      subs: new Map(),
      advertised: new Set(),
      services: new Set(),
      actions: new Set(),
      goals: new Map(),
      authenticated: !this.auth,
      localAddress: (req?.socket.localAddress ?? '').replace(/^::ffff:/i, ''),
    };
    if (!c.authenticated) {
      c.authTimer = setTimeout(() => this.refuse(c, `not authenticated within ${this.opts.authTimeoutMs ?? 10_000} ms; send the auth op first`), this.opts.authTimeoutMs ?? 10_000);
      c.authTimer.unref();
    }
    this.clients.add(c);
    this.stats.clients = this.clients.size;
    ws.on('message', (data, isBinary) => {
      if (!this.clients.has(c)) return; // in flight from a refused client
      // Checked before the frame is decoded: an unauthenticated client gets no parsing work out of the server.
      const cap = this.opts.maxUnauthenticatedFrameBytes ?? 4096;
      if (!c.authenticated && byteLength(data) > cap) return this.refuse(c, `not authenticated: a frame of ${byteLength(data)} bytes before auth; at most ${cap} are accepted`, 1009);
      if (isBinary) return this.status(c, 'error', 'binary frames are not supported; send JSON text');
      this.handleText(c, data.toString());
    });
    ws.on('close', () => this.drop(c));
    ws.on('error', () => this.drop(c));
    if (!c.authenticated && req) this.limitUnauthenticated(c, req.socket);
    this.emit('connection', c.no);
  }

  private drop(c: Client): void {
    if (!this.clients.delete(c)) return;
    clearTimeout(c.authTimer);
    this.stats.clients = this.clients.size;
    for (const g of c.goals.values()) g.abort();
    for (const s of c.services) if ((this.services.get(s) as { client?: Client } | undefined)?.client === c) this.services.delete(s);
    for (const a of c.actions) if ((this.actions.get(a) as { client?: Client } | undefined)?.client === c) this.actions.delete(a);
    for (const [fid, f] of this.forwarded) {
      if (f.caller === c) this.forwarded.delete(fid);
      else if (f.provider === c) {
        // Its caller would otherwise wait forever.
        this.forwarded.delete(fid);
        const why = `${f.name}: its provider disconnected before answering`;
        if (f.kind === 'service') this.send(f.caller, { op: 'service_response', id: f.id, service: f.name, values: why, result: false });
        else this.send(f.caller, { op: 'action_result', id: f.id!, action: f.name, values: why, status: GoalStatus.ABORTED, result: false });
      }
    }
    this.emit('disconnect', c.no);
  }

  /** Entry point for one text frame from a client (also used directly by the fuzz tests). */
  handleText(c: Client, text: string, depth = 0): void {
    this.stats.framesIn++;
    if (!this.clients.has(c)) return; // frames already in flight from a refused client
    const r = parseFrame(text, this.limits);
    if (!c.authenticated) {
      if (!r.ok) return this.refuse(c, `not authenticated: ${r.error}; the first op must be auth`);
      if (r.msg.op !== 'auth') return this.refuse(c, `not authenticated: op '${r.msg.op}' refused; the first op must be auth`);
      const why = this.auth!.check(r.msg, (dest) => this.destProblem(c, dest));
      if (why) return this.refuse(c, why);
      c.authenticated = true;
      clearTimeout(c.authTimer);
      return;
    }
    if (!r.ok) return this.status(c, 'error', r.error, r.id);
    const m = r.msg;
    if (m.op === 'fragment') {
      if (depth > 0) return this.status(c, 'error', 'fragment inside a fragmented message', m.id);
      const before = c.fragments.evicted;
      const res = c.fragments.add(m.id, m.num, m.total, m.data);
      this.stats.fragmentsEvicted += c.fragments.evicted - before;
      if (!res.done) return res.error ? this.status(c, 'error', res.error, m.id) : undefined;
      return this.handleText(c, res.text, depth + 1);
    }
    try {
      this.dispatch(c, m);
    } catch (e) {
      this.status(c, 'error', `${m.op}: ${(e as Error).message}`, 'id' in m ? m.id : undefined);
    }
  }

  private dispatch(c: Client, m: RosbridgeMessage): void {
    switch (m.op) {
      case 'advertise': {
        if (this.topics.get(m.topic)?.localPublisher) return this.status(c, 'error', `advertise: ${m.topic} is published by this server; a client cannot publish on it`, m.id);
        this.topic(m.topic, m.type);
        c.advertised.add(m.topic);
        return;
      }
      case 'unadvertise':
        c.advertised.delete(m.topic);
        return;
      case 'publish': {
        const info = this.topics.get(m.topic);
        if (!info) return this.status(c, 'error', `publish: topic ${m.topic} is not advertised; advertise it first`, m.id);
        if (info.localPublisher) return this.status(c, 'error', `publish: ${m.topic} is published by this server; a client cannot publish on it`, m.id);
        const v = knownMessageType(info.type) ? conform(info.type, m.msg) : { ok: true as const, value: m.msg };
        if (!v.ok) return this.status(c, 'error', `publish on ${m.topic}: ${v.error}`, m.id);
        this.deliver(m.topic, info, v.value, c);
        return;
      }
      case 'subscribe': {
        const existing = this.topics.get(m.topic);
        if (!existing && !m.type) return this.status(c, 'error', `subscribe: topic ${m.topic} is unknown; give its type`, m.id);
        if (!existing) this.topic(m.topic, m.type!);
        else if (m.type && normalizeType(m.type) !== normalizeType(existing.type)) return this.status(c, 'error', `subscribe: ${m.topic} has type ${existing.type}, not ${m.type}`, m.id);
        let fragmentSize = m.fragment_size ?? undefined;
        if (fragmentSize !== undefined && fragmentSize < MIN_FRAGMENT_SIZE) {
          this.status(c, 'warning', `subscribe ${m.topic}: fragment_size ${fragmentSize} raised to the minimum ${MIN_FRAGMENT_SIZE}`, m.id);
          fragmentSize = MIN_FRAGMENT_SIZE;
        }
        c.subs.set(m.topic, { throttleMs: m.throttle_rate ?? 0, last: 0, fragmentSize });
        const latched = this.topics.get(m.topic)!.latched;
        if (latched) this.send(c, { op: 'publish', topic: m.topic, msg: latched });
        return;
      }
      case 'unsubscribe':
        c.subs.delete(m.topic);
        return;
      case 'call_service':
        return this.callService(c, m.service, m.args ?? {}, m.id);
      case 'service_response': {
        const f = m.id ? this.forwarded.get(m.id) : undefined;
        // Only the client the call went to may answer it.
        if (!f || f.kind !== 'service' || f.provider !== c) return this.status(c, 'warning', `service_response for unknown call ${m.id ?? '(no id)'}`, m.id);
        this.forwarded.delete(m.id!);
        this.send(f.caller, { op: 'service_response', id: f.id, service: m.service, values: m.values, result: m.result });
        return;
      }
      case 'advertise_service': {
        const held = this.services.get(m.service);
        if (held && 'local' in held) return this.status(c, 'error', `advertise_service: ${m.service} is provided by this server; a client cannot replace it`);
        if (held && held.client !== c && this.clients.has(held.client)) return this.status(c, 'error', `advertise_service: ${m.service} is provided by another client; it must unadvertise it or disconnect first`);
        this.services.set(m.service, { client: c, type: m.type });
        c.services.add(m.service);
        return;
      }
      case 'unadvertise_service':
        if ((this.services.get(m.service) as { client?: Client } | undefined)?.client === c) this.services.delete(m.service);
        c.services.delete(m.service);
        return;
      case 'advertise_action': {
        const held = this.actions.get(m.action);
        if (held && 'local' in held) return this.status(c, 'error', `advertise_action: ${m.action} is provided by this server; a client cannot replace it`);
        if (held && held.client !== c && this.clients.has(held.client)) return this.status(c, 'error', `advertise_action: ${m.action} is provided by another client; it must unadvertise it or disconnect first`);
        this.actions.set(m.action, { client: c, type: m.type });
        c.actions.add(m.action);
        return;
      }
      case 'unadvertise_action':
        if ((this.actions.get(m.action) as { client?: Client } | undefined)?.client === c) this.actions.delete(m.action);
        c.actions.delete(m.action);
        return;
      case 'send_action_goal':
        return this.sendGoal(c, m);
      case 'cancel_action_goal': {
        const local = c.goals.get(m.id);
        if (local) return local.abort();
        const p = this.actions.get(m.action);
        const fid = [...this.forwarded].find(([, f]) => f.caller === c && f.id === m.id && f.kind === 'action')?.[0];
        if (p && 'client' in p && fid) this.send(p.client, { op: 'cancel_action_goal', id: fid, action: m.action });
        return;
      }
      case 'action_feedback':
      case 'action_result': {
        const f = this.forwarded.get(m.id);
        if (!f || f.kind !== 'action' || f.provider !== c) return this.status(c, 'warning', `${m.op} for unknown goal ${m.id}`, m.id);
        if (m.op === 'action_result') this.forwarded.delete(m.id);
        this.send(f.caller, { ...m, id: f.id! });
        return;
      }
      case 'set_level':
      case 'status':
        return;
      case 'auth':
        // Already authenticated, or a server without a secret: nothing to check.
        return;
    }
  }

  private callService(c: Client, service: string, args: Record<string, unknown>, id?: string | null): void {
    const p = this.services.get(service);
    const fail = (msg: string) => this.send(c, { op: 'service_response', id, service, values: msg, result: false });
    if (!p) return fail(`service ${service} does not exist`);
    if ('client' in p) {
      const fid = `fwd${this.nextId++}`;
      this.forwarded.set(fid, { caller: c, provider: p.client, name: service, id, kind: 'service' });
      this.send(p.client, { op: 'call_service', id: fid, service, args });
      return;
    }
    const req = conformService(p.type, 'request', args);
    if (!req.ok && !req.error.startsWith('unknown service type')) return fail(req.error);
    Promise.resolve()
      .then(() => p.local(req.ok ? req.value : args))
      .then(
        (values) => this.send(c, { op: 'service_response', id, service, values, result: true }),
        (e: unknown) => fail((e as Error).message ?? String(e)),
      );
  }

  private sendGoal(c: Client, m: SendActionGoal): void {
    const p = this.actions.get(m.action);
    if (!p) return this.send(c, { op: 'action_result', id: m.id, action: m.action, values: `action ${m.action} does not exist`, status: GoalStatus.ABORTED, result: false });
    if ('client' in p) {
      const fid = `fwd${this.nextId++}`;
      this.forwarded.set(fid, { caller: c, provider: p.client, name: m.action, id: m.id, kind: 'action' });
      this.send(p.client, { ...m, id: fid });
      return;
    }
    const ac = new AbortController();
    c.goals.set(m.id, ac);
    const ctx: ActionContext = {
      signal: ac.signal,
      feedback: (values) => {
        if (m.feedback !== false && !ac.signal.aborted) this.send(c, { op: 'action_feedback', id: m.id, action: m.action, values });
      },
    };
    Promise.resolve()
      .then(() => p.local(m.args ?? {}, ctx))
      .then(
        (values) => this.send(c, { op: 'action_result', id: m.id, action: m.action, values, status: ac.signal.aborted ? GoalStatus.CANCELED : GoalStatus.SUCCEEDED, result: true }),
        (e: unknown) =>
          ac.signal.aborted
            ? this.send(c, { op: 'action_result', id: m.id, action: m.action, values: {}, status: GoalStatus.CANCELED, result: true })
            : this.send(c, { op: 'action_result', id: m.id, action: m.action, values: (e as Error).message ?? String(e), status: GoalStatus.ABORTED, result: false }),
      )
      .finally(() => c.goals.delete(m.id));
  }

  // ------------------------------------------------------------ delivery

  private topic(name: string, type: string): TopicInfo {
    let info = this.topics.get(name);
    if (!info) {
      info = { type, local: new Set() };
      this.topics.set(name, info);
    } else if (normalizeType(info.type) !== normalizeType(type)) {
      throw new Error(`topic ${name} already has type ${info.type}, not ${type}`);
    }
    return info;
  }

  private deliver(topic: string, info: TopicInfo, msg: Record<string, unknown>, from: Client | null): void {
    for (const h of info.local) {
      try {
        h(msg);
      } catch (e) {
        this.emit('error', e);
      }
    }
    let text: string | undefined;
    const now = Date.now();
    for (const c of this.clients) {
      const sub = c.subs.get(topic);
      if (!sub || c === from) continue;
      if (sub.throttleMs && now - sub.last < sub.throttleMs) continue;
      sub.last = now;
      text ??= toJson({ op: 'publish', topic, msg });
      this.sendText(c, text, sub.fragmentSize);
    }
  }

  private send(c: Client, m: RosbridgeMessage): void {
    this.sendText(c, toJson(m));
  }

  private sendText(c: Client, text: string, fragmentSize?: number): void {
    if (c.ws.readyState !== c.ws.OPEN) return;
    if (c.ws.bufferedAmount > (this.opts.maxBufferedBytes ?? 8 * 1024 * 1024)) {
      this.stats.dropped++;
      return;
    }
    if (fragmentSize && text.length > fragmentSize) {
      for (const f of fragment(`frag${this.nextId++}`, text, fragmentSize)) c.ws.send(JSON.stringify(f));
    } else c.ws.send(text);
  }

  /**
   * ws assembles a whole message (up to maxPayload) before 'message' fires, so the frame cap alone
   * still lets an unauthenticated client make the server buffer megabytes: its raw bytes are counted
   * as they arrive, and past the budget the socket stops being read and is closed.
   */
  private limitUnauthenticated(c: Client, socket: Socket): void {
    const budget = this.opts.maxUnauthenticatedBytes ?? 256 * 1024;
    let received = 0;
    const onData = (chunk: Buffer) => {
      if (c.authenticated || !this.clients.has(c)) return void socket.off('data', onData);
      received += chunk.length;
      if (received <= budget) return;
      socket.off('data', onData);
      socket.pause(); // the unread rest is never buffered
      this.refuse(c, `not authenticated: ${received} bytes received before auth; at most ${budget} are accepted`, 1009);
      // The client cannot finish the close handshake behind its unsent frame: its socket is cut after
      // a grace period in which the status and close frame reach it (not ws's 30 s close timeout).
      setTimeout(() => socket.destroy(), 1000).unref();
    };
    socket.prependListener('data', onData);
  }

  /** Refuses an unauthenticated client: an error status naming why, then the socket closes (policy violation, or 1009: too big). */
  private refuse(c: Client, why: string, code: 1008 | 1009 = 1008): void {
    this.status(c, 'error', why);
    this.emit('auth_failed', c.no, why);
    this.drop(c);
    c.ws.close(code, code === 1009 ? 'frame too big before authentication' : 'authentication required');
  }

  /**
   * null when an auth op's `dest` names this server: the URL the client connected to (ws://host:port,
   * or host:port) with this server's port and the address the connection arrived on, a loopback name
   * for a loopback one, the bound host or this machine's name; or any port of an --allowed-host name
   * (a reverse proxy's). The Host header is not trusted here: a replaying client chooses it.
   */
  private destProblem(c: Client, dest: string): string | null {
    const d = hostPort(dest);
    const own = hostPort(`${c.localAddress.includes(':') ? `[${c.localAddress}]` : c.localAddress}:${this.port}`);
    const example = own ? `ws://${own.host.includes(':') ? `[${own.host}]` : own.host}:${own.port}` : `ws://127.0.0.1:${this.port}`;
    const wrong = `auth: dest '${dest.slice(0, 100)}' does not name this server; send the URL the client connected to, e.g. ${example} (another name, or a proxy's: sim-robot --allowed-host)`;
    if (!d) return wrong;
    const proxies = (this.opts.allowedHosts ?? []).filter((h) => h !== '*').map((h) => hostPort(h)?.host);
    if (proxies.includes(d.host)) return null;
    if (d.port !== String(this.port)) return wrong;
    const bind = (this.opts.host ?? '127.0.0.1').toLowerCase().replace(/^\[|\]$/g, '');
    const names = new Set([c.localAddress.toLowerCase(), hostname().toLowerCase(), ...(bind === '0.0.0.0' || bind === '::' ? [] : [bind])]);
    if (names.has(d.host) || (isLoopback(d.host) && (isLoopback(c.localAddress) || isLoopback(bind)))) return null;
    return wrong;
  }

  private status(c: Client, level: Status['level'], msg: string, id?: string | null): void {
    if (level === 'error') this.stats.errors++;
    this.send(c, { op: 'status', level, msg, ...(id ? { id } : {}) });
  }
}
