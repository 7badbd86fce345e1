// The sandbox pool stops a proposal that loops forever, allocates without bound, forks without
// bound or opens a network connection, reports why, leaves it unscored (never 0), and keeps
// serving afterwards; queue length and capacity are reported.
import { createServer, type AddressInfo, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execute, type ResearchTask } from '../autoresearch/task.js';
import { SandboxPool, type SandboxJob } from '../autoresearch/sandbox.js';

const src = (body: string, input: unknown = {}): SandboxJob => ({ program: { kind: 'source', code: `export default async function (input) {\n${body}\n}` }, input });

describe('sandbox pool', () => {
  let pool: SandboxPool;
  let server: Server;
  let port = 0;
  let connections = 0;
  beforeAll(async () => {
    pool = SandboxPool.create({ slots: 2, limits: { timeoutMs: 4000, memoryMb: 256, maxProcs: 6 } });
    server = createServer((c) => { connections++; c.end('hello'); });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await pool?.close();
    await new Promise<void>((r) => server.close(() => r()));
  });

  it('reports what it enforces on this machine', () => {
    // unshare works here (as root or as a user with user namespaces); the report says so.
    expect(pool.isolation.network).toBe(true);
    expect(pool.isolation.pidNamespace).toBe(true);
    expect(pool.capacity).toBe(2);
  });

  it('stops each runaway proposal with its reason and keeps serving', async () => {
    const jobs = {
      loop: src('while (true) {}'),
      alloc: src('const keep = []; while (true) keep.push(new Float64Array(1 << 20).fill(1));'),
      fork: src(`const { spawn } = await import('node:child_process');
        while (true) { spawn('sleep', ['60']).on('error', () => {}); await new Promise((r) => setTimeout(r, 2)); }`),
      network: src(`const net = await import('node:net');
        return await new Promise((resolve, reject) => {
          const s = net.connect(${port}, '127.0.0.1');
          s.on('connect', () => resolve('connected'));
          s.on('error', reject);
        });`),
      fine: src('return input.x * 21;', { x: 2 }),
    };
    const pending = Object.entries(jobs).map(async ([k, j]) => [k, await pool.run(j)] as const);
    // Five jobs on two slots: three wait in the queue at first.
    expect(pool.queueLength).toBe(3);
    expect(pool.busy).toBe(2);
    const out = Object.fromEntries(await Promise.all(pending));
    expect(out.loop).toMatchObject({ ok: false, reason: 'timeout' });
    expect(out.loop!.slotMs).toBeGreaterThanOrEqual(4000);
    expect(out.alloc).toMatchObject({ ok: false, reason: 'memory' });
    expect(out.fork).toMatchObject({ ok: false, reason: 'procs' });
    expect(out.network).toMatchObject({ ok: false, reason: 'error' });
    expect(out.network!.ok === false && out.network!.detail).toMatch(/ENETUNREACH|ECONNREFUSED/);
    expect(connections).toBe(0);
    expect(out.fine).toMatchObject({ ok: true, value: 42 });
    // Still serving, and nothing left running.
    expect(await pool.run(src('return 7;'))).toMatchObject({ ok: true, value: 7 });
    const s = pool.stats();
    expect(s).toMatchObject({ capacity: 2, busy: 0, queueLength: 0, completed: 2 });
    expect(s.failed).toMatchObject({ timeout: 1, memory: 1, procs: 1, error: 1 });
  }, 40_000);

  it('a crash or a non-numeric result is unscored (null with a reason), never 0', async () => {
    const task = (code: string): ResearchTask => ({ name: 't', fields: [], program: { kind: 'source', code }, metric: 'm', limits: { timeoutMs: 4000 }, seeds: 1 });
    const crash = await execute(pool, task('export default () => process.exit(3)'), {}, 0);
    expect(crash.score).toBeNull();
    expect(crash.reason).toMatch(/^crash: .*exit code 3/);
    const nan = await execute(pool, task('export default () => ({ score: NaN })'), {}, 0);
    expect(nan.score).toBeNull();
    expect(nan.reason).toMatch(/^invalid/);
    const ok = await execute(pool, task('export default (i) => ({ score: 0.25 + i.seed })'), {}, 1);
    expect(ok).toMatchObject({ score: 1.25, reason: null });
  }, 30_000);

  it('a fault of the pool itself (a program that cannot be built) rejects, it is not an unscored proposal', async () => {
    await expect(pool.run({ program: { kind: 'module', path: '/nonexistent/program.ts', export: 'run', bundle: true }, input: {} })).rejects.toThrow(/could not bundle/);
    expect(await pool.run(src('return 1;'))).toMatchObject({ ok: true, value: 1 });
  });

  it('without namespaces the network is reported as not enforced, and really is not', async () => {
    const open = SandboxPool.create({ slots: 1, noNamespaces: true, limits: { timeoutMs: 4000 } });
    try {
      expect(open.isolation).toMatchObject({ network: false, pidNamespace: false });
      const before = connections;
      const o = await open.run(src(`const net = await import('node:net');
        return await new Promise((resolve, reject) => { const s = net.connect(${port}, '127.0.0.1'); s.on('data', (d) => resolve(String(d))); s.on('error', reject); });`));
      expect(o).toMatchObject({ ok: true, value: 'hello' });
      expect(connections).toBe(before + 1);
    } finally {
      await open.close();
    }
  }, 20_000);
});
