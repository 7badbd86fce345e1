// The data folder is its owner's: made 0700 with its files 0600 whatever the umask (episodes.db and its
// WAL, run checkpoints, policies, the e-stop latch), an older folder tightened at start. State files are
// replaced atomically (a failed write leaves the previous file and no temp file). The policy list reads
// and hashes a policy file only when it changed.
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { writeFileAtomic } from '../nn/index.js';
import { PolicyLibrary } from '../server/policy-library.js';
import type { RunStatus } from '../server/schemas.js';
import { startService } from '../server/service.js';
import { policyOnnx } from './helpers/policy-onnx.js';
import { until } from './helpers/until.js';

const root = mkdtempSync(join(tmpdir(), 'wmrl-private-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const mode = (p: string) => statSync(p).mode & 0o777;
/** Every file and folder under `dir` with a group or others' permission bit. */
function loose(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (mode(p) & 0o077) out.push(`${p} ${mode(p).toString(8)}`);
    if (statSync(p).isDirectory()) out.push(...loose(p));
  }
  return out;
}

describe('the data folder is private', () => {
  it('a new folder is 0700; the episode database, its WAL, checkpoints, policies and the latch are 0600', async () => {
    const data = join(root, 'new', 'data');
    const svc = await startService({ dataDir: data, port: 0, foxglovePort: null, mqttPort: null });
    try {
      expect(mode(data)).toBe(0o700);
      expect(mode(join(data, 'episodes.db'))).toBe(0o600);
      const host = svc.ctx.robots.get('sim')!;
      const obsDim = host.sim.spec.joints.length * 2 + (host.sim.spec.features?.length ?? 0);
      svc.ctx.policies.save('pi', Buffer.from(policyOnnx(obsDim, 2)));
      const run = svc.ctx.runs.start('expert-session', { robot: 'sim', episodes: 2, imagined: false });
      const done = await until(() => {
        const s: RunStatus = svc.ctx.runs.get(run.id).status;
        return s.state === 'running' ? undefined : s;
      }, 'the expert session ended', 60_000);
      expect(done.state).toBe('finished');
      expect(mode(done.checkpoint!)).toBe(0o600);
      expect(mode(join(data, 'runs'))).toBe(0o700);
      expect(mode(join(data, 'runs', run.id))).toBe(0o700);
      expect(readdirSync(join(data, 'runs', run.id)).filter((f) => f.endsWith('.tmp'))).toEqual([]);
      expect(mode(join(data, 'policies'))).toBe(0o700);
      expect(mode(join(data, 'policies', 'pi.onnx'))).toBe(0o600);
      expect(mode(join(data, 'policies', `bc-${run.id}.onnx`))).toBe(0o600);
      await host.estop('test');
      expect(mode(join(data, 'estop'))).toBe(0o700);
      await host.reset();
      expect(existsSync(join(data, 'episodes.db-wal'))).toBe(true);
      expect(loose(data)).toEqual([]);
    } finally {
      await svc.close();
    }
  });

  it('an existing folder made with a loose umask is tightened at start, its contents kept', async () => {
    const data = join(root, 'old');
    mkdirSync(join(data, 'policies'), { recursive: true });
    mkdirSync(join(data, 'runs', 'r1'), { recursive: true });
    const obs = Buffer.from(policyOnnx(4, 2));
    writeFileSync(join(data, 'policies', 'old.onnx'), obs);
    writeFileSync(join(data, 'runs', 'r1', 'checkpoint.json'), '{"run":"r1"}');
    for (const d of [data, join(data, 'policies'), join(data, 'runs'), join(data, 'runs', 'r1')]) chmodSync(d, 0o755);
    for (const f of [join(data, 'policies', 'old.onnx'), join(data, 'runs', 'r1', 'checkpoint.json')]) chmodSync(f, 0o644);
    // An episode database from before, readable by all.
    const first = await startService({ dataDir: data, port: 0, foxglovePort: null, mqttPort: null });
    await first.close();
    for (const f of ['episodes.db', 'episodes.db-wal', 'episodes.db-shm']) if (existsSync(join(data, f))) chmodSync(join(data, f), 0o644);
    chmodSync(data, 0o755);

    const svc = await startService({ dataDir: data, port: 0, foxglovePort: null, mqttPort: null });
    try {
      expect(loose(data)).toEqual([]);
      expect(mode(data)).toBe(0o700);
      expect(readFileSync(join(data, 'runs', 'r1', 'checkpoint.json'), 'utf8')).toBe('{"run":"r1"}');
      expect(svc.ctx.policies.list().map((p) => p.id)).toEqual(['old']);
    } finally {
      await svc.close();
    }
  });
});

describe('state files are replaced atomically', () => {
  it('a write that fails midway leaves the previous file whole and no temp file', () => {
    const dir = join(root, 'atomic');
    mkdirSync(dir);
    const file = join(dir, 'checkpoint.json');
    writeFileAtomic(file, ['{"updates": 1}']);
    expect(mode(file)).toBe(0o600);
    // The second chunk cannot be written: the first is already in the temp file when the write fails.
    expect(() => writeFileAtomic(file, ['{"updates": 2, "metrics": [', null as unknown as string])).toThrow();
    expect(readFileSync(file, 'utf8')).toBe('{"updates": 1}');
    expect(readdirSync(dir)).toEqual(['checkpoint.json']);
    writeFileAtomic(file, ['{"updates": ', '3}']);
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({ updates: 3 });
    expect(readdirSync(dir)).toEqual(['checkpoint.json']);
  });

  it('temp files a crashed earlier process left (same pid, pid reuse) do not block the write', () => {
    const dir = join(root, 'leftovers');
    mkdirSync(dir);
    const file = join(dir, 'latch.json');
    // Names of the old pid + counter scheme, as a crashed process with this pid would have left them.
    const left = Array.from({ length: 200 }, (_, i) => `latch.json.${process.pid}.${i + 1}.tmp`);
    for (const f of left) writeFileSync(join(dir, f), 'left by a crashed run');
    writeFileAtomic(file, ['{"latched": true}']);
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({ latched: true });
    expect(readdirSync(dir).sort()).toEqual(['latch.json', ...left].sort());
  });
});

describe('the policy list does not re-read unchanged files', () => {
  it('20 policies listed twice are read once each; a changed file is read again', () => {
    const dir = join(root, 'library');
    const reads: string[] = [];
    const lib = new PolicyLibrary(dir, { readFile: (f) => (reads.push(f), readFileSync(f)) });
    // Copied in beside the service (not uploaded): described at the first listing.
    for (let i = 0; i < 20; i++) writeFileSync(join(dir, `p${i}.onnx`), Buffer.from(policyOnnx(4 + i, 2, i)));
    const first = lib.list();
    expect(first).toHaveLength(20);
    expect(reads).toHaveLength(20);
    expect(lib.list()).toEqual(first);
    expect(reads).toHaveLength(20);

    // Replaced on disk: a new file version is hashed again, the others are not.
    const before = first.find((p) => p.id === 'p3')!;
    writeFileSync(join(dir, 'p3.onnx'), Buffer.from(policyOnnx(7, 2, 99)));
    utimesSync(join(dir, 'p3.onnx'), new Date(), new Date(Date.now() + 5000));
    const again = lib.list();
    expect(reads.slice(20)).toEqual([join(dir, 'p3.onnx')]);
    expect(again.find((p) => p.id === 'p3')!.sha256).not.toBe(before.sha256);

    // An upload is described as it is saved: listing it reads nothing more.
    const saved = lib.save('up', Buffer.from(policyOnnx(4, 2, 5)));
    const n = reads.length;
    expect(lib.list().find((p) => p.id === 'up')).toEqual(saved);
    expect(lib.info('up')).toEqual(saved);
    expect(reads).toHaveLength(n);
  });
});
