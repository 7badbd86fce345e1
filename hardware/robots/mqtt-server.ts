// The robot side of an MQTT link: exposes any Robot on wmrl/robots/{id}/… to an MqttRobot
// (mqtt.ts) on the service side. A command is applied only if it is fresh (its deadline on the
// sender's wall clock has not passed) and newer than the last one from the same session, so a
// QoS 1 command redelivered after a reconnect never moves the robot late. Whatever arrives goes
// through the safety layer (hardware/safety.ts: range, joint and change limits, watchdog, episode
// cap) and a rate cap, as on every other robot path: the broker's logins are not the only guard.
// E-stop requests are never refused, and latch: motion and reset requests are refused until an
// operator at the robot calls clearEstop(); nothing that arrives over MQTT clears it.

import { EventEmitter } from 'node:events';
import type { MqttClient } from 'mqtt';
import { onMessages, publish, subscribe } from '../../bridge/mqtt/client.js';
import { obsToWire, specToWire } from '../../bridge/mqtt/convert.js';
import { isCommand, isRequest, type CommandMsg, type RequestMsg } from '../../bridge/mqtt/messages.js';
import { robotTopic } from '../../bridge/mqtt/topics.js';
import { DEFAULT_SAFETY, SafetyLayer, SafetyStop, type InterventionEvent, type SafetyConfig } from '../safety.js';
import type { Robot } from '../types.js';

/** rate: over the command rate cap; timeout: the safety layer's episode cap has passed (reset to go on). */
export type RefusalReason = 'stale' | 'duplicate' | 'estopped' | 'invalid' | 'rate' | 'timeout';

export interface RobotServerStats {
  statesPublished: number;
  applied: number;
  refused: Record<RefusalReason, number>;
  estops: number;
  resets: number;
}

/** The outcome of one control step, as the robot side reports it (wmrl/robots/{id}/outcome). */
export interface StepOutcomeReport {
  /** Control steps since the episode's reset. */
  t: number;
  reward: number;
  success: boolean;
  terminated: boolean;
  truncated: boolean;
}

export interface RobotServer {
  stats: RobotServerStats;
  /**
   * Publishes the outcome of the control step the robot just took (a robot served with `reportsOutcome`, which its spec
   * announces): call it after every step, so the service scores each command by the step that applied it.
   */
  outcome(o: StepOutcomeReport): void;
  /** The safety layer every command passes through (its `counts` say what it clamped). */
  safety: SafetyLayer;
  /** Releases a latched e-stop: an operator's action at the robot, never a message. */
  clearEstop(): void;
  /** 'refused' ({reason, seq?, detail}): a command was not applied. */
  events: EventEmitter;
  stop(): Promise<void>;
}

export interface ServeOptions {
  /** Tolerated clock difference when checking command deadlines (default 0). */
  clockSkewMs?: number;
  /** Limits of the robot-side safety layer (default DEFAULT_SAFETY); unused when `robot` already is a SafetyLayer. */
  safety?: SafetyConfig;
  /** The robot-side watchdog (default on): holds the robot when commands stop arriving. */
  watchdog?: boolean;
  /** Interventions of the robot-side safety layer. */
  log?: (e: InterventionEvent) => void;
  /** The robot reports each control step's outcome through the server's `outcome()`; its spec announces it (default false). */
  reportsOutcome?: boolean;
  /** Most commands applied per second (default twice the robot's control rate); more are refused as 'rate'. */
  maxCommandHz?: number;
  /** Commands that may arrive at once, e.g. bunched by the network (default 10). */
  commandBurst?: number;
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
  const stats: RobotServerStats = { statesPublished: 0, applied: 0, refused: { stale: 0, duplicate: 0, estopped: 0, invalid: 0, rate: 0, timeout: 0 }, estops: 0, resets: 0 };
  const ownLayer = !(robot instanceof SafetyLayer);
  const safety = robot instanceof SafetyLayer ? robot : new SafetyLayer(robot, opts.safety ?? DEFAULT_SAFETY, { watchdog: opts.watchdog !== false, log: opts.log });
  const maxHz = opts.maxCommandHz ?? 2 * safety.spec.controlHz;
  const burst = opts.commandBurst ?? 10;
  if (!(maxHz > 0) || !(burst >= 1)) throw new Error(`serveRobotOverMqtt: maxCommandHz ${maxHz} must be > 0 and commandBurst ${burst} ≥ 1`);
  // Token bucket: `burst` commands at once, refilled at maxHz.
  let tokens = burst;
  let refilledAt = performance.now();
  const skew = opts.clockSkewMs ?? 0;
  const cmdTopic = robotTopic(robotId, 'cmd');
  const stateTopic = robotTopic(robotId, 'state');
  const replyTopic = robotTopic(robotId, 'reply');
  const outcomeTopic = robotTopic(robotId, 'outcome');
  let session = '';
  let lastSeq = -1;
  // Commands and requests run one at a time, in arrival order; e-stop jumps the queue.
  let chain: Promise<void> = Promise.resolve();
  const fail = (e: unknown): void => opts.onError(e instanceof Error ? e : new Error(String(e)));
  const refuse = (reason: RefusalReason, detail: string, seq?: number) => {
    stats.refused[reason]++;
    events.emit('refused', { reason, seq, detail });
  };

  const applyCommand = async (m: CommandMsg) => {
    if (safety.isEstopped) return refuse('estopped', `command ${m.seq} refused: e-stop latched until an operator clears it at the robot`, m.seq);
    const now = Date.now();
    if (now > m.deadline + skew) return refuse('stale', `command ${m.seq} arrived ${now - m.deadline} ms past its deadline`, m.seq);
    // A new session (service restarted) restarts seq; its commands passed the deadline check above.
    if (m.session === session && m.seq <= lastSeq) return refuse('duplicate', `command ${m.seq} is not newer than ${lastSeq}`, m.seq);
    if (m.action.length !== safety.spec.action.low.length) return refuse('invalid', `command ${m.seq} has ${m.action.length} values, robot takes ${safety.spec.action.low.length}`, m.seq);
    const t = performance.now();
    tokens = Math.min(burst, tokens + ((t - refilledAt) / 1000) * maxHz);
    refilledAt = t;
    if (tokens < 1) return refuse('rate', `command ${m.seq} refused: more than ${maxHz} commands/s`, m.seq);
    tokens -= 1;
    session = m.session;
    lastSeq = m.seq;
    try {
      // No stamp: the deadline above already judged freshness on the sender's clock.
      await safety.act(Float32Array.from(m.action));
    } catch (e) {
      if (e instanceof SafetyStop) return refuse(e.reason === 'estop' ? 'estopped' : 'timeout', `command ${m.seq} refused: ${e.message}`, m.seq);
      throw e;
    }
    stats.applied++;
  };

  const answer = async (m: RequestMsg) => {
    try {
      if (m.op === 'estop') {
        stats.estops++;
        // Latches synchronously, before the first await: commands queued behind it are refused.
        await safety.estop('e-stop request over MQTT');
        await publish(client, replyTopic, { type: 'reply', id: m.id, op: 'estop', ok: true });
      } else if (Date.now() > m.deadline + skew) {
        // A reset moves the robot: one its caller has given up on must not run late.
        refuse('stale', `reset request ${m.id} arrived ${Date.now() - m.deadline} ms past its deadline`);
        await publish(client, replyTopic, { type: 'reply', id: m.id, op: 'reset', ok: false, error: 'stale reset request refused' });
      } else if (safety.isEstopped) {
        refuse('estopped', `reset request ${m.id} refused: e-stop latched until an operator clears it at the robot`);
        await publish(client, replyTopic, { type: 'reply', id: m.id, op: 'reset', ok: false, error: `robot ${robotId}: e-stop latched; a reset over MQTT does not clear it, an operator at the robot must` });
      } else {
        const obs = await safety.reset(m.seed === undefined ? undefined : { seed: m.seed });
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
      // answer() latches first, synchronously: commands already queued behind this one are refused.
      answer(m).catch(fail);
      return;
    }
    if (isCommand(m)) chain = chain.then(() => applyCommand(m)).catch(fail);
    else if (isRequest(m)) chain = chain.then(() => answer(m)).catch(fail);
  });

  await publish(client, robotTopic(robotId, 'spec'), { type: 'spec', robotId, ...(opts.reportsOutcome ? { outcome: true } : {}), spec: specToWire(safety.spec) }, { qos: 1, retain: true });
  await subscribe(client, cmdTopic, 1);

  let publishing = false;
  const timer = setInterval(() => {
    // A slow observe() skips ticks instead of piling them up; state is latest-wins, so none is
    // queued while the broker is unreachable.
    if (publishing || !client.connected) return;
    publishing = true;
    safety
      .observe()
      .then((obs) => publish(client, stateTopic, { type: 'state', ...obsToWire(obs) }, { qos: 0 }))
      .then(() => void stats.statesPublished++, fail)
      .finally(() => (publishing = false));
  }, 1000 / safety.spec.controlHz);

  return {
    stats,
    events,
    safety,
    outcome(o) {
      if (!opts.reportsOutcome) throw new Error(`robot ${robotId}: served without reportsOutcome, so its spec does not announce outcomes; serve it with reportsOutcome: true`);
      // Latest-wins like the state: an outcome is not queued while the broker is unreachable.
      if (!client.connected) return;
      publish(client, outcomeTopic, { type: 'outcome', stamp: Date.now(), ...o }, { qos: 0 }).catch(fail);
    },
    clearEstop: () => safety.clearEstop(),
    async stop() {
      clearInterval(timer);
      stopRouting();
      await chain;
      if (ownLayer) safety.stopWatchdog();
    },
  };
}
