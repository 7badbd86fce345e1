// The rosbridge v2 server with the real roslib client over a real WebSocket, and hostile input.
import fc from 'fast-check';
import { Action, Ros, Service, Topic } from 'roslib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { FragmentBuffer, fragment } from '../bridge/rosbridge/fragments.js';
import { parseFrame } from '../bridge/rosbridge/protocol.js';
import { RosbridgeServer } from '../bridge/rosbridge/server.js';
import { conform } from '../bridge/ros/msgs.js';
import { sleep, until } from './helpers/until.js';

async function rosClient(port: number): Promise<Ros> {
  const ros = new Ros({});
  const up = new Promise<void>((r) => ros.once('connection', () => r()));
  await ros.connect(`ws://127.0.0.1:${port}`);
  await up;
  return ros;
}

describe('rosbridge v2 server with roslib', () => {
  const server = new RosbridgeServer({ port: 0, fragments: { maxPending: 8, timeoutMs: 500 } });
  let port = 0;
  const received: Array<Record<string, unknown>> = [];
  beforeAll(async () => {
    port = await server.listen();
    server.subscribe('/cmd', 'std_msgs/msg/Float64MultiArray', (m) => received.push(m));
    server.advertiseService('/reset', 'std_srvs/srv/Trigger', () => ({ success: true, message: 'done' }));
    server.advertiseService('/broken', 'std_srvs/srv/Trigger', () => {
      throw new Error('robot is not homed');
    });
    server.advertiseAction('/count', 'wmrl_msgs/action/Count', async (goal, ctx) => {
      const n = Number(goal.n);
      for (let i = 1; i <= n; i++) {
        if (ctx.signal.aborted) return { reached: i - 1 };
        ctx.feedback({ i });
        await sleep(10);
      }
      return { reached: n };
    });
  });
  afterAll(() => server.close());

  it('publish and subscribe both ways, with messages conformed to their ROS 2 types', async () => {
    const ros = await rosClient(port);
    const pub = server.advertise('/joint_states', 'sensor_msgs/msg/JointState');
    const got: unknown[] = [];
    new Topic({ ros, name: '/joint_states', messageType: 'sensor_msgs/msg/JointState' }).subscribe((m) => got.push(m));
    new Topic({ ros, name: '/cmd', messageType: 'std_msgs/msg/Float64MultiArray' }).publish({ data: [0.5, -0.25] });
    await until(() => received.length === 1, 'the /cmd publish');
    expect(received[0]).toEqual({ layout: { dim: [], data_offset: 0 }, data: [0.5, -0.25] });
    await sleep(50);
    pub({ header: { stamp: { sec: 1, nanosec: 5 }, frame_id: '' }, name: ['a'], position: [1.5], velocity: [0], effort: [] });
    await until(() => got.length === 1, 'the /joint_states message');
    expect(got[0]).toMatchObject({ name: ['a'], position: [1.5] });
    ros.close();
  });

  it('services: results, errors and unknown services answer with the caller id', async () => {
    const ros = await rosClient(port);
    const call = (name: string) =>
      new Promise<string>((resolve) => new Service({ ros, name, serviceType: 'std_srvs/srv/Trigger' }).callService({}, (r) => resolve(`ok:${JSON.stringify(r)}`), (e) => resolve(`err:${e}`)));
    expect(await call('/reset')).toBe('ok:{"success":true,"message":"done"}');
    expect(await call('/broken')).toBe('err:robot is not homed');
    expect(await call('/nope')).toBe('err:service /nope does not exist');
    ros.close();
  });

  it('a client-advertised service is reachable from another client (call_service / service_response routed by id)', async () => {
    const provider = await rosClient(port);
    const caller = await rosClient(port);
    new Service<{ a: number }, { sum: number }>({ ros: provider, name: '/add', serviceType: 'example/srv/Add' }).advertise((req, res) => {
      res.sum = req.a + 1;
      return true;
    });
    await sleep(50);
    const r = await new Promise<unknown>((resolve, reject) => new Service({ ros: caller, name: '/add', serviceType: 'example/srv/Add' }).callService({ a: 41 }, resolve, reject));
    expect(r).toEqual({ sum: 42 });
    provider.close();
    caller.close();
  });

  it('actions: goal, feedback, result, and cancel', async () => {
    const ros = await rosClient(port);
    const act = new Action<{ n: number }, { i: number }, { reached: number }>({ ros, name: '/count', actionType: 'wmrl_msgs/action/Count' });
    const feedback: number[] = [];
    const result = await new Promise<{ reached: number }>((resolve, reject) => act.sendGoal({ n: 3 }, resolve, (f) => feedback.push(f.i), reject));
    expect(result).toEqual({ reached: 3 });
    expect(feedback).toEqual([1, 2, 3]);
    const outcome = new Promise<string>((resolve) => {
      const id = act.sendGoal({ n: 1000 }, () => resolve('succeeded'), undefined, (e) => resolve(String(e)));
      setTimeout(() => act.cancelGoal(id!), 60);
    });
    const msg = await outcome;
    expect(msg).toMatch(/canceled/i); // status CANCELED (5)
    expect(Number(/"reached":(\d+)/.exec(msg)?.[1])).toBeLessThan(1000);
    ros.close();
  });

  it('a client-advertised action is reachable from another client', async () => {
    const provider = await rosClient(port);
    const caller = await rosClient(port);
    const server2 = new Action<{ x: number }, { p: number }, { y: number }>({ ros: provider, name: '/double', actionType: 'example/action/Double' });
    server2.advertise((goal, id) => {
      server2.sendFeedback(id, { p: 0.5 });
      server2.setSucceeded(id, { y: goal.x * 2 });
    }, () => undefined);
    await sleep(50);
    const fb: number[] = [];
    const r = await new Promise<{ y: number }>((resolve, reject) =>
      new Action<{ x: number }, { p: number }, { y: number }>({ ros: caller, name: '/double', actionType: 'example/action/Double' }).sendGoal({ x: 21 }, resolve, (f) => fb.push(f.p), reject),
    );
    expect(r).toEqual({ y: 42 });
    expect(fb).toEqual([0.5]);
    provider.close();
    caller.close();
  });

  it('fragmented frames are reassembled; subscribers can ask for fragments', async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}`);
    await new Promise((r) => ws.once('open', r));
    const inbox: Array<Record<string, unknown>> = [];
    ws.on('message', (d) => inbox.push(JSON.parse(d.toString())));
    const before = received.length;
    const frame = JSON.stringify({ op: 'publish', topic: '/cmd', msg: { data: Array.from({ length: 500 }, (_, i) => i / 7) } });
    for (const f of fragment('big1', frame, 97).reverse()) ws.send(JSON.stringify(f));
    await until(() => received.length === before + 1, 'the reassembled publish');
    expect((received.at(-1)!.data as number[])[499]).toBeCloseTo(499 / 7, 12);
    ws.send(JSON.stringify({ op: 'subscribe', topic: '/cmd', fragment_size: 2000 }));
    await sleep(30);
    const other = await rosClient(port);
    const data = Array.from({ length: 700 }, (_, i) => i / 3);
    new Topic({ ros: other, name: '/cmd', messageType: 'std_msgs/msg/Float64MultiArray' }).publish({ data });
    await until(() => inbox.some((m) => m.op === 'fragment'), 'a first fragment');
    const frags = inbox.filter((m) => m.op === 'fragment') as Array<{ data: string; num: number; total: number }>;
    await until(() => inbox.filter((m) => m.op === 'fragment').length === frags[0]!.total, 'every fragment');
    expect(frags[0]!.total).toBeGreaterThan(2);
    const whole = JSON.parse(inbox.filter((m) => m.op === 'fragment').map((m) => m.data as string).join(''));
    expect(whole.msg.data).toEqual(data);
    ws.close();
    other.close();
  });

  it('fragment_size: 1 is raised to the 1024-character floor (with a warning), not a frame per character', async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}`);
    await new Promise((r) => ws.once('open', r));
    const inbox: Array<Record<string, unknown>> = [];
    ws.on('message', (d) => inbox.push(JSON.parse(d.toString())));
    ws.send(JSON.stringify({ op: 'subscribe', id: 's1', topic: '/cmd', fragment_size: 1 }));
    await until(() => inbox.length === 1, 'the fragment_size warning');
    expect(inbox[0]).toMatchObject({ op: 'status', level: 'warning', id: 's1', msg: expect.stringMatching(/fragment_size 1 raised to the minimum 1024/) });
    const other = await rosClient(port);
    const data = Array.from({ length: 400 }, (_, i) => i / 7);
    new Topic({ ros: other, name: '/cmd', messageType: 'std_msgs/msg/Float64MultiArray' }).publish({ data });
    const length = JSON.stringify({ op: 'publish', topic: '/cmd', msg: { layout: { dim: [], data_offset: 0 }, data } }).length;
    await until(() => inbox.some((m) => m.op === 'fragment'), 'a first fragment');
    const total = (inbox.find((m) => m.op === 'fragment') as { total: number }).total;
    await until(() => inbox.filter((m) => m.op === 'fragment').length === total, 'every fragment');
    await sleep(100);
    const frags = inbox.filter((m) => m.op === 'fragment') as Array<{ data: string }>;
    expect(frags.length).toBe(Math.ceil(length / 1024));
    expect(frags.length).toBeLessThan(length / 100);
    expect(frags.every((f) => f.data.length <= 1024)).toBe(true);
    expect(JSON.parse(frags.map((f) => f.data).join('')).msg.data).toEqual(data);
    ws.close();
    other.close();
  });

  it('≥ 10⁵ malformed frames over a real socket: no crash, bounded memory, incomplete fragments evicted, clear errors', async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}`);
    await new Promise((r) => ws.once('open', r));
    const errors: string[] = [];
    ws.on('message', (d) => {
      const m = JSON.parse(d.toString());
      if (m.op === 'status' && m.level === 'error') errors.push(m.msg);
    });
    const nasty: string[] = [
      '', 'null', '[]', '{', '{"op":', '"just a string"', '{"op":"publish"}', '{"op":"publish","topic":5,"msg":{}}',
      '{"op":"publish","topic":"/cmd","msg":{"data":["x"]}}', '{"op":"publish","topic":"/cmd","msg":{"data":[1],"extra":1}}',
      '{"op":"fragment","id":"f","data":"x","num":0,"total":1e12}', '{"op":"fragment","id":"f","data":"x","num":5,"total":2}',
      '{"op":"subscribe","topic":"/new"}', '{"op":"call_service","service":"/reset","args":[]}', '{"op":"send_action_goal","id":"g","action":"/none","action_type":"t"}',
      '['.repeat(5000) + ']'.repeat(5000), '{"op":"advertise","topic":"/cmd","type":"std_msgs/msg/String"}', '{"op":"unknown_op"}',
    ];
    const gen = fc.oneof(
      fc.constantFrom(...nasty),
      fc.string({ maxLength: 60 }),
      fc.json({ maxDepth: 4 }),
      fc.record({ op: fc.constantFrom('publish', 'subscribe', 'call_service', 'fragment', 'advertise', 'send_action_goal'), topic: fc.anything(), msg: fc.anything(), id: fc.anything() }).map((o) => JSON.stringify(o) ?? 'x'),
      fc.record({ id: fc.string({ maxLength: 8 }), num: fc.nat(100), total: fc.integer({ min: 1, max: 200 }) }).map((f) => JSON.stringify({ op: 'fragment', data: 'abc', ...f })),
    );
    const frames = fc.sample(gen, { numRuns: 100_000, seed: 4242 });
    const heap0 = process.memoryUsage().heapUsed;
    const start = server.stats.framesIn;
    for (let i = 0; i < frames.length; i++) {
      ws.send(frames[i]!);
      if (i % 2000 === 1999) await until(() => server.stats.framesIn - start >= i - 500, 'the server reading the flood', 20_000);
    }
    ws.send(JSON.stringify({ op: 'publish', topic: '/cmd', msg: { data: [42] } }));
    const before = received.length;
    await until(() => received.length > before && (received.at(-1)!.data as number[])[0] === 42, 'the publish after the flood', 30_000);
    expect(server.stats.framesIn - start).toBeGreaterThanOrEqual(100_000);
    expect(errors.length).toBeGreaterThan(10_000);
    for (const e of errors.slice(0, 500)) expect(e).toMatch(/\S{3,}/);
    expect(errors.some((e) => /exceeds the 10000-fragment limit/.test(e))).toBe(true);
    expect(errors.some((e) => /nests deeper than 64 levels/.test(e))).toBe(true);
    expect(errors.some((e) => /data\[0\] must be a number/.test(e))).toBe(true);
    const pending = server.pendingFragments();
    expect(pending.messages).toBeLessThanOrEqual(8);
    expect(server.stats.fragmentsEvicted).toBeGreaterThan(100);
    expect(process.memoryUsage().heapUsed - heap0).toBeLessThan(200 * 1024 * 1024);
    await sleep(600);
    ws.send(JSON.stringify({ op: 'fragment', id: 'late', data: 'x', num: 0, total: 3 }));
    await sleep(50);
    expect(server.pendingFragments().messages).toBe(1); // everything older than the timeout is gone
    ws.close();
  }, 120_000);
});

describe('clients serving each other', () => {
  type Frame = Record<string, unknown>;
  async function raw(port: number): Promise<{ ws: WebSocket; inbox: Frame[]; send(f: Frame): void }> {
    const ws = new WebSocket(`ws://127.0.0.1:${port}`);
    const inbox: Frame[] = [];
    ws.on('message', (d) => inbox.push(JSON.parse(d.toString()) as Frame));
    await new Promise((r, j) => ws.once('open', r).once('error', j));
    return { ws, inbox, send: (f) => ws.send(JSON.stringify(f)) };
  }

  it("only the client a forwarded call went to may answer it; a live client's service or action cannot be taken over", async () => {
    const server = new RosbridgeServer({ port: 0 });
    const port = await server.listen();
    const [provider, caller, spoofer] = [await raw(port), await raw(port), await raw(port)];
    try {
      provider.send({ op: 'advertise_service', service: '/check_pin', type: 'std_srvs/srv/Trigger' });
      provider.send({ op: 'advertise_action', action: '/move', type: 'example/action/Move' });
      await sleep(50);
      caller.send({ op: 'call_service', id: 'c1', service: '/check_pin', args: {} });
      caller.send({ op: 'send_action_goal', id: 'g1', action: '/move', action_type: 'example/action/Move', args: {} });
      await until(() => provider.inbox.length === 2, 'the call and the goal at the provider');
      const [call, goal] = provider.inbox as [Frame, Frame];
      spoofer.send({ op: 'service_response', id: call.id as string, service: '/check_pin', values: { success: true, message: 'spoofed' }, result: true });
      spoofer.send({ op: 'action_feedback', id: goal.id as string, action: '/move', values: { p: 1 } });
      spoofer.send({ op: 'action_result', id: goal.id as string, action: '/move', values: { done: true }, status: 4, result: true });
      await until(() => spoofer.inbox.length === 3, "the spoofer's three errors");
      expect(spoofer.inbox.map((m) => m.msg)).toEqual([`service_response for unknown call ${call.id}`, `action_feedback for unknown goal ${goal.id}`, `action_result for unknown goal ${goal.id}`]);
      expect(caller.inbox).toEqual([]);
      provider.send({ op: 'service_response', id: call.id as string, service: '/check_pin', values: { success: false, message: 'wrong pin' }, result: true });
      provider.send({ op: 'action_result', id: goal.id as string, action: '/move', values: { done: false }, status: 6, result: true });
      await until(() => caller.inbox.length === 2, "the provider's answers at the caller");
      expect(caller.inbox).toEqual([
        { op: 'service_response', id: 'c1', service: '/check_pin', values: { success: false, message: 'wrong pin' }, result: true },
        { op: 'action_result', id: 'g1', action: '/move', values: { done: false }, status: 6, result: true },
      ]);

      spoofer.send({ op: 'advertise_service', service: '/check_pin', type: 'std_srvs/srv/Trigger' });
      spoofer.send({ op: 'advertise_action', action: '/move', type: 'example/action/Move' });
      await until(() => spoofer.inbox.length === 5, "the spoofer's two advertise errors");
      expect(spoofer.inbox.slice(3).map((m) => [m.level, m.msg])).toEqual([
        ['error', 'advertise_service: /check_pin is provided by another client; it must unadvertise it or disconnect first'],
        ['error', 'advertise_action: /move is provided by another client; it must unadvertise it or disconnect first'],
      ]);
      caller.send({ op: 'call_service', id: 'c2', service: '/check_pin', args: {} });
      await until(() => provider.inbox.length === 3, 'c2 at the provider');
      expect(spoofer.inbox.filter((m) => m.op === 'call_service')).toEqual([]);

      // The provider leaves with c2 unanswered: the caller hears so, and the name is free again.
      provider.ws.close();
      await until(() => caller.inbox.length === 3, 'the caller told the provider left');
      expect(caller.inbox[2]).toEqual({ op: 'service_response', id: 'c2', service: '/check_pin', values: '/check_pin: its provider disconnected before answering', result: false });
      spoofer.send({ op: 'advertise_service', service: '/check_pin', type: 'std_srvs/srv/Trigger' });
      caller.send({ op: 'call_service', id: 'c3', service: '/check_pin', args: {} });
      await until(() => spoofer.inbox.some((m) => m.op === 'call_service'), 'c3 at the spoofer');
      expect(spoofer.inbox.length).toBe(6);
    } finally {
      for (const c of [provider, caller, spoofer]) c.ws.close();
      await server.close();
    }
  });
});

describe('oversized frames', () => {
  it('a frame over the limit is refused with a clear error; one over the socket cap closes only that socket', async () => {
    const server = new RosbridgeServer({ port: 0, limits: { maxFrameLength: 1024 * 1024 } });
    const port = await server.listen();
    try {
      const ws = new WebSocket(`ws://127.0.0.1:${port}`);
      await new Promise((r) => ws.once('open', r));
      const errors: string[] = [];
      ws.on('message', (d) => errors.push(JSON.parse(d.toString()).msg));
      ws.send(JSON.stringify({ op: 'publish', topic: '/x', msg: { data: 'y'.repeat(1024 * 1024) } }));
      await until(() => errors.length === 1, 'the frame-limit error');
      expect(errors[0]).toMatch(/frame of \d+ bytes exceeds the 1048576-byte limit/);
      const closed = new Promise<number>((r) => ws.once('close', (code) => r(code)));
      ws.send('z'.repeat(3 * 1024 * 1024)); // beyond the socket's max payload (2× the frame limit)
      expect(await closed).toBe(1009);
      const again = await rosClient(port); // the server is still serving
      expect(again.isConnected).toBe(true);
      again.close();
    } finally {
      await server.close();
    }
  });
});

describe('protocol pieces', () => {
  it('parseFrame names the problem', () => {
    expect(parseFrame('{"op":"subscribe"}')).toEqual({ ok: false, error: "subscribe: missing field 'topic'" });
    expect(parseFrame('{"op":"publish","topic":"/a","msg":[]}')).toMatchObject({ ok: false, error: "publish: field 'msg' must be an object" });
    expect(parseFrame('x'.repeat(100), { maxFrameLength: 50, maxDepth: 8 })).toMatchObject({ ok: false, error: 'frame of 100 bytes exceeds the 50-byte limit' });
    expect(parseFrame('{"op":"call_service","id":"7","service":3}')).toEqual({ ok: false, error: "call_service: field 'service' must be a string", id: '7' });
    // clients send null for an absent optional field as often as they leave it out
    expect(parseFrame('{"op":"subscribe","topic":"/a","type":null,"throttle_rate":null}')).toMatchObject({ ok: true, msg: { op: 'subscribe', topic: '/a' } });
    expect(parseFrame('{"op":"subscribe","topic":null}')).toMatchObject({ ok: false, error: "subscribe: field 'topic' must be a string" });
  });

  it('fragment buffer: reassembles out of order, bounds totals and pending messages, expires old ones', () => {
    let t = 0;
    const b = new FragmentBuffer({ maxFragments: 10, maxMessageLength: 20, maxPending: 2, timeoutMs: 100 }, () => t);
    expect(b.add('a', 1, 2, 'lo')).toEqual({ done: false });
    expect(b.add('a', 0, 2, 'hel')).toEqual({ done: true, text: 'hello' });
    expect(b.add('x', 0, 11, 'q')).toMatchObject({ done: false, error: expect.stringMatching(/exceeds the 10-fragment limit/) });
    b.add('p', 0, 3, 'a');
    b.add('q', 0, 3, 'a');
    b.add('r', 0, 3, 'a');
    expect(b.size).toBe(2);
    expect(b.add('s', 0, 2, 'x'.repeat(21))).toMatchObject({ error: expect.stringMatching(/exceeds 20 bytes/) });
    t = 1000;
    b.expire();
    expect(b.size).toBe(0);
    expect(b.evicted).toBeGreaterThanOrEqual(3);
  });

  it('conform fills defaults and rejects wrong types with the field path', () => {
    expect(conform('sensor_msgs/msg/JointState', { name: ['a'] })).toMatchObject({ ok: true, value: { position: [], header: { stamp: { sec: 0, nanosec: 0 } } } });
    expect(conform('trajectory_msgs/msg/JointTrajectory', { points: [{ positions: [1, 'x'] }] })).toEqual({ ok: false, error: 'trajectory_msgs/msg/JointTrajectory: points[0].positions[1] must be a number (float64)' });
    expect(conform('std_msgs/msg/Header', { stamp: { sec: 1.5 } })).toEqual({ ok: false, error: 'std_msgs/msg/Header: stamp.sec must be a int32, got 1.5' });
    expect(conform('sensor_msgs/msg/CompressedImage', { data: 'AAEC' })).toMatchObject({ ok: true, value: { data: [0, 1, 2] } });
  });
});
