// A Robot reached over MQTT (service side) and the robot-side server exposing any Robot.
//
//   service: MqttRobot ── cmd (command | request) ──▶ broker ──▶ serveRobotOverMqtt ── Robot
//            ◀── state (QoS 0, control rate), reply, spec (retained) ──
//
// Commands carry a per-sender session id, a seq and a deadline on the sender's wall clock
// (clocks NTP-synchronized): the robot side applies a command only if it is fresh and newer
// than the last one, so a QoS 1 command redelivered after a reconnect never moves the robot
// late. E-stop requests are never refused, and latch: motion commands are refused until reset.

import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { MqttClient } from 'mqtt';
import { onMessages, publish, subscribe } from '../../bridge/mqtt/client.js';
import { obsFromWire, obsToWire, specFromWire, specToWire } from '../../bridge/mqtt/convert.js';
import { isCommand, isReply, isRequest, isSpec, isState, type CommandMsg, type RequestMsg } from '../../bridge/mqtt/messages.js';
import { robotTopic } from '../../bridge/mqtt/topics.js';
import type { Robot, RobotObservation, RobotSpec } from '../types.js';

// ---------------------------------------------------------------- service side

export interface MqttRobotOptions {
  /** How long a command stays valid after it is sent (default: 3 control periods, at least 50 ms). */
  commandTtlMs?: number;
  /** observe() rejects when the newest state is older than this (default: 10 control periods, at least 500 ms). */
  maxStateAgeMs?: number;
  /** Timeout of reset()/estop() and of waiting for the spec or first state (default 5000 ms). */
  requestTimeoutMs?: number;
}

export class MqttRobot implements Robot {
  readonly spec: RobotSpec;
  /** Clipping events: the policy asked for more than the action limits allow. */
  readonly events = new EventEmitter();
  private readonly session = randomUUID();
  private seq = 0;
  private latest: { obs: RobotObservation; at: number } | undefined;
  private stateWaiters: Array<() => void> = [];
  private readonly pending = new Map<string, { resolve: (obs?: RobotObservation) => void; reject: (e: Error) => void }>();
  private readonly stopRouting: () => void;
  private readonly ttlMs: number;
  private readonly maxAgeMs: number;
  private readonly timeoutMs: number;

  private constructor(
    private readonly client: MqttClient,
    readonly robotId: string,
    spec: RobotSpec,
    opts: MqttRobotOptions,
  ) {
    this.spec = spec;
    const period = 1000 / spec.controlHz;
    this.ttlMs = opts.commandTtlMs ?? Math.max(50, 3 * period);
    this.maxAgeMs = opts.maxStateAgeMs ?? Math.max(500, 10 * period);
    this.timeoutMs = opts.requestTimeoutMs ?? 5000;
    const stateTopic = robotTopic(robotId, 'state');
    const replyTopic = robotTopic(robotId, 'reply');
    this.stopRouting = onMessages(
      client,
      (t) => t === stateTopic || t === replyTopic,
      (_topic, r) => {
        if (!r.ok) return void this.events.emit('invalid', r.error);
        const m = r.msg;
        if (isState(m)) {
          this.latest = { obs: obsFromWire(m), at: Date.now() };
          const w = this.stateWaiters;
          this.stateWaiters = [];
          for (const f of w) f();
        } else if (isReply(m)) {
          const p = this.pending.get(m.id);
          if (!p) return;
          this.pending.delete(m.id);
          if (m.ok) p.resolve(m.obs ? obsFromWire(m.obs) : undefined);
          else p.reject(new Error(`robot ${robotId} refused ${m.op}: ${m.error ?? 'no reason given'}`));
        }
      },
    );
  }

  /** Waits for the robot's retained spec announcement, then subscribes to its state and replies. */
  static async connect(client: MqttClient, robotId: string, opts: MqttRobotOptions = {}): Promise<MqttRobot> {
    const timeoutMs = opts.requestTimeoutMs ?? 5000;
    const specTopic = robotTopic(robotId, 'spec');
    let stop: () => void = () => {};
    const spec = new Promise<RobotSpec>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`no spec from robot ${robotId} on ${specTopic} within ${timeoutMs} ms`)), timeoutMs);
      stop = onMessages(client, (topic) => topic === specTopic, (_topic, r) => {
        if (!r.ok || !isSpec(r.msg)) return reject(new Error(r.ok ? `unexpected message on ${specTopic}` : r.error));
        clearTimeout(t);
        resolve(specFromWire(r.msg.spec));
      });
    });
    try {
      await subscribe(client, specTopic, 1);
      const s = await spec;
      const robot = new MqttRobot(client, robotId, s, opts);
      await subscribe(client, [robotTopic(robotId, 'state'), robotTopic(robotId, 'reply')], 1);
      return robot;
    } finally {
      stop();
    }
  }

  async observe(): Promise<RobotObservation> {
    if (!this.latest) {
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => {
          this.stateWaiters = this.stateWaiters.filter((f) => f !== done);
          reject(new Error(`no state from robot ${this.robotId} within ${this.timeoutMs} ms`));
        }, this.timeoutMs);
        const done = () => {
          clearTimeout(t);
          resolve();
        };
        this.stateWaiters.push(done);
      });
    }
    const l = this.latest!;
    const age = Date.now() - l.at;
    if (age > this.maxAgeMs) throw new Error(`state of robot ${this.robotId} is ${age} ms old (limit ${this.maxAgeMs} ms): link or robot down`);
    return l.obs;
  }

  async act(action: Float32Array): Promise<Float32Array> {
    const { low, high } = this.spec.action;
    if (action.length !== low.length) throw new Error(`robot ${this.robotId} takes ${low.length} action values, got ${action.length}`);
    const sent = new Float32Array(action.length);
    let clipped = false;
    for (let i = 0; i < action.length; i++) {
      const a = action[i];
      if (!Number.isFinite(a)) throw new Error(`action[${i}] of robot ${this.robotId} is ${a}`);
      sent[i] = Math.min(high[i], Math.max(low[i], a));
      if (sent[i] !== a) clipped = true;
    }
    if (clipped) this.events.emit('clipped', { requested: action, sent });
    const now = Date.now();
    const msg: CommandMsg = { type: 'command', session: this.session, seq: this.seq++, stamp: now, deadline: now + this.ttlMs, action: Array.from(sent) };
    await withTimeout(publish(this.client, robotTopic(this.robotId, 'cmd'), msg, { qos: 1 }), this.ttlMs, `command ${msg.seq} to robot ${this.robotId} not acknowledged by the broker`);
    return sent;
  }

  async reset(): Promise<RobotObservation> {
    const obs = await this.request('reset');
    if (!obs) throw new Error(`robot ${this.robotId} replied to reset without an observation`);
    this.latest = { obs, at: Date.now() };
    return obs;
  }

  async estop(): Promise<void> {
    await this.request('estop');
  }

  private async request(op: RequestMsg['op']): Promise<RobotObservation | undefined> {
    const id = randomUUID();
    const reply = new Promise<RobotObservation | undefined>((resolve, reject) => this.pending.set(id, { resolve, reject }));
    try {
      const now = Date.now();
      await publish(this.client, robotTopic(this.robotId, 'cmd'), { type: 'request', id, op, stamp: now, deadline: now + this.timeoutMs }, { qos: 1 });
      return await withTimeout(reply, this.timeoutMs, `${op} on robot ${this.robotId} got no reply`);
    } finally {
      this.pending.delete(id);
    }
  }

  /** Stops routing messages; the client belongs to the caller and stays open. */
  async [Symbol.asyncDispose](): Promise<void> {
    this.stopRouting();
    for (const p of this.pending.values()) p.reject(new Error(`robot ${this.robotId} disposed`));
    this.pending.clear();
  }
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${what} within ${ms} ms`)), ms);
    p.then(
      (v) => (clearTimeout(t), resolve(v)),
      (e) => (clearTimeout(t), reject(e)),
    );
  });
}

// ---------------------------------------------------------------- robot side

export type RefusalReason = 'stale' | 'duplicate' | 'estopped' | 'invalid';

export interface RobotServerStats {
  statesPublished: number;
  applied: number;
  refused: Record<RefusalReason, number>;
  estops: number;
  resets: number;
}

export interface RobotServer {
  stats: RobotServerStats;
  /** 'refused' ({reason, seq?, detail}): a command was not applied. */
  events: EventEmitter;
  stop(): Promise<void>;
}

export interface ServeOptions {
  /** Tolerated clock difference when checking command deadlines (default 0). */
  clockSkewMs?: number;
  /** A robot call (observe/act/reset/estop) or a publish failed. */
  onError: (err: Error) => void;
}

/**
 * Exposes `robot` on wmrl/robots/{robotId}/…: announces its spec (retained), publishes state at
 * spec.controlHz, applies fresh commands in order, answers reset/estop requests.
 * Errors surface through opts.onError.
 */
export async function serveRobotOverMqtt(robot: Robot, client: MqttClient, robotId: string, opts: ServeOptions): Promise<RobotServer> {
  const events = new EventEmitter();
  const stats: RobotServerStats = { statesPublished: 0, applied: 0, refused: { stale: 0, duplicate: 0, estopped: 0, invalid: 0 }, estops: 0, resets: 0 };
  const skew = opts.clockSkewMs ?? 0;
  const cmdTopic = robotTopic(robotId, 'cmd');
  const stateTopic = robotTopic(robotId, 'state');
  const replyTopic = robotTopic(robotId, 'reply');
  let session = '';
  let lastSeq = -1;
  let estopped = false;
  // Commands and requests run one at a time, in arrival order; e-stop jumps the queue.
  let chain: Promise<void> = Promise.resolve();
  const fail = (e: unknown): void => opts.onError(e instanceof Error ? e : new Error(String(e)));
  const refuse = (reason: RefusalReason, detail: string, seq?: number) => {
    stats.refused[reason]++;
    events.emit('refused', { reason, seq, detail });
  };

  const applyCommand = async (m: CommandMsg) => {
    if (estopped) return refuse('estopped', `command ${m.seq} refused: e-stop latched until reset`, m.seq);
    const now = Date.now();
    if (now > m.deadline + skew) return refuse('stale', `command ${m.seq} arrived ${now - m.deadline} ms past its deadline`, m.seq);
    // A new session (service restarted) restarts seq; its commands passed the deadline check above.
    if (m.session === session && m.seq <= lastSeq) return refuse('duplicate', `command ${m.seq} is not newer than ${lastSeq}`, m.seq);
    if (m.action.length !== robot.spec.action.low.length) return refuse('invalid', `command ${m.seq} has ${m.action.length} values, robot takes ${robot.spec.action.low.length}`, m.seq);
    session = m.session;
    lastSeq = m.seq;
    await robot.act(Float32Array.from(m.action));
    stats.applied++;
  };

  const answer = async (m: RequestMsg) => {
    try {
      if (m.op === 'estop') {
        stats.estops++;
        await robot.estop();
        await publish(client, replyTopic, { type: 'reply', id: m.id, op: 'estop', ok: true });
      } else if (Date.now() > m.deadline + skew) {
        // A reset moves the robot: one its caller has given up on must not run late.
        refuse('stale', `reset request ${m.id} arrived ${Date.now() - m.deadline} ms past its deadline`);
        await publish(client, replyTopic, { type: 'reply', id: m.id, op: 'reset', ok: false, error: 'stale reset request refused' });
      } else {
        const obs = await robot.reset();
        estopped = false;
        stats.resets++;
        await publish(client, replyTopic, { type: 'reply', id: m.id, op: 'reset', ok: true, obs: obsToWire(obs) });
      }
    } catch (e) {
      await publish(client, replyTopic, { type: 'reply', id: m.id, op: m.op, ok: false, error: (e as Error).message }).catch(fail);
      throw e;
    }
  };

  const stopRouting = onMessages(client, (t) => t === cmdTopic, (_t, r) => {
    if (!r.ok) return refuse('invalid', r.error);
    const m = r.msg;
    if (isRequest(m) && m.op === 'estop') {
      // Latch first, synchronously: commands already queued behind this one are refused.
      estopped = true;
      answer(m).catch(fail);
      return;
    }
    if (isCommand(m)) chain = chain.then(() => applyCommand(m)).catch(fail);
    else if (isRequest(m)) chain = chain.then(() => answer(m)).catch(fail);
  });

  await publish(client, robotTopic(robotId, 'spec'), { type: 'spec', robotId, spec: specToWire(robot.spec) }, { qos: 1, retain: true });
  await subscribe(client, cmdTopic, 1);

  let publishing = false;
  const timer = setInterval(() => {
    // A slow observe() skips ticks instead of piling them up; state is latest-wins, so none is
    // queued while the broker is unreachable.
    if (publishing || !client.connected) return;
    publishing = true;
    robot
      .observe()
      .then((obs) => publish(client, stateTopic, { type: 'state', ...obsToWire(obs) }, { qos: 0 }))
      .then(() => void stats.statesPublished++, fail)
      .finally(() => (publishing = false));
  }, 1000 / robot.spec.controlHz);

  return {
    stats,
    events,
    async stop() {
      clearInterval(timer);
      stopRouting();
      await chain;
    },
  };
}
