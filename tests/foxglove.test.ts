// The Foxglove WebSocket endpoint, seen by @foxglove/ws-protocol's own client: it advertises joint
// states, commands and imagined rollouts, and a subscriber receives joint states at the control rate.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebSocket } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FoxgloveClient } from '../server/foxglove-protocol.js';
import { startService, type Service } from '../server/service.js';

const dir = mkdtempSync(join(tmpdir(), 'wmrl-foxglove-'));
let svc: Service;
beforeAll(async () => {
  svc = await startService({ dataDir: dir, port: 0, foxglovePort: 0, mqttPort: null });
});
afterAll(async () => {
  await svc?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('Foxglove WebSocket endpoint (foxglove.websocket.v1)', () => {
  it('advertises the channels; a subscriber receives joint states at the control rate, commands and imagined rollouts', async () => {
    const ws = new WebSocket(svc.foxglove!.url, [FoxgloveClient.SUPPORTED_SUBPROTOCOL]);
    ws.binaryType = 'arraybuffer';
    const client = new FoxgloveClient({ ws: ws as unknown as ConstructorParameters<typeof FoxgloveClient>[0]['ws'] });
    const channels = await new Promise<Array<{ id: number; topic: string; encoding: string; schemaName: string }>>((resolve, reject) => {
      client.on('advertise', resolve);
      client.on('error', reject);
    });
    expect(ws.protocol).toBe('foxglove.websocket.v1');
    const byTopic = Object.fromEntries(channels.map((c) => [c.topic, c]));
    expect(Object.keys(byTopic).sort()).toEqual(['/joint_states', '/wmrl/command', '/wmrl/imagined']);
    expect(byTopic['/joint_states']).toMatchObject({ encoding: 'json', schemaName: 'wmrl.JointState' });

    const topicOf = new Map<number, string>();
    for (const c of channels) topicOf.set(client.subscribe(c.id), c.topic);
    const got: Record<string, Array<{ at: number; msg: Record<string, unknown> }>> = { '/joint_states': [], '/wmrl/command': [], '/wmrl/imagined': [] };
    const dec = new TextDecoder();
    client.on('message', (m) => got[topicOf.get(m.subscriptionId)!]!.push({ at: performance.now(), msg: JSON.parse(dec.decode(m.data)) as Record<string, unknown> }));

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
    expect(js[0]!.msg).toMatchObject({ name: ['shoulder', 'elbow'] });
    expect((js[0]!.msg.position as number[]).length).toBe(2);
    expect(got['/wmrl/command']!.length).toBeGreaterThan(50);
    const im = got['/wmrl/imagined']!;
    expect(im.length).toBeGreaterThan(50);
    expect(im[0]!.msg).toMatchObject({ source: 'sim-replay', name: ['shoulder', 'elbow'] });
    expect((im[0]!.msg.members as number[][])[0]).toHaveLength(2);
  });
});
