// Acceptance: the broker is killed at seeded random points while 50 episodes upload
// → 0 acknowledged steps lost, duplicates removed by (episode, seq), every episode complete.
// Mosquitto is SIGKILLed (persistence autosave every second, so restarts come back with
// stale or no session state); the embedded aedes broker is closed and replaced by a fresh
// one on the same port (all its state gone).

import { afterAll, describe, expect, it } from 'vitest';
import { generateMqttCredentials, type MqttLogin } from '../bridge/mqtt/auth.js';
import { startEmbeddedBroker, type EmbeddedBroker } from '../bridge/mqtt/broker.js';
import { connect, endClient, type MqttClient } from '../bridge/mqtt/client.js';
import { EpisodeIngest, EpisodeUploader, type EpisodeSink } from '../bridge/mqtt/episodes.js';
import type { AckMsg } from '../bridge/mqtt/messages.js';
import { startMosquitto } from '../bridge/mqtt/mosquitto.js';
import type { EpisodeStep } from '../episodes/types.js';
import { rng as rng01 } from './helpers/episode-data.js';
import { MemorySink } from './helpers/mqtt-sink.js';

const SEED = 20261129;
const EPISODES = 50;
const STEPS = 20;
const KILLS = 10;

interface Crashable {
  name: string;
  protocolVersion: 4 | 5;
  start(): Promise<{ url: string; login?: MqttLogin; crash(): Promise<void>; restart(): Promise<void>; close(): Promise<void>; errors: Error[] }>;
}

const CRASHABLE: Crashable[] = [
  {
    name: 'mosquitto (SIGKILL)',
    protocolVersion: 5,
    async start() {
      const m = await startMosquitto({ autosaveSeconds: 1 });
      return { url: m.url, crash: () => m.kill(), restart: () => m.start(), close: () => m.dispose(), errors: [] };
    },
  },
  {
    name: 'aedes (broker replaced)',
    protocolVersion: 4,
    async start() {
      const errors: Error[] = [];
      // The replacement broker keeps the logins, as a restarted service keeps its credentials file.
      const credentials = generateMqttCredentials();
      const start = async (port: number) => {
        return startEmbeddedBroker({ port, auth: credentials, onError: (e) => errors.push(e) });
      };
      let b: EmbeddedBroker | undefined = await start(0);
      const port = b.port;
      return {
        errors,
        url: b.url,
        login: credentials.service,
        crash: async () => {
          await b?.close();
          b = undefined;
        },
        restart: async () => {
          b = await start(port);
        },
        close: async () => b?.close(),
      };
    },
  },
];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function makeStep(ep: number, seq: number): EpisodeStep {
  return {
    seq,
    tObs: seq * 0.02,
    tAct: seq * 0.02 + 0.001,
    obs: { stamp: seq * 0.02, position: Float64Array.of(ep, seq), velocity: Float64Array.of(0, 1) },
    action: Float32Array.of(seq / 10, -seq / 10),
    reward: ep * 1000 + seq,
    done: seq === STEPS - 1,
    ...(seq === STEPS - 1 ? { success: ep % 2 === 0 } : {}),
  };
}

describe.each(CRASHABLE)('episode upload survives $name', (kind) => {
  const cleanup: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const f of cleanup.reverse()) await f();
  });

  it(`${EPISODES} episodes, ${KILLS} broker kills: 0 acknowledged steps lost, no duplicates stored`, async () => {
    const rng = rng01(SEED);
    const broker = await kind.start();
    cleanup.push(() => broker.close());
    const errors: Error[] = [];
    const open = async (clientId: string): Promise<MqttClient> => {
      const c = await connect({ url: broker.url, ...broker.login, clientId, protocolVersion: kind.protocolVersion, reconnectPeriodMs: 100, connectTimeoutMs: 2000, onError: (e) => errors.push(e) });
      cleanup.push(() => endClient(c, true));
      return c;
    };

    const sink = new MemorySink();
    const acksSent: AckMsg[] = [];
    // Just before the service restarts, it stores steps and "dies" before acknowledging them:
    // those come back as re-sends that only the sink can recognise as duplicates.
    let crashAfterStore = 0;
    const crashes: Error[] = [];
    const crashingSink: EpisodeSink = {
      ingest(meta, step) {
        const fresh = sink.ingest(meta, step);
        if (crashAfterStore > 0) {
          crashAfterStore--;
          throw new Error(`simulated crash after storing ${meta.id}/${step.seq}`);
        }
        return fresh;
      },
      end: (meta, info) => sink.end(meta, info),
    };
    const startIngest = async (): Promise<{ ingest: EpisodeIngest; client: MqttClient }> => {
      const client = await open('svc-ingest');
      const ingest = await EpisodeIngest.create(client, crashingSink, {
        onError: (e) => (e.message.startsWith('simulated crash') ? crashes : errors).push(e),
      });
      ingest.events.on('ack', (a: AckMsg) => acksSent.push(a));
      return { ingest, client };
    };
    let svc = await startIngest();
    const ingestStats = { duplicates: 0, orphans: 0 };
    // The service process also crashes once: a new ingest with empty memory, same durable sink.
    const restartService = async () => {
      svc.ingest.close();
      ingestStats.duplicates += svc.ingest.stats.duplicates;
      ingestStats.orphans += svc.ingest.stats.orphans;
      await endClient(svc.client, true);
      svc = await startIngest();
    };
    const publishErrors: Error[] = [];
    const uploader = await EpisodeUploader.create(await open('robot-7-uploader'), 'robot-7', { resendMs: 300, onError: (e) => publishErrors.push(e) });
    const acksSeen: AckMsg[] = [];
    uploader.events.on('ack', (a: AckMsg) => acksSeen.push(a));

    // Seeded kill points (global step indices), spread over the run.
    const total = EPISODES * STEPS;
    const killAt = new Set<number>();
    while (killAt.size < KILLS) killAt.add(20 + Math.floor(rng() * (total - 60)));
    const serviceRestartAt = Math.floor(total / 2) + Math.floor(rng() * (total / 4));
    let kills = 0;
    let outage: Promise<void> = Promise.resolve();
    const crashCycle = async (downMs: number) => {
      await broker.crash();
      kills++;
      await sleep(downMs);
      await broker.restart();
    };

    const t0 = Date.now();
    let g = 0;
    const ended: Promise<void>[] = [];
    for (let ep = 0; ep < EPISODES; ep++) {
      const id = `ep-${ep}`;
      uploader.begin({ id, robot: 'robot-7', policyVersion: 'p1', hardwareProfile: 'nominal', startedAt: Date.now() });
      for (let s = 0; s < STEPS; s++) {
        uploader.step(id, makeStep(ep, s));
        if (killAt.has(g)) {
          const downMs = 50 + Math.floor(rng() * 250);
          await outage; // one outage at a time; the robot keeps recording through it
          outage = crashCycle(downMs);
        }
        if (g === serviceRestartAt - 10) crashAfterStore = 10;
        if (g === serviceRestartAt) {
          // Restarted between broker outages: a subscribe cut off by a kill is not what this measures.
          await outage;
          await restartService();
        }
        g++;
        await sleep(2);
      }
      ended.push(uploader.end(id));
    }
    await outage;
    await Promise.race([
      uploader.drained(),
      sleep(60_000).then(() => {
        throw new Error(`upload not drained after 60 s: ${uploader.pendingSteps} steps pending`);
      }),
    ]);
    await Promise.all(ended);
    const seconds = (Date.now() - t0) / 1000;

    expect(kills).toBe(KILLS);
    expect(broker.errors).toEqual([]);
    // Every acknowledgement, sent or received, names only stored steps.
    for (const a of [...acksSent, ...acksSeen]) {
      for (let s = 0; s <= a.upTo; s++) expect(sink.has(a.episodeId, s), `${a.episodeId}/${s} acked but not stored`).toBe(true);
    }
    // Each (episode, seq) stored exactly once, with its own content; every episode complete.
    expect(sink.inserts).toBe(total);
    expect(sink.steps.size).toBe(total);
    for (let ep = 0; ep < EPISODES; ep++) {
      expect(sink.ended.get(`ep-${ep}`)).toEqual({ steps: STEPS, status: 'complete' });
      for (let s = 0; s < STEPS; s++) expect(sink.steps.get(`ep-${ep}/${s}`)?.reward).toBe(ep * 1000 + s);
    }
    expect(uploader.pendingSteps).toBe(0);
    expect(uploader.stats.resent).toBeGreaterThan(0);
    expect(crashes.length).toBe(10);
    expect(sink.duplicates).toBeGreaterThanOrEqual(1);
    ingestStats.duplicates += svc.ingest.stats.duplicates;
    ingestStats.orphans += svc.ingest.stats.orphans;
    const suppressed = ingestStats.duplicates + sink.duplicates;
    const distinct = (es: Error[]) => [...new Set(es.map((e) => e.message.replace(/\d+/g, 'N')))].join(' | ');
    console.log(
      `[durability ${kind.name}] kills=${kills} episodes=${EPISODES} steps=${total} stored=${sink.inserts} ` +
        `duplicates_suppressed=${suppressed} (ingest ${ingestStats.duplicates}, sink ${sink.duplicates}) resent=${uploader.stats.resent} ` +
        `service_restarts=1 orphans=${ingestStats.orphans} acks_sent=${acksSent.length} acks_seen=${acksSeen.length} ` +
        `client_errors=${errors.length} publish_errors=${publishErrors.length} seconds=${seconds.toFixed(1)}\n  client errors: ${distinct(errors)}\n  publish errors: ${distinct(publishErrors)}`,
    );
    expect(uploader.close()).toEqual([]);
    svc.ingest.close();
  }, 90_000);
});
