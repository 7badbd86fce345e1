// mqtt.js client factory with the options the transport relies on, and small promise helpers.
//
// Commands and episodes need QoS 1 on a persistent session, so messages queued for a briefly
// disconnected peer are not lost: clean=false, and with MQTT 5 a session expiry interval
// (without one an MQTT 5 broker drops the session at disconnect, whatever `clean` says).

import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import { encodePayload, parsePayload, type MqttMessage, type ParseLimits, type ParseResult } from './messages.js';

export type { MqttClient } from 'mqtt';

export interface ConnectOptions {
  url: string;
  /** Stable across restarts: the broker keys the persistent session on it. */
  clientId: string;
  /** 5 (default) for Mosquitto/EMQX; the embedded aedes broker speaks 4 (MQTT 3.1.1) only. */
  protocolVersion?: 4 | 5;
  /** false (default): persistent session. */
  clean?: boolean;
  /**
   * MQTT 5 session expiry, seconds (default 3600 with clean=false, 0 with clean=true). Rollout
   * workers should use clean=true: a dead worker's live session would keep taking its share of jobs.
   */
  sessionExpirySeconds?: number;
  reconnectPeriodMs?: number;
  /** Bound on the first connection, retries included, and on each CONNACK wait (default 10 s). */
  connectTimeoutMs?: number;
  keepaliveSeconds?: number;
  /**
   * A persistent session's queued messages arrive right after CONNACK, before the caller has had a
   * chance to register a handler; mqtt.js acknowledges them anyway, so they would be lost. They are
   * held this long after the first CONNACK (default 10 s; at most 10,000 messages and 64 MiB) and
   * handed, once each, to the first matching `onMessages` registered meanwhile. 0 turns holding off.
   */
  earlyWindowMs?: number;
  /** Last will, e.g. an "offline" marker. */
  will?: IClientOptions['will'];
  /** Broker credentials (Mosquitto password_file, EMQX built-in auth). Send them over mqtts:// off loopback. */
  username?: string;
  password?: string;
  /**
   * TLS for mqtts:// URLs: the CA (PEM) that signed the broker's certificate, when it is not a public
   * one, and a client certificate and key for brokers that require mutual TLS.
   */
  tls?: MqttTls;
  /**
   * Errors after the first connect (refused reconnects while the broker is down, protocol
   * errors). mqtt.js keeps reconnecting; the owner decides whether to log, count or give up.
   */
  onError: (err: Error) => void;
}

export interface MqttTls {
  ca?: string | Buffer;
  cert?: string | Buffer;
  key?: string | Buffer;
  /** false only for tests against a self-signed broker you cannot give a CA for. Default true. */
  rejectUnauthorized?: boolean;
}

/** What modules receive instead of a URL: a way to open a client. Tests pass aedes or mosquitto. */
export type ConnectFn = (opts: Omit<ConnectOptions, 'url'>) => Promise<MqttClient>;

export function clientOptions(opts: ConnectOptions): IClientOptions {
  const protocolVersion = opts.protocolVersion ?? 5;
  const clean = opts.clean ?? false;
  const o: IClientOptions = {
    clientId: opts.clientId,
    protocolVersion,
    clean,
    reconnectPeriod: opts.reconnectPeriodMs ?? 1000,
    connectTimeout: opts.connectTimeoutMs ?? 10_000,
    keepalive: opts.keepaliveSeconds ?? 30,
    resubscribe: true,
    // QoS 0 (state) is dropped while disconnected, not queued: it would be stale on arrival.
    // QoS 1 publishes made while disconnected wait in mqtt.js's outgoing store.
    queueQoSZero: false,
  };
  if (protocolVersion === 5) o.properties = { sessionExpiryInterval: opts.sessionExpirySeconds ?? (clean ? 0 : 3600) };
  if (opts.will) o.will = opts.will;
  if (opts.username !== undefined) o.username = opts.username;
  if (opts.password !== undefined) o.password = opts.password;
  if (opts.tls) {
    if (opts.tls.ca) o.ca = opts.tls.ca;
    if (opts.tls.cert) o.cert = opts.tls.cert;
    if (opts.tls.key) o.key = opts.tls.key;
    o.rejectUnauthorized = opts.tls.rejectUnauthorized ?? true;
  }
  return o;
}

/** Messages that arrived on a client before its handlers were registered (see earlyWindowMs). */
interface Early {
  /** Messages no registered handler matched, oldest first. */
  held: Array<{ topic: string; payload: Buffer }>;
  bytes: number;
  /** The `match` of every onMessages routing currently registered on the client. */
  matchers: Set<(topic: string) => boolean>;
}
const early = new WeakMap<MqttClient, Early>();
const EARLY_CAP = 10_000;
const EARLY_BYTES = 64 * 1024 * 1024;

/** Socket errors of a broker that is down or restarting; anything else (refused credentials, TLS) fails at once. */
const RETRYABLE = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'ECONNABORTED']);

/**
 * Opens a client and resolves on the first CONNACK. A broker that is briefly down (socket errors
 * such as ECONNREFUSED) is retried every reconnectPeriodMs until connectTimeoutMs has passed;
 * a refusal by the broker (a CONNACK reason code) rejects at once.
 */
export function connect(opts: ConnectOptions): Promise<MqttClient> {
  const client = mqtt.connect(opts.url, clientOptions(opts));
  const windowMs = opts.earlyWindowMs ?? 10_000;
  if (windowMs > 0) {
    // Registered before any packet can arrive: mqtt.connect only opens the socket.
    const e: Early = { held: [], bytes: 0, matchers: new Set() };
    const hold = (topic: string, payload: Buffer) => {
      for (const m of e.matchers) if (m(topic)) return; // delivered live
      if (e.held.length >= EARLY_CAP || e.bytes + payload.length > EARLY_BYTES) return;
      e.held.push({ topic, payload });
      e.bytes += payload.length;
    };
    early.set(client, e);
    client.on('message', hold);
    client.once('connect', () => {
      setTimeout(() => {
        client.off('message', hold);
        early.delete(client);
      }, windowMs).unref();
    });
    client.once('end', () => {
      client.off('message', hold);
      early.delete(client);
    });
  }
  const timeoutMs = opts.connectTimeoutMs ?? 10_000;
  const what = `MQTT connect to ${opts.url} as ${opts.clientId}`;
  return new Promise((resolve, reject) => {
    let last: Error | undefined;
    const t = setTimeout(() => fail(new Error(`timed out after ${timeoutMs} ms${last ? ` (last error: ${last.message})` : ''}`)), timeoutMs);
    const fail = (err: Error) => {
      clearTimeout(t);
      client.off('connect', ok);
      client.off('error', onFirstError);
      client.end(true);
      reject(new Error(`${what} failed: ${err.message}`));
    };
    const onFirstError = (err: Error & { code?: unknown }) => {
      if (typeof err.code === 'string' && RETRYABLE.has(err.code)) last = err; // broker not up (yet): retried
      else fail(err);
    };
    const ok = () => {
      clearTimeout(t);
      client.off('error', onFirstError);
      client.on('error', opts.onError);
      resolve(client);
    };
    client.once('connect', ok);
    client.on('error', onFirstError);
  });
}

/** A ConnectFn bound to one broker. */
export function connector(url: string, defaults: Partial<ConnectOptions> = {}): ConnectFn {
  return (opts) => connect({ ...defaults, ...opts, url });
}

export function subscribe(client: MqttClient, filter: string | string[], qos: 0 | 1 = 1): Promise<void> {
  return new Promise((resolve, reject) => {
    client.subscribe(filter, { qos }, (err, granted) => {
      if (err) return reject(new Error(`subscribe ${String(filter)} failed: ${err.message}`));
      const refused = (granted ?? []).filter((g) => g.qos === 128);
      if (refused.length > 0) return reject(new Error(`subscribe refused by broker: ${refused.map((g) => g.topic).join(', ')}`));
      resolve();
    });
  });
}

/** Publishes one message; resolves when QoS 1 is acknowledged by the broker (QoS 0: when written). */
export function publish(client: MqttClient, topic: string, msg: MqttMessage, opts: { qos?: 0 | 1; retain?: boolean } = {}): Promise<void> {
  return new Promise((resolve, reject) => {
    client.publish(topic, encodePayload(msg), { qos: opts.qos ?? 1, retain: opts.retain ?? false }, (err) =>
      err ? reject(new Error(`publish to ${topic} failed: ${err.message}`)) : resolve(),
    );
  });
}

export type MessageHandler = (topic: string, result: ParseResult) => void;

/**
 * Routes every message on `client` whose topic passes `match` through parsePayload. Invalid
 * payloads reach the handler as {ok: false}; nothing here throws into mqtt.js. Returns an
 * unsubscribe-from-routing function.
 */
export function onMessages(client: MqttClient, match: (topic: string) => boolean, handler: MessageHandler, limits?: ParseLimits): () => void {
  const listener = (topic: string, payload: Buffer) => {
    if (match(topic)) handler(topic, parsePayload(topic, payload, limits));
  };
  client.on('message', listener);
  // Hand over what arrived before any handler matched it (a persistent session's queue), ahead of
  // any live message: a microtask runs before the next socket event. Each held message goes to
  // the first registration that matches it, once.
  const e = early.get(client);
  e?.matchers.add(match);
  const backlog = e ? e.held.filter((m) => match(m.topic)) : [];
  if (backlog.length) {
    e!.held = e!.held.filter((m) => !match(m.topic));
    e!.bytes = e!.held.reduce((n, m) => n + m.payload.length, 0);
    queueMicrotask(() => {
      for (const m of backlog) handler(m.topic, parsePayload(m.topic, m.payload, limits));
    });
  }
  return () => {
    client.off('message', listener);
    e?.matchers.delete(match);
  };
}

/** end() as a promise. force=true drops in-flight messages (a crash, in tests). */
export function endClient(client: MqttClient, force = false): Promise<void> {
  return new Promise((resolve) => client.end(force, {}, () => resolve()));
}
