// Remote sandbox slots: two worker processes take sandbox jobs through the embedded aedes broker's
// shared subscription and run them in their own sandbox pools; scores come back, and a crash or a
// timeout on a worker comes back unscored with its reason.
import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmbeddedBroker, type EmbeddedBroker } from '../bridge/mqtt/broker.js';
import { connect, endClient } from '../bridge/mqtt/client.js';
import { RemoteSlots } from '../autoresearch/remote.js';
import { execute, type ResearchTask } from '../autoresearch/task.js';

const TASK: ResearchTask = {
  name: 'toy',
  fields: [{ name: 'x', choices: [0, 1, 2, 3] }, { name: 'mode', choices: ['ok', 'crash', 'hang'] }],
  program: { kind: 'source', code: `export default ({ proposal }) => {
    if (proposal.mode === 'crash') process.exit(9);
    if (proposal.mode === 'hang') while (true) {}
    return { score: proposal.x * 10 };
  }` },
  metric: '10 x',
  limits: { timeoutMs: 2000 },
  seeds: 1,
};

describe('remote sandbox slots over MQTT shared subscriptions', () => {
  let broker: EmbeddedBroker;
  const workers: ChildProcess[] = [];
  const errors: Error[] = [];
  beforeAll(async () => {
    broker = await startEmbeddedBroker({ port: 0, onError: (e) => errors.push(e) });
    for (const id of ['wA', 'wB']) {
      const w = spawn(process.execPath, ['--import', 'tsx', 'autoresearch/remote-worker.ts', '--url', broker.url, '--protocol', '4', '--id', id, '--slots', '1'], { stdio: ['ignore', 'pipe', 'pipe'] });
      workers.push(w);
      await new Promise<void>((resolve, reject) => {
        let out = '';
        w.stdout!.on('data', (d: Buffer) => { out += d.toString(); if (out.includes(`ready ${id}`)) resolve(); });
        w.once('exit', (code) => reject(new Error(`worker ${id} exited with ${code}`)));
      });
    }
  }, 60_000);
  afterAll(async () => {
    for (const w of workers) if (w.exitCode === null) { w.kill('SIGTERM'); await new Promise((r) => w.once('exit', r)); }
    await broker?.close();
  });

  it('jobs spread over both workers; scores, crashes and timeouts come back', async () => {
    const client = await connect({ url: broker.url, clientId: 'service', protocolVersion: 4, clean: true, onError: (e) => errors.push(e) });
    const slots = await RemoteSlots.create(client, { capacity: 2, onError: (e) => errors.push(e) });
    try {
      const proposals = [{ x: 1, mode: 'ok' }, { x: 2, mode: 'ok' }, { x: 3, mode: 'crash' }, { x: 3, mode: 'ok' }, { x: 0, mode: 'hang' }, { x: 0, mode: 'ok' }];
      const pending = proposals.map((p) => execute(slots, TASK, p, 0));
      expect(slots.busy).toBe(2);
      expect(slots.queueLength).toBe(4);
      const out = await Promise.all(pending);
      expect(out.map((o) => o.score)).toEqual([10, 20, null, 30, null, 0]);
      expect(out[2]!.reason).toMatch(/^crash: remote worker w[AB]: .*exit code 9/);
      expect(out[4]!.reason).toMatch(/^timeout: remote worker w[AB]/);
      expect([...slots.perWorker.keys()].sort()).toEqual(['wA', 'wB']);
      expect(errors).toEqual([]);
    } finally {
      slots.close();
      await endClient(client);
    }
  }, 60_000);
});
