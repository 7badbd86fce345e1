// The embedded broker: aedes on a TCP port.
//
// aedes 1.x speaks MQTT 3.1.1 only (it refuses protocol 5 at CONNECT) and has no shared
// subscriptions, which the rollout-job fan-out needs. So this module adds them: a client's
// `$share/{group}/{filter}` subscription is kept by aedes as a literal filter that matches
// nothing, and one broker-level subscription per (group, filter) hands each message to one
// connected member, round robin. Differences from MQTT 5 brokers (see sharedDeliver):
// a message published while no member is connected is dropped, not queued for an offline
// persistent member.

import { EventEmitter } from 'node:events';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { Aedes, type AedesPublishPacket, type Client, type PublishPacket, type Subscription } from 'aedes';

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
  /** A shared-subscription delivery or the listening socket failed. */
  onError: (err: Error) => void;
}

interface AedesClientInternals {
  id: string;
  closed: boolean;
  connected: boolean;
  subscriptions: Record<string, { qos: number } | undefined>;
  publish(packet: PublishPacket, cb: (err?: Error) => void): void;
}

const SHARE_RE = /^\$share\/([^/+#]+)\/(.+)$/;

export async function startEmbeddedBroker(opts: EmbeddedBrokerOptions): Promise<EmbeddedBroker> {
  const events = new EventEmitter();
  const aedes = await Aedes.createBroker();
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

  aedes.authorizeSubscribe = (_client: Client, sub: Subscription, done) => {
    ensureShared(sub.topic);
    done(null, sub);
  };
  // Persistent sessions restore their subscriptions without authorizeSubscribe.
  aedes.on('clientReady', (client) => {
    for (const topic of Object.keys((client as unknown as AedesClientInternals).subscriptions)) ensureShared(topic);
  });
  aedes.on('clientError', (client, err) => events.emit('clientError', client.id, err));
  aedes.on('connectionError', (_client, err) => events.emit('clientError', undefined, err));

  const server: Server = createServer(aedes.handle);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 1883, opts.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.on('error', opts.onError);
  const port = (server.address() as AddressInfo).port;
  let closed: Promise<void> | undefined;
  return {
    port,
    url: `mqtt://${opts.host ?? '127.0.0.1'}:${port}`,
    aedes,
    events,
    close: () =>
      (closed ??= (async () => {
        await new Promise<void>((resolve) => aedes.close(() => resolve()));
        await new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
      })()),
  };
}
