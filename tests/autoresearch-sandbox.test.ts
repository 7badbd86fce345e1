// The sandbox pool stops a proposal that loops forever, allocates without bound, forks without
// bound, opens a network connection, reads the service's files, writes outside its /tmp or leaves
// a setsid process behind, reports why, leaves it unscored (never 0), and keeps serving afterwards;
// queue length and capacity are reported. Without bubblewrap it refuses to start unless told, in
// so many words, to run unisolated. These run the real bwrap.
import { randomUUID } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, rmdirSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { execute, type ResearchTask } from '../autoresearch/task.js';
import { DETAIL_MAX_BYTES, SandboxPool, boundDetail, userNamespaceFilter, type SandboxJob } from '../autoresearch/sandbox.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Host processes whose command line holds `marker`. */
function processesWith(marker: string): number[] {
  const found: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    let cmd: string;
    try {
      cmd = readFileSync(`/proc/${d}/cmdline`, 'utf8');
    } catch {
      continue; // exited while we listed
    }
    if (cmd.includes(marker) && Number(d) !== process.pid) found.push(Number(d));
  }
  return found;
}

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
    // bwrap works here (as root, or as a user with user namespaces); the report says so.
    expect(pool.isolation).toMatchObject({ network: true, pidNamespace: true, filesystem: true, rlimits: true });
    if (process.getuid?.() === 0) expect(pool.isolation.droppedToUid).toBe(65534);
    expect(pool.capacity).toBe(2);
  });

  it('a proposal sees none of the data folder and cannot write outside its private /tmp', async () => {
    // A world-readable file in the repository's data/ (the service's default data folder), made after the pool.
    const data = join(ROOT, 'data');
    const madeData = !existsSync(data);
    mkdirSync(data, { recursive: true });
    const secret = `secret-${randomUUID()}`;
    const secretFile = join(data, `sandbox-probe-${randomUUID()}`);
    writeFileSync(secretFile, secret, { mode: 0o644 });
    const escapes = [join(ROOT, `sandbox-escape-${randomUUID()}`), join(ROOT, 'node_modules', '.cache', `sandbox-escape-${randomUUID()}`), join(ROOT, 'autoresearch', `sandbox-escape-${randomUUID()}.ts`)];
    const hostTmp = `/tmp/sandbox-escape-${randomUUID()}`;
    try {
      for (const f of [secretFile, join(data, 'token'), join(data, 'episodes.db')]) {
        const o = await pool.run(src(`const fs = await import('node:fs'); return fs.readFileSync(${JSON.stringify(f)}, 'utf8');`));
        expect(o).toMatchObject({ ok: false, reason: 'error' });
        expect(o.ok === false && o.detail).toMatch(/ENOENT/);
        expect(JSON.stringify(o)).not.toContain(secret);
      }
      const listing = await pool.run(src(`const fs = await import('node:fs'); return fs.readdirSync(${JSON.stringify(ROOT)});`));
      expect(listing).toMatchObject({ ok: true });
      expect(listing.ok && listing.value).not.toContain('data');
      expect(listing.ok && listing.value).toContain('node_modules');
      for (const f of escapes) {
        const o = await pool.run(src(`const fs = await import('node:fs'); fs.writeFileSync(${JSON.stringify(f)}, 'x'); return 'wrote';`));
        expect(o).toMatchObject({ ok: false, reason: 'error' });
        expect(o.ok === false && o.detail).toMatch(/EROFS/);
        expect(existsSync(f)).toBe(false);
      }
      // Its /tmp is its own: writable inside, invisible outside, gone with the run.
      const tmp = await pool.run(src(`const fs = await import('node:fs'); fs.writeFileSync(${JSON.stringify(hostTmp)}, 'x'); return fs.readFileSync(${JSON.stringify(hostTmp)}, 'utf8');`));
      expect(tmp).toMatchObject({ ok: true, value: 'x' });
      expect(existsSync(hostTmp)).toBe(false);
      expect(await pool.run(src('return 5;'))).toMatchObject({ ok: true, value: 5 });
    } finally {
      rmSync(secretFile, { force: true });
      for (const f of [...escapes, hostTmp]) rmSync(f, { force: true });
      if (madeData && readdirSync(data).length === 0) rmdirSync(data);
    }
  }, 40_000);

  it('a module program outside the repository is shown read-only; one in data/ is refused', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sandbox-module-'));
    chmodSync(dir, 0o755); // as root the run is nobody's
    try {
      const mod = join(dir, 'prog.mjs');
      writeFileSync(mod, `import { writeFileSync } from 'node:fs';
        export function run(input) { try { writeFileSync(${JSON.stringify(join(dir, 'x'))}, 'x'); } catch (e) { return input.n + ':' + e.code; } return 'wrote'; }`);
      expect(await pool.run({ program: { kind: 'module', path: mod, export: 'run' }, input: { n: 3 } })).toMatchObject({ ok: true, value: '3:EROFS' });
      expect(existsSync(join(dir, 'x'))).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    await expect(pool.run({ program: { kind: 'module', path: join(ROOT, 'data', 'prog.ts'), export: 'run' }, input: {} })).rejects.toThrow(/is in data\/, which the sandbox does not show/);
  }, 20_000);

  it('a setsid grandchild dies with the run, is reported, and does not hold the slot', async () => {
    const marker = `sandbox-setsid-${randomUUID()}`;
    const keepAlive = JSON.stringify(`setInterval(() => {}, 1000); // ${marker}`);
    const viaSetsid = src(`const { spawn } = await import('node:child_process');
      spawn('setsid', [process.execPath, '-e', ${keepAlive}], { stdio: 'inherit' });
      await new Promise((r) => setTimeout(r, 300));
      return 'spawned';`);
    const viaDetached = src(`const { spawn } = await import('node:child_process');
      spawn(process.execPath, ['-e', ${keepAlive}], { detached: true, stdio: 'inherit' }).unref();
      await new Promise((r) => setTimeout(r, 300));
      return 'spawned';`);
    for (const job of [viaSetsid, viaDetached]) {
      const o = await pool.run(job);
      expect(o).toMatchObject({ ok: false, reason: 'procs' });
      expect(o.ok === false && o.detail).toMatch(/left the run's process tree/);
      expect(o.slotMs).toBeLessThan(3000); // answered, not timed out (4 s)
      expect(pool.busy).toBe(0);
    }
    // SIGKILL reaches the namespace's processes at once; give /proc a moment.
    await new Promise((r) => setTimeout(r, 300));
    expect(processesWith(marker)).toEqual([]);
    expect(await pool.run(src('return 6;'))).toMatchObject({ ok: true, value: 6 });
  }, 30_000);

  it('an error detail carries back at most 2 KiB', async () => {
    const thrown = await pool.run(src(`throw new Error('x'.repeat(100_000));`));
    expect(thrown).toMatchObject({ ok: false, reason: 'error' });
    const t = thrown.ok === false ? thrown.detail : '';
    expect(t).toMatch(/^Error: xxx/);
    expect(Buffer.byteLength(t)).toBeLessThanOrEqual(2048);
    // What it printed before dying: multi-byte text, cut on a character boundary.
    const printed = await pool.run(src(`process.stderr.write('é€😀'.repeat(20_000) + '\\n'); process.exit(1);`));
    expect(printed).toMatchObject({ ok: false, reason: 'crash' });
    const p = printed.ok === false ? printed.detail : '';
    expect(p).toMatch(/^died without a result \(exit code 1\)/);
    expect(Buffer.byteLength(p)).toBeLessThanOrEqual(2048);
    expect(p).not.toContain('\uFFFD');
    expect(boundDetail('😀'.repeat(1000))).toMatch(/^(😀)+ … \(4000 bytes, cut to 2048\)$/);
    expect(DETAIL_MAX_BYTES).toBe(2048);
  }, 20_000);

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
    const before = pool.stats();
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
    expect(s).toMatchObject({ capacity: 2, busy: 0, queueLength: 0, completed: before.completed + 2 });
    expect(s.failed).toMatchObject({ timeout: before.failed.timeout + 1, memory: before.failed.memory + 1, procs: before.failed.procs + 1, error: before.failed.error + 1 });
  }, 40_000);

  it('charges a run the CPU time its process reports, and a run that never answered its slot time', async () => {
    // 300 ms of sleep and at least 200 ms of spinning: the CPU charge counts the spinning, not the sleep.
    const o = await pool.run(src('await new Promise((r) => setTimeout(r, 300)); const t = performance.now(); while (performance.now() - t < 200) {} return 1;'));
    expect(o).toMatchObject({ ok: true, value: 1 });
    expect(o.cpuMs).toBeGreaterThanOrEqual(190);
    expect(o.cpuMs).toBeLessThan(o.slotMs - 250);
    const killed = await pool.run({ ...src('while (true) {}'), limits: { timeoutMs: 1500 } });
    expect(killed).toMatchObject({ ok: false, reason: 'timeout' });
    expect(killed.cpuMs).toBe(killed.slotMs);
  }, 20_000);

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

  it('a proposal cannot make a user namespace (as root or not), and otherwise runs as before', async () => {
    expect(pool.isolation.noUserNamespaces).toBe(true);
    const o = await pool.run(src(`const { spawnSync } = await import('node:child_process');
      const tries = [['unshare', '-U', 'true'], ['unshare', '-Urm', 'sh', '-c', 'mount -t tmpfs x /tmp']];
      const out = tries.map((c) => { const r = spawnSync(c[0], c.slice(1), { encoding: 'utf8' }); return { status: r.status, stderr: r.stderr }; });
      // Processes and threads still start (clone without CLONE_NEWUSER; clone3 falls back to clone).
      const echo = spawnSync('sh', ['-c', 'echo $((6 * 7))'], { encoding: 'utf8' }).stdout.trim();
      return { out, echo };`));
    expect(o).toMatchObject({ ok: true, value: { echo: '42' } });
    const v = (o.ok ? o.value : null) as { out: { status: number; stderr: string }[] };
    for (const r of v.out) {
      expect(r.status).not.toBe(0);
      expect(r.stderr).toMatch(/unshare failed: Operation not permitted/);
    }
  }, 20_000);

  it('the filter answers EPERM for unshare/clone with CLONE_NEWUSER and ENOSYS for clone3; none for an unknown CPU', () => {
    const f = userNamespaceFilter('x64')!;
    expect(f.length).toBe(13 * 8);
    // Return values of the last four instructions: allow, EPERM, ENOSYS, kill the process.
    expect([9, 10, 11, 12].map((i) => f.readUInt32LE(i * 8 + 4))).toEqual([0x7fff0000, 0x50001, 0x50026, 0x80000000]);
    expect(userNamespaceFilter('arm64')).not.toBeNull();
    expect(userNamespaceFilter('riscv64')).toBeNull();
  });

  it('descriptors the pool\'s process inherited do not reach the proposal', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sandbox-fds-'));
    try {
      const secret = join(dir, 'inherited-secret');
      writeFileSync(secret, `secret-${randomUUID()}`);
      const script = join(dir, 'pool.mts');
      // The proposal reports every descriptor it holds and what each one is, and any it can see of the namespace's other processes.
      writeFileSync(script, `import { SandboxPool } from ${JSON.stringify(join(ROOT, 'autoresearch', 'sandbox.ts'))};
        const pool = SandboxPool.create({ slots: 1, limits: { timeoutMs: 8000, memoryMb: 256, maxProcs: 6 } });
        const code = \`export default async function () { const fs = await import('node:fs');
          const held = {};
          for (const f of fs.readdirSync('/proc/self/fd')) {
            try { held[f] = { to: fs.readlinkSync('/proc/self/fd/' + f), flags: /flags:\\\\s+(\\\\d+)/.exec(fs.readFileSync('/proc/self/fdinfo/' + f, 'utf8'))[1] }; } catch (e) { held[f] = { to: e.code }; }
          }
          const others = [];
          for (const p of fs.readdirSync('/proc').filter((d) => /^\\\\d+$/.test(d))) {
            try { for (const f of fs.readdirSync('/proc/' + p + '/fd')) others.push(fs.readlinkSync('/proc/' + p + '/fd/' + f)); } catch (e) { others.push(p + ':' + e.code); }
          }
          return { held, others }; }\`;
        const o = await pool.run({ program: { kind: 'source', code }, input: {} });
        await pool.close();
        process.stdout.write(JSON.stringify(o));
      `);
      // The pool's process holds the file at fd 40 without close-on-exec, as a shell's redirection (or a pipe from it) leaves
      // it (Node marks some low ones close-on-exec at startup, not these).
      const r = spawnSync('bash', ['-c', 'exec "$0" --import tsx "$1" 40<"$2"', process.execPath, script, secret], { cwd: ROOT, encoding: 'utf8', timeout: 30_000 });
      expect(r.status, String(r.stderr)).toBe(0);
      const o = JSON.parse(String(r.stdout)) as { ok: boolean; value: { held: Record<string, { to: string; flags?: string }>; others: string[] } };
      expect(o.ok).toBe(true);
      const { held, others } = o.value;
      // Its name, not its path: a file outside the sandbox's mounts reads back relative to its own mount.
      expect(JSON.stringify(o)).not.toContain('inherited-secret');
      // Beyond stdio and the result pipe, only Node's own descriptors, all close-on-exec.
      expect(held['3']).toBeDefined();
      for (const [f, d] of Object.entries(held)) if (Number(f) > 3 && d.flags !== undefined) expect((parseInt(d.flags, 8) & 0o2000000) !== 0, `fd ${f} -> ${d.to}`).toBe(true);
      expect(others.length).toBeGreaterThan(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 40_000);

  it('a fault of the pool itself (a program that cannot be built) rejects, it is not an unscored proposal', async () => {
    await expect(pool.run({ program: { kind: 'module', path: '/nonexistent/program.ts', export: 'run', bundle: true }, input: {} })).rejects.toThrow(/could not bundle/);
    expect(await pool.run(src('return 1;'))).toMatchObject({ ok: true, value: 1 });
  });

  it('without bubblewrap the pool refuses to start, naming the missing tool and the opt-out', () => {
    expect(() => SandboxPool.create({ slots: 1, bwrap: '/nonexistent/bwrap' })).toThrow(
      /bubblewrap \(\/nonexistent\/bwrap\) does not run \(.*ENOENT\).*apt-get install bubblewrap.*unsafeNoIsolation: true.*--unsafe-no-sandbox/,
    );
    // A bwrap that runs but cannot build the sandbox is refused as well.
    expect(() => SandboxPool.create({ slots: 1, bwrap: '/bin/false' })).toThrow(/bubblewrap \(\/bin\/false\) does not run \(exit code 1\)/);
  });

  it('the explicit opt-out runs without isolation, warns loudly, and really is not isolated', async () => {
    const warn = vi.spyOn(console, 'error').mockImplementation(() => {});
    let open: SandboxPool;
    try {
      open = SandboxPool.create({ slots: 1, unsafeNoIsolation: true, bwrap: '/nonexistent/bwrap', limits: { timeoutMs: 4000 } });
      expect(warn).toHaveBeenCalledWith(expect.stringMatching(/^WARNING: sandbox isolation is OFF/));
    } finally {
      warn.mockRestore();
    }
    try {
      expect(open.isolation).toMatchObject({ network: false, pidNamespace: false, filesystem: false });
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
