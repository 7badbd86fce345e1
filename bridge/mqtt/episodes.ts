// Episode upload with end-to-end acknowledgement.
//
// QoS 1 only promises delivery to the broker, and a broker that crashes loses what it held in
// memory. So the robot-side EpisodeUploader keeps every step until the service says it is
// *stored* (ack "stored up to seq N", published by EpisodeIngest only after its sink accepted
// the step), and re-sends what is unacknowledged after every reconnect and on a timer. Steps
// may then arrive twice; the sink dedupes by (episode, seq). Net effect: no acknowledged step is
// ever lost, whatever the broker does.

import { EventEmitter } from 'node:events';
import type { MqttClient } from 'mqtt';
import type { EpisodeMeta, EpisodeStatus, EpisodeStep } from '../../episodes/types.js';
import { onMessages, publish, subscribe } from './client.js';
import { metaFromWire, metaToWire, stepFromWire, stepToWire } from './convert.js';
import { isAck, isEpisodeBegin, isEpisodeEnd, isEpisodeStep, type AckMsg, type EpisodeStepMsg, type MqttMessage } from './messages.js';
import type { EpisodeOutbox } from './outbox.js';
import { allRobotsFilter, parseTopic, robotTopic } from './topics.js';

// ---------------------------------------------------------------- robot side

export interface UploaderOptions {
  /** Re-send what is still unacknowledged this often while connected (default 1000 ms). */
  resendMs?: number;
  /** A publish failed (typically "Connection closed" during an outage); the data stays pending. */
  onError: (err: Error) => void;
  /**
   * A durable outbox (outbox.ts): every record is committed to it before it is sent and leaves it
   * when acknowledged, so a crashed robot process resumes the upload from it. Without one,
   * unacknowledged steps live in memory only.
   */
  outbox?: EpisodeOutbox;
}

export interface UploaderStats {
  sent: number;
  resent: number;
  acks: number;
}

interface Outgoing {
  meta: EpisodeMeta;
  /** Unacknowledged steps by seq. */
  steps: Map<number, EpisodeStepMsg>;
  nextSeq: number;
  ackedUpTo: number;
  end?: { steps: number; status: Exclude<EpisodeStatus, 'recording'> };
  done: { promise: Promise<void>; resolve: () => void };
}

/**
 * Robot side. Memory grows with unacknowledged steps while the service is unreachable;
 * `pendingSteps` lets the caller apply back-pressure.
 * Events: 'ack' (AckMsg received), 'invalid' (string).
 */
export class EpisodeUploader {
  readonly events = new EventEmitter();
  readonly stats: UploaderStats = { sent: 0, resent: 0, acks: 0 };
  private readonly open = new Map<string, Outgoing>();
  private readonly topic: string;
  private readonly timer: NodeJS.Timeout;
  private readonly stopRouting: () => void;
  private readonly onConnect = () => this.resendAll();
  private readonly onError: (err: Error) => void;
  private readonly outbox?: EpisodeOutbox;
  /** Episodes taken over from the outbox at creation, still to be acknowledged. */
  readonly resumed: string[] = [];
  /** Those of them that were still recording: ended now as partial. */
  readonly interrupted: string[] = [];

  private constructor(
    private readonly client: MqttClient,
    readonly robotId: string,
    opts: UploaderOptions,
  ) {
    this.onError = opts.onError;
    this.outbox = opts.outbox;
    for (const p of this.outbox?.pending() ?? []) {
      const o: Outgoing = { meta: metaFromWire(p.meta), steps: new Map(p.steps.map((m) => [m.seq, m])), nextSeq: p.nextSeq, ackedUpTo: p.ackedUpTo, done: deferred() };
      // Its recording process is gone, and with it the state to continue the episode.
      o.end = p.end ?? { steps: p.nextSeq, status: 'partial' };
      if (!p.end) {
        this.outbox!.end(p.meta.id, o.end.steps, o.end.status);
        this.interrupted.push(p.meta.id);
      }
      this.open.set(p.meta.id, o);
      this.resumed.push(p.meta.id);
    }
    this.topic = robotTopic(robotId, 'episodes');
    const ackTopic = robotTopic(robotId, 'ack');
    this.stopRouting = onMessages(client, (t) => t === ackTopic, (_t, r) => {
      if (r.ok && isAck(r.msg)) this.onAck(r.msg);
      else if (!r.ok) this.events.emit('invalid', r.error);
    });
    client.on('connect', this.onConnect);
    this.timer = setInterval(() => this.resendAll(), opts.resendMs ?? 1000);
  }

  static async create(client: MqttClient, robotId: string, opts: UploaderOptions): Promise<EpisodeUploader> {
    const u = new EpisodeUploader(client, robotId, opts);
    await subscribe(client, robotTopic(robotId, 'ack'), 1);
    if (u.resumed.length) u.resendAll();
    return u;
  }

  get pendingSteps(): number {
    let n = 0;
    for (const o of this.open.values()) n += o.steps.size;
    return n;
  }

  begin(meta: EpisodeMeta): void {
    if (this.open.has(meta.id)) throw new Error(`episode ${meta.id} is already open`);
    const wire = metaToWire(meta);
    this.outbox?.begin(wire);
    this.open.set(meta.id, { meta, steps: new Map(), nextSeq: 0, ackedUpTo: -1, done: deferred() });
    this.send({ type: 'episode_begin', meta: wire });
  }

  /** Steps must come in order 0, 1, 2, …: the service acknowledges a contiguous prefix. */
  step(episodeId: string, step: EpisodeStep): void {
    const o = this.get(episodeId);
    if (o.end) throw new Error(`episode ${episodeId} has ended`);
    if (step.seq !== o.nextSeq) throw new Error(`episode ${episodeId}: step seq ${step.seq}, expected ${o.nextSeq}`);
    const m = stepToWire(episodeId, step, o.ackedUpTo);
    this.outbox?.step(m);
    o.nextSeq++;
    o.steps.set(step.seq, m);
    this.send(m);
  }

  /** Marks the episode finished; the returned promise resolves when the service stored all of it. */
  end(episodeId: string, status: 'complete' | 'partial' = 'complete'): Promise<void> {
    const o = this.get(episodeId);
    if (!o.end) {
      this.outbox?.end(episodeId, o.nextSeq, status);
      o.end = { steps: o.nextSeq, status };
      this.send({ type: 'episode_end', episodeId, steps: o.nextSeq, status, ackedUpTo: o.ackedUpTo });
    }
    return o.done.promise;
  }

  /** Resolves when every episode that was begun has been ended and fully acknowledged. */
  async drained(): Promise<void> {
    while (this.open.size > 0) {
      const open = [...this.open.values()];
      if (open.some((o) => !o.end)) throw new Error(`episodes still recording: ${open.filter((o) => !o.end).map((o) => o.meta.id).join(', ')}`);
      await Promise.all(open.map((o) => o.done.promise));
    }
  }

  /**
   * Stops re-sending and routing. Returns the ids of episodes not yet fully acknowledged: their
   * unacknowledged steps are dropped with this object and their end() promises never settle.
   */
  close(): string[] {
    clearInterval(this.timer);
    this.client.off('connect', this.onConnect);
    this.stopRouting();
    return [...this.open.keys()];
  }

  private get(episodeId: string): Outgoing {
    const o = this.open.get(episodeId);
    if (!o) throw new Error(`episode ${episodeId} is not open (begin() it first)`);
    return o;
  }

  private send(m: MqttMessage, resend = false): void {
    if (resend) this.stats.resent++;
    else this.stats.sent++;
    publish(this.client, this.topic, m, { qos: 1 }).catch(this.onError);
  }

  private resendAll(): void {
    if (!this.client.connected) return; // mqtt.js already queues what was published while down
    for (const [id, o] of this.open) {
      // The begin record rides along so a restarted service learns the meta again.
      this.send({ type: 'episode_begin', meta: metaToWire(o.meta) }, true);
      for (const m of o.steps.values()) this.send({ ...m, ackedUpTo: o.ackedUpTo }, true);
      if (o.end) this.send({ type: 'episode_end', episodeId: id, steps: o.end.steps, status: o.end.status, ackedUpTo: o.ackedUpTo }, true);
    }
  }

  private onAck(a: AckMsg): void {
    this.stats.acks++;
    this.events.emit('ack', a);
    const o = this.open.get(a.episodeId);
    if (!o) return;
    if (a.upTo > o.ackedUpTo) {
      this.outbox?.acked(a.episodeId, a.upTo);
      for (let s = o.ackedUpTo + 1; s <= a.upTo; s++) o.steps.delete(s);
      o.ackedUpTo = a.upTo;
    }
    if (a.complete && o.end && o.ackedUpTo >= o.end.steps - 1) {
      this.outbox?.done(a.episodeId);
      this.open.delete(a.episodeId);
      o.done.resolve();
    }
  }
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

// ---------------------------------------------------------------- service side

/** Where acknowledged steps go; the SQLite episode store implements it. Must be durable before returning. */
export interface EpisodeSink {
  /** Stores one step; false when (meta.id, step.seq) is already stored. */
  ingest(meta: EpisodeMeta, step: EpisodeStep): boolean;
  /**
   * Called when an episode holds all its steps (at least one) and its end record: once per
   * EpisodeIngest, but again for the same episode after a service restart, so it must be idempotent.
   */
  end?(meta: EpisodeMeta, info: { steps: number; status: 'complete' | 'partial' }): void;
}

export interface IngestStats {
  stored: number;
  /** Suppressed: already known to this ingest or refused by the sink as duplicate. */
  duplicates: number;
  /** Steps of an episode whose begin record has not arrived yet (re-sent later by the robot). */
  orphans: number;
  acksSent: number;
  invalid: number;
  completed: number;
}

interface Incoming {
  robotId: string;
  meta: EpisodeMeta;
  upTo: number;
  above: Set<number>;
  end?: { steps: number; status: 'complete' | 'partial' };
  complete: boolean;
}

export interface IngestOptions {
  /** Completed episodes remembered for re-acknowledging late re-sends (default 10000). */
  rememberCompleted?: number;
  /** The sink threw (nothing was acknowledged; the robot re-sends) or an ack publish failed. */
  onError: (err: Error) => void;
}

/**
 * Service side: subscribes to every robot's episodes topic, stores steps through `sink`, and
 * acknowledges the contiguous stored prefix per episode.
 * Events: 'ack' (AckMsg sent), 'invalid' (string).
 */
export class EpisodeIngest {
  readonly events = new EventEmitter();
  readonly stats: IngestStats = { stored: 0, duplicates: 0, orphans: 0, acksSent: 0, invalid: 0, completed: 0 };
  private readonly episodes = new Map<string, Incoming>();
  private readonly ackDue = new Set<string>();
  private ackScheduled = false;
  private readonly stopRouting: () => void;
  private readonly remember: number;
  private readonly onError: (err: Error) => void;

  private constructor(
    private readonly client: MqttClient,
    private readonly sink: EpisodeSink,
    opts: IngestOptions,
  ) {
    this.remember = opts.rememberCompleted ?? 10_000;
    this.onError = opts.onError;
    this.stopRouting = onMessages(client, (t) => parseTopic(t)?.kind === 'robot' && t.endsWith('/episodes'), (topic, r) => {
      if (!r.ok) {
        this.stats.invalid++;
        this.events.emit('invalid', r.error);
        return;
      }
      const route = parseTopic(topic);
      if (route?.kind !== 'robot') return;
      try {
        this.handle(route.robotId, r.msg);
      } catch (e) {
        // A sink failure: nothing is acked, the robot re-sends.
        this.onError(e instanceof Error ? e : new Error(String(e)));
      }
    });
  }

  static async create(client: MqttClient, sink: EpisodeSink, opts: IngestOptions): Promise<EpisodeIngest> {
    const ingest = new EpisodeIngest(client, sink, opts);
    await subscribe(client, allRobotsFilter('episodes'), 1);
    return ingest;
  }

  close(): void {
    this.stopRouting();
  }

  private handle(robotId: string, m: MqttMessage): void {
    if (isEpisodeBegin(m)) {
      if (!this.episodes.has(m.meta.id)) {
        this.episodes.set(m.meta.id, { robotId, meta: metaFromWire(m.meta), upTo: -1, above: new Set(), complete: false });
      }
      this.scheduleAck(m.meta.id);
      return;
    }
    if (isEpisodeStep(m)) {
      const e = this.episodes.get(m.episodeId);
      if (!e) {
        this.stats.orphans++;
        return;
      }
      // Everything the robot saw acknowledged was stored by a sink (this one, before a restart).
      if (m.ackedUpTo > e.upTo) this.advance(e, m.ackedUpTo);
      if (m.seq <= e.upTo || e.above.has(m.seq)) {
        this.stats.duplicates++;
      } else {
        if (this.sink.ingest(e.meta, stepFromWire(m))) this.stats.stored++;
        else this.stats.duplicates++;
        e.above.add(m.seq);
        this.advance(e, e.upTo);
      }
      this.maybeComplete(e);
      this.scheduleAck(m.episodeId);
      return;
    }
    if (isEpisodeEnd(m)) {
      const e = this.episodes.get(m.episodeId);
      if (!e) {
        this.stats.orphans++;
        return;
      }
      e.end ??= { steps: m.steps, status: m.status };
      if (m.ackedUpTo > e.upTo) this.advance(e, m.ackedUpTo);
      this.maybeComplete(e);
      this.scheduleAck(m.episodeId);
    }
  }

  /** Moves the contiguous prefix to at least `to`, then as far as the stored set allows. */
  private advance(e: Incoming, to: number): void {
    for (let s = e.upTo + 1; s <= to; s++) e.above.delete(s);
    e.upTo = Math.max(e.upTo, to);
    while (e.above.delete(e.upTo + 1)) e.upTo++;
  }

  private maybeComplete(e: Incoming): void {
    if (e.complete || !e.end || e.upTo < e.end.steps - 1) return;
    // An episode that ended before its first step (its robot killed right after begin) gave the sink nothing.
    if (e.end.steps > 0) this.sink.end?.(e.meta, e.end);
    e.complete = true;
    this.stats.completed++;
    this.forgetOldCompleted();
  }

  private forgetOldCompleted(): void {
    if (this.stats.completed <= this.remember) return;
    // Map iteration is insertion order: the oldest episodes go first.
    for (const [id, e] of this.episodes) {
      if (this.episodes.size <= this.remember) break;
      if (e.complete) this.episodes.delete(id);
    }
  }

  private scheduleAck(episodeId: string): void {
    this.ackDue.add(episodeId);
    if (this.ackScheduled) return;
    this.ackScheduled = true;
    // One ack per episode per burst of messages, not one per step.
    setImmediate(() => {
      this.ackScheduled = false;
      const due = [...this.ackDue];
      this.ackDue.clear();
      for (const id of due) {
        const e = this.episodes.get(id);
        if (!e) continue;
        const ack: AckMsg = { type: 'ack', episodeId: id, upTo: e.upTo, complete: e.complete };
        this.stats.acksSent++;
        this.events.emit('ack', ack);
        publish(this.client, robotTopic(e.robotId, 'ack'), ack, { qos: 1 }).catch(this.onError);
      }
    });
  }
}
