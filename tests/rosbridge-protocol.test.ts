// Every rosbridge op over a real WebSocket: a malformed frame is refused with the schema's error
// (a status naming the op and the field, the caller's id echoed), the socket stays up, and a
// well-formed frame of the same op then does its job.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { fragment } from '../bridge/rosbridge/fragments.js';
import { GoalStatus, OPS, type Op } from '../bridge/rosbridge/protocol.js';
import { RosbridgeServer } from '../bridge/rosbridge/server.js';

type Frame = Record<string, unknown>;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A raw rosbridge client: everything it receives lands in `inbox`. */
class Peer {
  readonly inbox: Frame[] = [];
  private barriers = 0;
  private constructor(private readonly ws: WebSocket) {
    ws.on('message', (d) => this.inbox.push(JSON.parse(d.toString()) as Frame));
  }

  static async open(port: number): Promise<Peer> {
    const ws = new WebSocket(`ws://127.0.0.1:${port}`);
    await new Promise((r, j) => ws.once('open', r).once('error', j));
    return new Peer(ws);
  }

  send(frame: Frame): void {
    this.ws.send(JSON.stringify(frame));
  }

  /** The first message (from `inbox`, now or later) that matches, removed from the inbox. */
  async take(match: (m: Frame) => boolean, ms = 3000): Promise<Frame> {
    const end = Date.now() + ms;
    for (;;) {
      const i = this.inbox.findIndex(match);
      if (i >= 0) return this.inbox.splice(i, 1)[0]!;
      if (Date.now() > end) throw new Error(`no matching message within ${ms} ms; inbox: ${JSON.stringify(this.inbox).slice(0, 400)}`);
      await sleep(5);
    }
  }

  /**
   * Round trip through the server (a call to the local /ping service): frames are handled in
   * order, so every reply to what was sent before has arrived when this returns. Returns and
   * clears what arrived meanwhile.
   */
  async settle(): Promise<Frame[]> {
    const id = `barrier${this.barriers++}`;
    this.send({ op: 'call_service', id, service: '/ping' });
    await this.take((m) => m.op === 'service_response' && m.id === id);
    return this.inbox.splice(0);
  }

  get open(): boolean {
    return this.ws.readyState === WebSocket.OPEN;
  }

  close(): void {
    this.ws.close();
  }
}

describe('rosbridge protocol: every op, well-formed and malformed, over a real WebSocket', () => {
  const server = new RosbridgeServer({ port: 0 });
  let port = 0;
  const cmd: Frame[] = [];
  let publishLatched: (m: Frame) => void = () => {};
  const peers: Peer[] = [];
  const peer = async () => {
    const p = await Peer.open(port);
    peers.push(p);
    return p;
  };

  beforeAll(async () => {
    port = await server.listen();
    server.subscribe('/cmd', 'std_msgs/msg/Float64MultiArray', (m) => cmd.push(m));
    server.advertiseService('/ping', 'std_srvs/srv/Trigger', () => ({ success: true, message: 'pong' }));
    server.advertiseAction('/count', 'wmrl_msgs/action/Count', async (goal, ctx) => {
      const n = Number(goal.n);
      for (let i = 1; i <= n; i++) {
        if (ctx.signal.aborted) return { reached: i - 1 };
        ctx.feedback({ i });
        await sleep(5);
      }
      return { reached: n };
    });
    publishLatched = server.advertise('/latched', 'std_msgs/msg/String', { latch: true });
    publishLatched({ data: 'hello' });
  });
  afterAll(async () => {
    for (const p of peers) p.close();
    await server.close();
  });

  /** A client-advertised service /add (provider `a`), called by `b`; resolves with the forwarded call as `a` sees it. */
  async function forwardedCall(a: Peer, b: Peer, service: string): Promise<Frame> {
    a.send({ op: 'advertise_service', service, type: 'example/srv/Add' });
    expect(await a.settle()).toEqual([]);
    b.send({ op: 'call_service', id: 'b-call', service, args: { a: 1 } });
    return a.take((m) => m.op === 'call_service' && m.service === service);
  }

  /** A client-advertised action (provider `a`), goal sent by `b`; resolves with the goal as `a` sees it. */
  async function forwardedGoal(a: Peer, b: Peer, action: string): Promise<Frame> {
    a.send({ op: 'advertise_action', action, type: 'example/action/Double' });
    expect(await a.settle()).toEqual([]);
    b.send({ op: 'send_action_goal', id: 'b-goal', action, action_type: 'example/action/Double', args: { x: 21 } });
    return a.take((m) => m.op === 'send_action_goal' && m.action === action);
  }

  interface Case {
    /** Sent first; must come back as exactly one error status with `error` as its text. */
    malformed: Frame;
    error: string;
    /** Then the well-formed frame of the op, on the same socket, with a check that it did its job. */
    works(p: Peer): Promise<void>;
  }

  const cases: Record<Op, Case> = {
    advertise: {
      malformed: { op: 'advertise', id: 'adv1', topic: '/chatter', type: 5 },
      error: "advertise: field 'type' must be a string",
      async works(p) {
        p.send({ op: 'advertise', topic: '/chatter', type: 'std_msgs/msg/String' });
        expect(await p.settle()).toEqual([]);
        // Only an advertised topic can be published on, and it has the advertised type.
        const got: Frame[] = [];
        server.subscribe('/chatter', 'std_msgs/msg/String', (m) => got.push(m));
        p.send({ op: 'publish', topic: '/chatter', msg: { data: 'hi' } });
        expect(await p.settle()).toEqual([]);
        expect(got).toEqual([{ data: 'hi' }]);
      },
    },
    unadvertise: {
      malformed: { op: 'unadvertise', id: 'u1' },
      error: "unadvertise: missing field 'topic'",
      async works(p) {
        p.send({ op: 'advertise', topic: '/gone', type: 'std_msgs/msg/String' });
        p.send({ op: 'unadvertise', id: 'u2', topic: '/gone' });
        expect(await p.settle()).toEqual([]);
      },
    },
    publish: {
      malformed: { op: 'publish', topic: '/cmd', msg: [1] },
      error: "publish: field 'msg' must be an object",
      async works(p) {
        const before = cmd.length;
        p.send({ op: 'publish', topic: '/cmd', msg: { data: [1.5] } });
        expect(await p.settle()).toEqual([]);
        expect(cmd.slice(before)).toEqual([{ layout: { dim: [], data_offset: 0 }, data: [1.5] }]);
      },
    },
    subscribe: {
      malformed: { op: 'subscribe', id: 's1', topic: '/latched', throttle_rate: 0.5 },
      error: "subscribe: field 'throttle_rate' must be an integer",
      async works(p) {
        p.send({ op: 'subscribe', topic: '/latched', type: 'std_msgs/msg/String' });
        expect(await p.settle()).toEqual([{ op: 'publish', topic: '/latched', msg: { data: 'hello' } }]);
      },
    },
    unsubscribe: {
      malformed: { op: 'unsubscribe', topic: null },
      error: "unsubscribe: field 'topic' must be a string",
      async works(p) {
        p.send({ op: 'subscribe', topic: '/latched' });
        expect(await p.settle()).toHaveLength(1);
        p.send({ op: 'unsubscribe', topic: '/latched' });
        expect(await p.settle()).toEqual([]);
        publishLatched({ data: 'after unsubscribe' });
        expect(await p.settle()).toEqual([]);
        publishLatched({ data: 'hello' });
      },
    },
    call_service: {
      malformed: { op: 'call_service', id: 'c1', service: '/ping', args: 'x' },
      error: "call_service: field 'args' must be an object",
      async works(p) {
        p.send({ op: 'call_service', id: 'c2', service: '/ping', args: {} });
        expect(await p.take((m) => m.id === 'c2')).toEqual({ op: 'service_response', id: 'c2', service: '/ping', values: { success: true, message: 'pong' }, result: true });
      },
    },
    service_response: {
      malformed: { op: 'service_response', id: 'r1', service: '/add', result: 'yes' },
      error: "service_response: field 'result' must be a boolean",
      async works(a) {
        const b = await peer();
        const call = await forwardedCall(a, b, '/add');
        expect(call).toMatchObject({ args: { a: 1 }, id: expect.stringMatching(/^fwd/) });
        a.send({ op: 'service_response', id: call.id, service: '/add', values: { sum: 2 }, result: true });
        expect(await b.take((m) => m.op === 'service_response')).toEqual({ op: 'service_response', id: 'b-call', service: '/add', values: { sum: 2 }, result: true });
        a.send({ op: 'unadvertise_service', service: '/add' });
      },
    },
    advertise_service: {
      malformed: { op: 'advertise_service', service: '/add2' },
      error: "advertise_service: missing field 'type'",
      async works(a) {
        const b = await peer();
        expect(await forwardedCall(a, b, '/add2')).toMatchObject({ op: 'call_service', service: '/add2', args: { a: 1 } });
      },
    },
    unadvertise_service: {
      malformed: { op: 'unadvertise_service', service: ['/add3'] },
      error: "unadvertise_service: field 'service' must be a string",
      async works(a) {
        const b = await peer();
        await forwardedCall(a, b, '/add3');
        a.send({ op: 'unadvertise_service', service: '/add3' });
        expect(await a.settle()).toEqual([]);
        b.send({ op: 'call_service', id: 'again', service: '/add3' });
        expect(await b.take((m) => m.id === 'again')).toMatchObject({ result: false, values: 'service /add3 does not exist' });
      },
    },
    advertise_action: {
      malformed: { op: 'advertise_action', action: '/double', type: {} },
      error: "advertise_action: field 'type' must be a string",
      async works(a) {
        const b = await peer();
        expect(await forwardedGoal(a, b, '/double')).toMatchObject({ action_type: 'example/action/Double', args: { x: 21 }, id: expect.stringMatching(/^fwd/) });
      },
    },
    unadvertise_action: {
      malformed: { op: 'unadvertise_action' },
      error: "unadvertise_action: missing field 'action'",
      async works(a) {
        const b = await peer();
        await forwardedGoal(a, b, '/double2');
        a.send({ op: 'unadvertise_action', action: '/double2' });
        expect(await a.settle()).toEqual([]);
        b.send({ op: 'send_action_goal', id: 'late', action: '/double2', action_type: 'example/action/Double' });
        expect(await b.take((m) => m.id === 'late')).toMatchObject({ op: 'action_result', status: GoalStatus.ABORTED, result: false });
      },
    },
    send_action_goal: {
      malformed: { op: 'send_action_goal', action: '/count', action_type: 'wmrl_msgs/action/Count', args: { n: 1 } },
      error: "send_action_goal: missing field 'id'",
      async works(p) {
        p.send({ op: 'send_action_goal', id: 'g1', action: '/count', action_type: 'wmrl_msgs/action/Count', args: { n: 2 } });
        expect(await p.take((m) => m.op === 'action_result')).toEqual({ op: 'action_result', id: 'g1', action: '/count', values: { reached: 2 }, status: GoalStatus.SUCCEEDED, result: true });
        expect(p.inbox.filter((m) => m.op === 'action_feedback').map((m) => m.values)).toEqual([{ i: 1 }, { i: 2 }]);
      },
    },
    cancel_action_goal: {
      malformed: { op: 'cancel_action_goal', id: 7, action: '/count' },
      error: "cancel_action_goal: field 'id' must be a string",
      async works(p) {
        p.send({ op: 'send_action_goal', id: 'g2', action: '/count', action_type: 'wmrl_msgs/action/Count', args: { n: 100_000 }, feedback: false });
        await sleep(20);
        p.send({ op: 'cancel_action_goal', id: 'g2', action: '/count' });
        const r = await p.take((m) => m.op === 'action_result');
        expect(r).toMatchObject({ id: 'g2', status: GoalStatus.CANCELED });
        expect((r.values as { reached: number }).reached).toBeLessThan(100_000);
      },
    },
    action_feedback: {
      malformed: { op: 'action_feedback', id: 'g', action: '/double3' },
      error: "action_feedback: missing field 'values'",
      async works(a) {
        const b = await peer();
        const goal = await forwardedGoal(a, b, '/double3');
        a.send({ op: 'action_feedback', id: goal.id, action: '/double3', values: { p: 0.5 } });
        expect(await b.take((m) => m.op === 'action_feedback')).toEqual({ op: 'action_feedback', id: 'b-goal', action: '/double3', values: { p: 0.5 } });
      },
    },
    action_result: {
      malformed: { op: 'action_result', id: 'g', action: '/double4', values: {}, status: 'done', result: true },
      error: "action_result: field 'status' must be an integer",
      async works(a) {
        const b = await peer();
        const goal = await forwardedGoal(a, b, '/double4');
        a.send({ op: 'action_result', id: goal.id, action: '/double4', values: { y: 42 }, status: GoalStatus.SUCCEEDED, result: true });
        expect(await b.take((m) => m.op === 'action_result')).toEqual({ op: 'action_result', id: 'b-goal', action: '/double4', values: { y: 42 }, status: GoalStatus.SUCCEEDED, result: true });
      },
    },
    fragment: {
      malformed: { op: 'fragment', id: 'f1', data: 'x', num: -1, total: 2 },
      error: "fragment: field 'num' must be >= 0, got -1",
      async works(p) {
        const before = cmd.length;
        const frags = fragment('f2', JSON.stringify({ op: 'publish', topic: '/cmd', msg: { data: [7, 8, 9] } }), 20);
        expect(frags.length).toBeGreaterThan(2);
        for (const f of frags) p.send(f);
        expect(await p.settle()).toEqual([]);
        expect(cmd.slice(before).map((m) => m.data)).toEqual([[7, 8, 9]]);
      },
    },
    set_level: {
      malformed: { op: 'set_level', id: 'l1', level: 'loud' },
      error: "set_level: field 'level' must be 'info', 'warning', 'error' or 'none'",
      async works(p) {
        p.send({ op: 'set_level', id: 'l2', level: 'warning' });
        expect(await p.settle()).toEqual([]);
      },
    },
    auth: {
      malformed: { op: 'auth', client: 'c', dest: 'd', rand: 'r', t: 1, level: 'user', end: 2 },
      error: "auth: missing field 'mac'",
      async works(p) {
        // A server without a secret has nothing to check: a client configured with one still connects.
        p.send({ op: 'auth', mac: 'ab', client: 'c', dest: 'd', rand: 'r', t: 1, level: 'user', end: 2 });
        expect(await p.settle()).toEqual([]);
      },
    },
    status: {
      malformed: { op: 'status', level: 'info', msg: 3 },
      error: "status: field 'msg' must be a string",
      async works(p) {
        p.send({ op: 'status', level: 'info', msg: 'hello from the client' });
        expect(await p.settle()).toEqual([]);
      },
    },
  };

  it('the cases cover every op the protocol defines', () => {
    expect(Object.keys(cases).sort()).toEqual([...OPS].sort());
  });

  it.each(OPS.map((op) => [op]))('%s', async (op) => {
    const c = cases[op];
    const p = await peer();
    p.send(c.malformed);
    const replies = await p.settle();
    const id = typeof c.malformed.id === 'string' ? { id: c.malformed.id } : {};
    expect(replies).toEqual([{ op: 'status', level: 'error', msg: c.error, ...id }]);
    expect(p.open).toBe(true);
    await c.works(p);
  });
});
