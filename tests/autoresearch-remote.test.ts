// Remote sandbox slots: two worker processes log in to the embedded aedes broker with the worker
// role, take sandbox jobs through its shared subscription and run them in their own sandbox pools;
// scores come back, and a crash or a timeout on a worker comes back unscored with its reason. A
// worker runs only programs it was started with and cuts a job's limits to its own maxima.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateMqttCredentials } from '../bridge/mqtt/auth.js';
import { startEmbeddedBroker, type EmbeddedBroker } from '../bridge/mqtt/broker.js';
import { connect, endClient } from '../bridge/mqtt/client.js';
import { RemoteSlots, capLimits, knownProgram } from '../autoresearch/remote.js';
import { DEFAULT_LIMITS } from '../autoresearch/sandbox.js';
import { execute, type ResearchTask } from '../autoresearch/task.js';

const TASK: ResearchTask = {
  name: 'toy',
  fields: [{ name: 'x', choices: [0, 1, 2, 3] }, { name: 'mode', choices: ['ok', 'crash', 'hang'] }],
  program: { kind: 'module', path: resolve('tests/fixtures/remote-toy.ts'), export: 'toy' },
  metric: '10 x',
  // Far above the workers' --max-timeout-ms: they cut it.
  limits: { timeoutMs: 600_000 },
  seeds: 1,
};
const creds = generateMqttCredentials();
const dir = mkdtempSync(join(tmpdir(), 'wmrl-remote-'));
const credFile = join(dir, 'mqtt-credentials.json');

describe('remote sandbox slots over MQTT shared subscriptions', () => {
  let broker: EmbeddedBroker;
  const workers: ChildProcess[] = [];
  const errors: Error[] = [];
  beforeAll(async () => {
    writeFileSync(credFile, JSON.stringify(creds), { mode: 0o600 });
    broker = await startEmbeddedBroker({ port: 0, auth: creds, onError: (e) => errors.push(e) });
    for (const id of ['wA', 'wB']) {
      // wB runs with the default protocol, which the embedded broker must accept.
      const protocol = id === 'wA' ? ['--protocol', '4'] : [];
      const args = ['--url', broker.url, '--credentials', credFile, ...protocol, '--id', id, '--slots', '1', '--program', 'tests/fixtures/remote-toy.ts#toy', '--max-timeout-ms', '2000'];
      const w = spawn(process.execPath, ['--import', 'tsx', 'autoresearch/remote-worker.ts', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
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
    rmSync(dir, { recursive: true, force: true });
  });

  it('jobs spread over both workers; scores, crashes and timeouts come back', async () => {
    const client = await connect({ url: broker.url, ...creds.service, clientId: 'service', protocolVersion: 4, clean: true, onError: (e) => errors.push(e) });
    const slots = await RemoteSlots.create(client, { capacity: 2, onError: (e) => errors.push(e) });
    try {
      const proposals = [{ x: 1, mode: 'ok' }, { x: 2, mode: 'ok' }, { x: 3, mode: 'crash' }, { x: 3, mode: 'ok' }, { x: 0, mode: 'hang' }, { x: 0, mode: 'ok' }];
      const pending = proposals.map((p) => execute(slots, TASK, p, 0));
      expect(slots.busy).toBe(2);
      expect(slots.queueLength).toBe(4);
      const out = await Promise.all(pending);
      expect(out.map((o) => o.score)).toEqual([10, 20, null, 30, null, 0]);
      expect(out[2]!.reason).toMatch(/^crash: remote worker w[AB]: .*exit code 9/);
      // The task asked for 600 s; the workers' maximum is 2 s.
      expect(out[4]!.reason).toMatch(/^timeout: remote worker w[AB]: no result within 2000 ms/);
      expect([...slots.perWorker.keys()].sort()).toEqual(['wA', 'wB']);
      expect(errors).toEqual([]);
    } finally {
      slots.close();
      await endClient(client);
    }
  }, 60_000);

  it('a worker refuses programs it was not started with: code in the job, or another module', async () => {
    const client = await connect({ url: broker.url, ...creds.service, clientId: 'service-2', protocolVersion: 4, clean: true, onError: (e) => errors.push(e) });
    const slots = await RemoteSlots.create(client, { capacity: 2, onError: (e) => errors.push(e) });
    try {
      const source = await slots.run({ program: { kind: 'source', code: 'export default () => ({ score: 1e9 })' }, input: {} });
      expect(source).toMatchObject({ ok: false, reason: 'error' });
      expect(source.ok ? '' : source.detail).toMatch(/^remote worker w[AB]: a source program is not a program this worker runs \(it runs .*autoresearch\/tasks\/classifier\.ts#trainClassifier.*tests\/fixtures\/remote-toy\.ts#toy\)/);
      const other = await slots.run({ program: { kind: 'module', path: resolve('tests/fixtures/remote-toy.ts'), export: 'other' }, input: {} });
      expect(other.ok ? '' : other.detail).toMatch(/remote-toy\.ts#other is not a program this worker runs/);
      const elsewhere = await slots.run({ program: { kind: 'module', path: join(dir, 'remote-toy.ts'), export: 'toy' }, input: {} });
      expect(elsewhere.ok ? '' : elsewhere.detail).toMatch(/is not a program this worker runs/);
      // The same file under another checkout's root: matched by its path from the root; the worker runs its own copy.
      const ok = await slots.run({ program: { kind: 'module', path: '/elsewhere/wmrl/tests/fixtures/remote-toy.ts', export: 'toy' }, input: { proposal: { x: 2, mode: 'ok' } } });
      expect(ok).toMatchObject({ ok: true, value: { score: 20 } });
      expect(errors).toEqual([]);
    } finally {
      slots.close();
      await endClient(client);
    }
  }, 60_000);

  it('a worker refuses a --protocol other than 4 or 5, naming it', async () => {
    const w = spawn(process.execPath, ['--import', 'tsx', 'autoresearch/remote-worker.ts', '--url', broker.url, '--protocol', '3.1'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    w.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    const code = await new Promise<number | null>((r) => w.once('exit', r));
    expect(code).not.toBe(0);
    expect(err).toMatch(/--protocol 3\.1: expected 4 \(MQTT 3\.1\.1, the default; the embedded broker speaks only this\) or 5/);
  }, 30_000);

  it("capLimits: each limit is the job's ask (else the default), never above the worker's maximum", () => {
    const max = { timeoutMs: 2000, memoryMb: 256, maxProcs: 4 };
    expect(capLimits({ timeoutMs: 1e12, memoryMb: 1e9, maxProcs: 1e6 }, DEFAULT_LIMITS, max)).toEqual(max);
    expect(capLimits({ timeoutMs: 500, memoryMb: 'lots' }, DEFAULT_LIMITS, max)).toEqual({ timeoutMs: 500, memoryMb: 256, maxProcs: 4 });
    expect(capLimits(undefined, { timeoutMs: 1000, memoryMb: 128, maxProcs: 2 }, max)).toEqual({ timeoutMs: 1000, memoryMb: 128, maxProcs: 2 });
  });

  it('knownProgram: a project module by its path from the root, the source and its build in dist/ alike', () => {
    const src = { kind: 'module' as const, path: resolve('autoresearch/tasks/controller.ts'), export: 'runController' };
    const built = { ...src, path: resolve('dist/autoresearch/tasks/controller.js') };
    const ask = (path: string, exp = 'runController') => ({ kind: 'module' as const, path, export: exp });
    // Another checkout, running the build or the sources: the worker's own entry, never the job's path.
    expect(knownProgram([src], ask('/srv/wmrl/dist/autoresearch/tasks/controller.js'))).toBe(src);
    expect(knownProgram([built], ask('/srv/wmrl/autoresearch/tasks/controller.ts'))).toBe(built);
    expect(knownProgram([built], ask('/srv/wmrl/dist/autoresearch/tasks/controller.js'))).toBe(built);
    // Another export, another module, or a file merely ending in the same name is not it.
    expect(knownProgram([src], ask('/srv/wmrl/autoresearch/tasks/controller.ts', 'other'))).toBeUndefined();
    expect(knownProgram([src], ask('/srv/wmrl/autoresearch/tasks/classifier.ts'))).toBeUndefined();
    expect(knownProgram([src], ask('/srv/wmrl/autoresearch/tasks/my-controller.ts'))).toBeUndefined();
    expect(knownProgram([src], { kind: 'source', code: 'export default () => 1' })).toBeUndefined();
  });
});
