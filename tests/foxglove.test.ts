// The Foxglove WebSocket endpoint, seen by @foxglove/ws-protocol's own client over a real WebSocket: it advertises the
// ROS 2 topics (/joint_states, /tf, /robot_description in CDR with ros2msg schemas), the imagined rollouts as a
// foxglove.SceneUpdate and the JSON channels; a subscriber decodes JointState and TFMessage with
// @foxglove/rosmsg2-serialization from the advertised schemas, receives joint states at the control rate, and each
// new subscriber of /robot_description gets the URDF once (latched).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from '@foxglove/rosmsg';
import { MessageReader } from '@foxglove/rosmsg2-serialization';
import { WebSocket } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FoxgloveClient } from '../server/foxglove-protocol.js';
import { startService, type Service } from '../server/service.js';

const URDF = 'sim/assets/reach/robot.urdf';
const dir = mkdtempSync(join(tmpdir(), 'wmrl-foxglove-'));
let svc: Service;
beforeAll(async () => {
  svc = await startService({ dataDir: dir, port: 0, foxglovePort: 0, mqttPort: null, robots: [{ id: 'sim', task: 'reach', profile: 'gap', urdf: URDF }] });
});
afterAll(async () => {
  await svc?.close();
  rmSync(dir, { recursive: true, force: true });
});

interface Channel {
  id: number;
  topic: string;
  encoding: string;
  schemaName: string;
  schema: string;
  schemaEncoding?: string;
}

async function connect(): Promise<{ client: InstanceType<typeof FoxgloveClient>; ws: WebSocket; channels: Channel[] }> {
  const ws = new WebSocket(svc.foxglove!.url, [FoxgloveClient.SUPPORTED_SUBPROTOCOL]);
  ws.binaryType = 'arraybuffer';
  const client = new FoxgloveClient({ ws: ws as unknown as ConstructorParameters<typeof FoxgloveClient>[0]['ws'] });
  const channels = await new Promise<Channel[]>((resolve, reject) => {
    client.on('advertise', (c) => resolve(c as Channel[]));
    client.on('error', reject);
  });
  return { client, ws, channels };
}

const reader = (c: Channel) => new MessageReader(parse(c.schema, { ros2: true }));

describe('Foxglove WebSocket endpoint (foxglove.websocket.v1)', () => {
  it('ROS 2 topics in CDR: JointState at the control rate, TFMessage of the arm, SceneUpdate ghosts, and the JSON channels', async () => {
    const { client, ws, channels } = await connect();
    expect(ws.protocol).toBe('foxglove.websocket.v1');
    const byTopic = Object.fromEntries(channels.map((c) => [c.topic, c]));
    expect(Object.keys(byTopic).sort()).toEqual(['/joint_states', '/robot_description', '/tf', '/wmrl/command', '/wmrl/imagined', '/wmrl/imagined/scene']);
    expect(byTopic['/joint_states']).toMatchObject({ encoding: 'cdr', schemaName: 'sensor_msgs/msg/JointState', schemaEncoding: 'ros2msg' });
    expect(byTopic['/tf']).toMatchObject({ encoding: 'cdr', schemaName: 'tf2_msgs/msg/TFMessage', schemaEncoding: 'ros2msg' });
    expect(byTopic['/robot_description']).toMatchObject({ encoding: 'cdr', schemaName: 'std_msgs/msg/String', schemaEncoding: 'ros2msg' });
    expect(byTopic['/wmrl/imagined/scene']).toMatchObject({ encoding: 'json', schemaName: 'foxglove.SceneUpdate', schemaEncoding: 'jsonschema' });
    expect(JSON.parse(byTopic['/wmrl/imagined/scene']!.schema)).toMatchObject({ title: 'foxglove.SceneUpdate', type: 'object' });
    expect(byTopic['/wmrl/command']).toMatchObject({ encoding: 'json', schemaName: 'wmrl.Command' });

    const decode = new Map<string, (d: ArrayBufferView) => unknown>();
    for (const c of channels) decode.set(c.topic, c.encoding === 'cdr' ? (d) => reader(c).readMessage(d) : (d) => JSON.parse(new TextDecoder().decode(d)));
    const topicOf = new Map<number, string>();
    for (const c of channels) if (c.topic !== '/robot_description') topicOf.set(client.subscribe(c.id), c.topic);
    const got: Record<string, Array<{ at: number; msg: Record<string, unknown> }>> = Object.fromEntries([...topicOf.values()].map((t) => [t, []]));
    client.on('message', (m) => {
      const topic = topicOf.get(m.subscriptionId)!;
      got[topic]!.push({ at: performance.now(), msg: decode.get(topic)!(m.data) as Record<string, unknown> });
    });

    const t0 = Date.now() / 1000;
    svc.ctx.runs.start('expert-session', { robot: 'sim', episodes: 10, imagined: true, seed: 0 });
    await new Promise((r) => setTimeout(r, 3500));
    client.close();

    // Rate over the last 2 s (the run's start, env creation and the first reset are behind it).
    const js = got['/joint_states']!;
    const t1 = js.at(-1)!.at;
    const window = js.filter((m) => m.at > t1 - 2000);
    const hz = (window.length - 1) / ((window.at(-1)!.at - window[0]!.at) / 1000);
    const controlHz = svc.ctx.robots.get('sim')!.sim.spec.controlHz;
    expect(hz).toBeGreaterThan(0.8 * controlHz);
    expect(hz).toBeLessThan(1.2 * controlHz);
    const first = js[0]!.msg as { header: { stamp: { sec: number; nanosec: number } }; name: string[]; position: Float64Array };
    expect(first.name).toEqual(['shoulder', 'elbow']);
    expect(first.position).toBeInstanceOf(Float64Array);
    expect(first.position).toHaveLength(2);
    const stamp = first.header.stamp.sec + first.header.stamp.nanosec / 1e9;
    expect(stamp).toBeGreaterThan(t0 - 1);
    expect(stamp).toBeLessThan(Date.now() / 1000 + 1);

    // /tf: the URDF's link tree, the forearm 0.2 m along the upper arm.
    const tf = got['/tf']!;
    expect(tf.length).toBeGreaterThan(50);
    const transforms = (tf.at(-1)!.msg as { transforms: Array<{ header: { frame_id: string }; child_frame_id: string; transform: { translation: { x: number; y: number; z: number } } }> }).transforms;
    expect(Object.fromEntries(transforms.map((t) => [t.child_frame_id, t.header.frame_id]))).toMatchObject({ base: 'world', upper: 'base', fore: 'upper' });
    const fore = transforms.find((t) => t.child_frame_id === 'fore')!.transform.translation;
    expect(Math.hypot(fore.x, fore.y, fore.z)).toBeCloseTo(0.2, 3);

    expect(got['/wmrl/command']!.length).toBeGreaterThan(50);
    const im = got['/wmrl/imagined']!;
    expect(im.length).toBeGreaterThan(50);
    expect(im[0]!.msg).toMatchObject({ source: 'sim-replay', name: ['shoulder', 'elbow'] });
    expect((im[0]!.msg.members as number[][])[0]).toHaveLength(2);

    // The imagined rollout as a SceneUpdate: the previous ghosts deleted, one translucent entity per member.
    const scene = got['/wmrl/imagined/scene']!;
    expect(scene.length).toBeGreaterThan(50);
    const update = scene.at(-1)!.msg as { deletions: Array<{ type: number }>; entities: Array<{ id: string; frame_id: string; metadata: Array<{ key: string; value: string }>; cylinders: Array<{ color: { a: number } }>; spheres: unknown[] }> };
    expect(update.deletions).toMatchObject([{ type: 1, id: '' }]);
    expect(update.entities.map((e) => [e.id, e.frame_id])).toEqual([['member-0', 'world']]);
    expect(update.entities[0]!.metadata).toContainEqual({ key: 'source', value: 'sim-replay' });
    expect(update.entities[0]!.cylinders.length).toBeGreaterThan(0);
    expect(update.entities[0]!.spheres.length).toBeGreaterThan(0);
    expect(update.entities[0]!.cylinders.every((c) => c.color.a < 1)).toBe(true);
  });

  it('/robot_description is latched: each new subscriber gets the URDF once, others are not sent it again', async () => {
    const urdf = readFileSync(URDF, 'utf8');
    const subscribeDescription = async () => {
      const c = await connect();
      const ch = c.channels.find((x) => x.topic === '/robot_description')!;
      const got: Array<{ sub: number; data: string }> = [];
      c.client.on('message', (m) => got.push({ sub: m.subscriptionId, data: (reader(ch).readMessage(m.data) as { data: string }).data }));
      return { ...c, ch, got, sub: c.client.subscribe(ch.id) };
    };
    const a = await subscribeDescription();
    await new Promise((r) => setTimeout(r, 300));
    expect(a.got).toEqual([{ sub: a.sub, data: urdf }]);
    const b = await subscribeDescription();
    await new Promise((r) => setTimeout(r, 300));
    expect(b.got).toEqual([{ sub: b.sub, data: urdf }]);
    expect(a.got).toHaveLength(1);
    // Unsubscribed and subscribed again: sent again, on the new subscription.
    a.client.unsubscribe(a.sub);
    const again = a.client.subscribe(a.ch.id);
    await new Promise((r) => setTimeout(r, 300));
    expect(a.got).toEqual([{ sub: a.sub, data: urdf }, { sub: again, data: urdf }]);
    expect(b.got).toHaveLength(1);
    a.client.close();
    b.client.close();
  });
});
