// A Robot reached over MQTT: the service side of the link (the robot side is mqtt-server.ts).
//
//   service: MqttRobot ── cmd (command | request) ──▶ broker ──▶ serveRobotOverMqtt ── Robot
//            ◀── state (QoS 0, control rate), outcome (each step, where announced), reply, spec (retained) ──
//
// Commands carry a per-sender session id, a seq and a deadline on the sender's wall clock
// (clocks NTP-synchronized): the robot side applies a command only if it is fresh and newer
// than the last one, so a QoS 1 command redelivered after a reconnect never moves the robot
// late. E-stop requests are never refused, and latch: motion commands are refused until reset.

import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { MqttClient } from 'mqtt';
import { onMessages, publish, subscribe } from '../../bridge/mqtt/client.js';
import { obsFromWire, specFromWire } from '../../bridge/mqtt/convert.js';
import { isOutcome, isReply, isSpec, isState, type CommandMsg, type OutcomeMsg, type RequestMsg } from '../../bridge/mqtt/messages.js';
import { robotTopic } from '../../bridge/mqtt/topics.js';
import type { RobotObservation, RobotDeclaration } from '../../common/robot.js';
import { checkObservation, layoutOf, type ObservationLayout } from '../../common/layout.js';
import { resetSeed, type ResetOptions, type Robot } from '../types.js';

export interface MqttRobotOptions {
  /** How long a command stays valid after it is sent (default: 3 control periods, at least 50 ms). */
  commandTtlMs?: number;
  /** observe() rejects when the newest state is older than this (default: 10 control periods, at least 500 ms). */
  maxStateAgeMs?: number;
  /** Timeout of reset()/estop(), of waiting for the spec or first state, and for a step's outcome (default 5000 ms). */
  requestTimeoutMs?: number;
}

/** What outcomeOfLastCommand() gives: the step's reward, success, and whether the episode ended there. */
export interface MqttStepOutcome {
  reward: number;
  success: boolean;
  done: boolean;
}

export class MqttRobot implements Robot {
  readonly spec: RobotDeclaration;
  /** Clipping events: the policy asked for more than the action limits allow. */
  readonly events = new EventEmitter();
  private readonly session = randomUUID();
  private seq = 0;
  private latest: { obs: RobotObservation; at: number } | undefined;
  private stateWaiters: Array<() => void> = [];
  private outcome: OutcomeMsg | null = null;
  /** Outcomes received, and how many had been when the last command was sent. */
  private outcomes = 0;
  private outcomesAtCommand = 0;
  private readonly outcomeWaiters = new Set<() => void>();
  private readonly pending = new Map<string, { resolve: (obs?: RobotObservation) => void; reject: (e: Error) => void }>();
  private readonly stopRouting: () => void;
  private readonly ttlMs: number;
  private readonly maxAgeMs: number;
  private readonly timeoutMs: number;
  private disposed = false;
  /** The observation layout its spec declares; every state and reset observation is checked against it. */
  readonly layout: ObservationLayout;

  private constructor(
    private readonly client: MqttClient,
    readonly robotId: string,
    spec: RobotDeclaration,
    /** The robot publishes each control step's outcome (its spec announcement says so): its episodes can be scored. */
    readonly reportsOutcome: boolean,
    opts: MqttRobotOptions,
  ) {
    this.spec = spec;
    this.layout = layoutOf(spec);
    const period = 1000 / spec.controlHz;
    this.ttlMs = opts.commandTtlMs ?? Math.max(50, 3 * period);
    this.maxAgeMs = opts.maxStateAgeMs ?? Math.max(500, 10 * period);
    this.timeoutMs = opts.requestTimeoutMs ?? 5000;
    const stateTopic = robotTopic(robotId, 'state');
    const replyTopic = robotTopic(robotId, 'reply');
    const outcomeTopic = robotTopic(robotId, 'outcome');
    this.stopRouting = onMessages(
      client,
      (t) => t === stateTopic || t === replyTopic || t === outcomeTopic,
      (_topic, r) => {
        if (!r.ok) return void this.events.emit('invalid', r.error);
        const m = r.msg;
        if (isState(m)) {
          this.latest = { obs: obsFromWire(m), at: Date.now() };
          const w = this.stateWaiters;
          this.stateWaiters = [];
          for (const f of w) f();
        } else if (isOutcome(m)) {
          this.outcome = m;
          this.outcomes++;
          for (const f of [...this.outcomeWaiters]) f();
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
    const spec = new Promise<{ spec: RobotDeclaration; outcome: boolean }>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`no spec from robot ${robotId} on ${specTopic} within ${timeoutMs} ms`)), timeoutMs);
      stop = onMessages(client, (topic) => topic === specTopic, (_topic, r) => {
        if (!r.ok || !isSpec(r.msg)) return reject(new Error(r.ok ? `unexpected message on ${specTopic}` : r.error));
        clearTimeout(t);
        resolve({ spec: specFromWire(r.msg.spec), outcome: r.msg.outcome === true });
      });
    });
    try {
      await subscribe(client, specTopic, 1);
      const s = await spec;
      const robot = new MqttRobot(client, robotId, s.spec, s.outcome, opts);
      await subscribe(client, [robotTopic(robotId, 'state'), robotTopic(robotId, 'reply'), ...(s.outcome ? [robotTopic(robotId, 'outcome')] : [])], 1);
      return robot;
    } finally {
      stop();
    }
  }

  /**
   * The broker connection is up and the robot's newest state is fresh (no older than observe() accepts): a robot
   * process that dies stops publishing while the broker stays up, so the state's age is what shows it gone.
   */
  get isConnected(): boolean {
    return !this.disposed && this.client.connected && this.latest !== undefined && Date.now() - this.latest.at <= this.maxAgeMs;
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
    checkObservation(this.layout, l.obs, `robot ${this.robotId}`);
    return l.obs;
  }

  async act(action: Float32Array): Promise<Float32Array> {
    this.assertOpen();
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
    this.outcomesAtCommand = this.outcomes;
    const now = Date.now();
    const msg: CommandMsg = { type: 'command', session: this.session, seq: this.seq++, stamp: now, deadline: now + this.ttlMs, action: Array.from(sent) };
    await withTimeout(publish(this.client, robotTopic(this.robotId, 'cmd'), msg, { qos: 1 }), this.ttlMs, `command ${msg.seq} to robot ${this.robotId} not acknowledged by the broker`);
    return sent;
  }

  /**
   * The robot's outcome (reward, success, episode end) of the first control step it reports after the last command was
   * sent: the step that applied it. Rejects once the robot's state stops arriving (link or robot down) or after the
   * request timeout, and for a robot that announces no outcomes.
   */
  async outcomeOfLastCommand(): Promise<MqttStepOutcome> {
    if (!this.reportsOutcome) throw new Error(`robot ${this.robotId} reports no outcome of its steps (its spec announcement does not say outcome: true)`);
    const since = this.outcomesAtCommand;
    await new Promise<void>((resolve, reject) => {
      const end = Date.now() + this.timeoutMs;
      const finish = (e?: Error) => {
        clearInterval(poll);
        this.outcomeWaiters.delete(check);
        if (e) reject(e);
        else resolve();
      };
      const check = () => {
        if (this.outcomes > since) finish();
        else if (this.disposed) finish(new Error(`robot ${this.robotId} disposed`));
        else if (!this.isConnected) finish(new Error(`robot ${this.robotId}: its state stopped arriving (link or robot down) before it reported the outcome of the last command`));
        else if (Date.now() > end) finish(new Error(`robot ${this.robotId} reported no outcome of the last command within ${this.timeoutMs} ms`));
      };
      // Polled too: a robot that goes silent sends nothing that would wake this up.
      const poll = setInterval(check, 20);
      this.outcomeWaiters.add(check);
      check();
    });
    const o = this.outcome!;
    return { reward: o.reward, success: o.success, done: o.terminated || o.truncated };
  }

  /** A seed travels in the reset request; a robot that cannot honour it refuses the reset. */
  async reset(options?: ResetOptions): Promise<RobotObservation> {
    const seed = resetSeed(this.spec.name, options);
    const obs = await this.request('reset', seed);
    if (!obs) throw new Error(`robot ${this.robotId} replied to reset without an observation`);
    checkObservation(this.layout, obs, `robot ${this.robotId}`);
    this.latest = { obs, at: Date.now() };
    return obs;
  }

  async estop(): Promise<void> {
    await this.request('estop');
  }

  private async request(op: RequestMsg['op'], seed?: number): Promise<RobotObservation | undefined> {
    this.assertOpen();
    const id = randomUUID();
    const reply = new Promise<RobotObservation | undefined>((resolve, reject) => this.pending.set(id, { resolve, reject }));
    const now = Date.now();
    const sent = publish(this.client, robotTopic(this.robotId, 'cmd'), { type: 'request', id, op, ...(seed === undefined ? {} : { seed }), stamp: now, deadline: now + this.timeoutMs }, { qos: 1 });
    try {
      // Publish and reply awaited together: a dispose while the publish is still in flight rejects
      // the reply, and that rejection must reach this caller, not become an unhandled one.
      const [, obs] = await withTimeout(Promise.all([sent, reply]), this.timeoutMs, `${op} on robot ${this.robotId} got no reply`);
      return obs;
    } finally {
      this.pending.delete(id);
    }
  }

  private assertOpen(): void {
    if (this.disposed) throw new Error(`robot ${this.robotId} disposed`);
  }

  /**
   * Stops routing messages; reset()/estop() still waiting for a reply reject with "robot … disposed",
   * and later calls throw it. The client belongs to the caller and stays open.
   */
  async [Symbol.asyncDispose](): Promise<void> {
    this.disposed = true;
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
