// The embedded broker: aedes on a TCP port.
//
// aedes 1.x speaks MQTT 3.1.1 only (it refuses protocol 5 at CONNECT) and has no shared
// subscriptions, which the rollout-job fan-out needs. So this module adds them: a client's
// `$share/{group}/{filter}` subscription is kept by aedes as a literal filter that matches
// nothing, and one broker-level subscription per (group, filter) hands each message to one
// connected member, round robin. Differences from MQTT 5 brokers (see sharedDeliver):
// a message published while no member is connected is dropped, not queued for an offline
// persistent member.
//
// Closed by default: every client logs in with credentials (auth.ts) and each role stays on its
// topics. The one way to let anonymous clients in is INSECURE_ANONYMOUS, and only on loopback.

import { EventEmitter } from 'node:events';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { Aedes, type AedesPublishPacket, type Client, type PublishPacket, type Subscription } from 'aedes';
import { isLoopback } from '../../common/host-policy.js';
import { identify, mayPublish, maySubscribe, type MqttCredentials, type MqttIdentity } from './auth.js';

/** Lets any client in with every right. Tests and local experiments only; refused off loopback. */
export const INSECURE_ANONYMOUS = 'insecure-anonymous-loopback-only';

export interface EmbeddedBroker {
  /** The bound TCP port (the real one when 0 was asked for). */
  port: number;
  url: string;
  aedes: Aedes;
  /** 'clientError' (clientId | undefined, Error): a client connection failed; aedes drops it. */
  events: EventEmitter;
  close(): Promise<void>;
}

export interface EmbeddedBrokerOptions {
  /** Default 1883; 0 binds a free port. */
  port?: number;
  host?: string;
  /** Who may connect: the service's credentials (roles and ACLs in auth.ts), or INSECURE_ANONYMOUS. */
  auth: MqttCredentials | typeof INSECURE_ANONYMOUS;
  /** A shared-subscription delivery or the listening socket failed. */
  onError: (err: Error) => void;
  /** Client ids with a live or stored session (each tied to its login); a new one beyond is refused (CONNACK 3). Default 10,000. */
  maxClientIds?: number;
}

interface AedesClientInternals {
  id: string;
  /** The session ends with the connection (false: aedes keeps its subscriptions for the next one). */
  clean: boolean;
  closed: boolean;
  connected: boolean;
  subscriptions: Record<string, { qos: number } | undefined>;
  publish(packet: PublishPacket, cb: (err?: Error) => void): void;
}

const SHARE_RE = /^\$share\/([^/+#]+)\/(.+)$/;

class AuthError extends Error {
  readonly returnCode: number;
  constructor(message: string, returnCode: number) {
    super(message);
    this.returnCode = returnCode;
  }
}

export async function startEmbeddedBroker(opts: EmbeddedBrokerOptions): Promise<EmbeddedBroker> {
  const host = opts.host ?? '127.0.0.1';
  const auth = opts.auth as EmbeddedBrokerOptions['auth'] | undefined;
  if (auth === undefined) throw new Error('startEmbeddedBroker: `auth` is required (the service\'s MQTT credentials; INSECURE_ANONYMOUS only on loopback)');
  if (auth === INSECURE_ANONYMOUS && !isLoopback(host)) {
    throw new Error(`refusing to bind the MQTT broker to ${host} without authentication: anyone who reaches the port could command robots and run code on sandbox workers; give it credentials (auth) or bind 127.0.0.1`);
  }
  const maxIds = opts.maxClientIds ?? 10_000;
  if (!(Number.isInteger(maxIds) && maxIds >= 1)) throw new Error(`startEmbeddedBroker: maxClientIds ${maxIds} must be a positive integer`);
  const events = new EventEmitter();
  const aedes = await Aedes.createBroker();
  // Who each connected client proved to be, and which login holds each client id while its session
  // lives (connected, or stored with clean=false): another login taking over an id would inherit the
  // session's subscriptions without authorizeSubscribe. A clean session's id is free once it ends.
  const identities = new WeakMap<Client, MqttIdentity>();
  const owners = new Map<string, { username: string; client: Client }>();
  const ANYONE: MqttIdentity = { role: 'service' };
  const who = (client: Client | null): MqttIdentity | undefined => (auth === INSECURE_ANONYMOUS ? ANYONE : client ? identities.get(client) : undefined);

  aedes.authenticate = (client, username, password, done) => {
    if (auth === INSECURE_ANONYMOUS) return done(null, true);
    const id = identify(auth, username, password);
    if (!id) return done(new AuthError(username === undefined ? 'anonymous clients are refused' : `bad username or password for ${username}`, username === undefined ? 5 : 4), false);
    const owner = owners.get(client.id);
    if (owner !== undefined && owner.username !== username) return done(new AuthError(`client id ${client.id} belongs to another login`, 2), false);
    if (owner === undefined && owners.size >= maxIds) return done(new AuthError(`${maxIds} client ids have live or stored sessions; refusing ${client.id}`, 3), false);
    owners.set(client.id, { username: username!, client });
    identities.set(client, id);
    done(null, true);
  };
  aedes.authorizePublish = (client, packet, done) => {
    const id = who(client);
    // A client's will is judged as its publishes are; a broker-internal publish has no client.
    if (!id || !mayPublish(id, packet.topic)) return done(new Error(`not authorized to publish to ${packet.topic}`));
    done(null);
  };
  const shared = new Map<string, { rr: number }>();
  const clients = (aedes as unknown as { clients: Record<string, AedesClientInternals> }).clients;

  function sharedDeliver(shareTopic: string, state: { rr: number }) {
    return (packet: AedesPublishPacket, cb: () => void): void => {
      const members = Object.values(clients).filter((c) => c.connected && !c.closed && c.subscriptions[shareTopic]);
      if (members.length === 0) return cb();
      const m = members[state.rr++ % members.length];
      const qos = Math.min(packet.qos, m.subscriptions[shareTopic]?.qos ?? 0) as 0 | 1 | 2;
      const out = { cmd: 'publish', topic: packet.topic, payload: packet.payload, qos, retain: false, dup: false } as PublishPacket;
      // Each member gets a fresh broker counter, so its per-client dedupe does not drop it.
      m.publish(out, (err) => {
        if (err) opts.onError(err);
        cb();
      });
    };
  }

  function ensureShared(topic: string): void {
    const m = SHARE_RE.exec(topic);
    if (!m || shared.has(topic)) return;
    const state = { rr: 0 };
    shared.set(topic, state);
    aedes.subscribe(m[2], sharedDeliver(topic, state), () => {});
  }

  aedes.authorizeSubscribe = (client: Client, sub: Subscription, done) => {
    const id = who(client);
    if (!id || !maySubscribe(id, sub.topic)) return done(null, null); // refused: SUBACK 0x80
    ensureShared(sub.topic);
    done(null, sub);
  };
  // Persistent sessions restore their subscriptions without authorizeSubscribe.
  aedes.on('clientReady', (client) => {
    for (const topic of Object.keys((client as unknown as AedesClientInternals).subscriptions)) ensureShared(topic);
  });
  // A clean session ends with its connection: its id is free again once aedes has dropped its
  // subscriptions (it says so after). A persistent one stays its login's (aedes keeps the session)
  // until that login connects with clean=true and leaves.
  aedes.on('clientDisconnect', (client) => {
    const o = owners.get(client.id);
    if (o?.client === client && (client as unknown as AedesClientInternals).clean) owners.delete(client.id);
  });
  aedes.on('clientError', (client, err) => events.emit('clientError', client.id, err));
  aedes.on('connectionError', (_client, err) => events.emit('clientError', undefined, err));

  const server: Server = createServer(aedes.handle);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 1883, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.on('error', opts.onError);
  const port = (server.address() as AddressInfo).port;
  let closed: Promise<void> | undefined;
  return {
    port,
    url: `mqtt://${host.includes(':') ? `[${host}]` : host}:${port}`,
    aedes,
    events,
    close: () =>
      (closed ??= (async () => {
        await new Promise<void>((resolve) => aedes.close(() => resolve()));
        await new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
      })()),
  };
}
