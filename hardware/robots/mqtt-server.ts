// The robot side of an MQTT link: exposes any Robot on wmrl/robots/{id}/… to an MqttRobot
// (mqtt.ts) on the service side. A command is applied only if it is fresh (its deadline on the
// sender's wall clock has not passed) and newer than the last one from the same session, so a
// QoS 1 command redelivered after a reconnect never moves the robot late. E-stop requests are
// never refused, and latch: motion commands are refused until reset.

import { EventEmitter } from 'node:events';
import type { MqttClient } from 'mqtt';
import { onMessages, publish, subscribe } from '../../bridge/mqtt/client.js';
import { obsToWire, specToWire } from '../../bridge/mqtt/convert.js';
import { isCommand, isRequest, type CommandMsg, type RequestMsg } from '../../bridge/mqtt/messages.js';
import { robotTopic } from '../../bridge/mqtt/topics.js';
import type { Robot } from '../types.js';

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
        const obs = await robot.reset(m.seed === undefined ? undefined : { seed: m.seed });
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
