// `--json` on the verbs that end with a table: stdout is one JSON document and nothing else (no table, no
// progress bar), messages and progress go to stderr. One test per kind of verb: the episode verbs, a trainer
// with its file's description (bc, inspect), and a client of the running service (deploy). `train` and
// `research` are checked in their own CLI tests.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startService } from '../server/service.js';
import { policyOnnx } from './helpers/policy-onnx.js';

const dir = mkdtempSync(join(tmpdir(), 'wmrl-json-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const wmrl = (...args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', 'bin/wmrl.ts', ...args], { encoding: 'utf8', timeout: 120_000 });
const db = join(dir, 'episodes.db');

/** stdout parsed as one JSON document: it fails on a table, a progress line or a message left there. */
function json<T>(r: { status: number | null; stdout: string; stderr: string }): T {
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as T;
}

describe('--json', () => {
  it('drive, episodes list and export: the episodes, the same ids in each', () => {
    const d = wmrl('drive', '--robot', 'sim:reach', '--episodes', '2', '--fast', '--store', db, '--json');
    const drove = json<{ store: string; successes: number; episodes: Array<{ id: string; steps: number; status: string; success: boolean }> }>(d);
    expect(drove.store).toBe(db);
    expect(drove.episodes).toHaveLength(2);
    expect(drove.successes).toBe(drove.episodes.filter((e) => e.success).length);
    for (const e of drove.episodes) expect(e).toMatchObject({ id: expect.stringMatching(/^[0-9a-f-]{36}$/), status: 'complete', steps: expect.any(Number) });
    expect(d.stderr).toMatch(/\] 2\/2 episode /);

    const listed = json<{ episodes: Array<{ id: string; robot: string; hardwareProfile: string; steps: number; startedAt: number }> }>(wmrl('episodes', 'list', '--store', db, '--json'));
    expect(listed.episodes.map((e) => e.id)).toEqual(drove.episodes.map((e) => e.id));
    expect(listed.episodes.map((e) => e.steps)).toEqual(drove.episodes.map((e) => e.steps));
    expect(listed.episodes[0]).toMatchObject({ robot: 'sim-reach-nominal', hardwareProfile: 'nominal', startedAt: expect.any(Number) });

    const bags = join(dir, 'bags');
    const x = wmrl('export', '--out', bags, '--store', db, '--json');
    const exported = json<{ out: string; episodes: Array<{ id: string; file: string }> }>(x);
    expect(exported.episodes.map((e) => e.id)).toEqual(drove.episodes.map((e) => e.id));
    for (const e of exported.episodes) expect(existsSync(e.file)).toBe(true);
    expect(x.stderr).toMatch(/\] 2\/2 /);
  });

  it('bc: the losses of every epoch; inspect: the inputs, outputs and metadata of the policy it wrote', () => {
    const out = join(dir, 'bc.onnx');
    const b = json<{ out: string; policy: string; episodes: number; losses: number[] }>(wmrl('bc', '--from', `store:${db}`, '--robot', 'sim:reach', '--out', out, '--epochs', '3', '--batch', '32', '--json'));
    expect(b).toMatchObject({ out, policy: 'gaussian_mlp', episodes: 2 });
    expect(b.losses).toHaveLength(3);
    for (const l of b.losses) expect(Number.isFinite(l)).toBe(true);
    const info = json<{ file: string; inputs: Array<{ name: string; shape: unknown[] }>; outputs: Array<{ name: string }>; metadata: Record<string, string> }>(wmrl('inspect', out, '--json'));
    expect(info.file).toBe(out);
    expect(info.inputs.map((i) => i.name)).toContain('obs');
    expect(info.outputs.map((o) => o.name)).toContain('action');
    expect(info.metadata.policy_version).toBe('bc-1');
  });

  it('deploy: the uploaded policy and the finished run', async () => {
    const svc = await startService({ dataDir: join(dir, 'deploy-data'), port: 0, foxglovePort: null, mqttPort: null });
    try {
      const spec = svc.ctx.robots.get('sim')!.sim.spec;
      const file = join(dir, 'json-policy.onnx');
      writeFileSync(file, policyOnnx(spec.joints.length * 2 + (spec.features?.length ?? 0), 2));
      // The service runs in this process: the CLI is spawned without blocking its event loop.
      const r = await new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
        const p = spawn(process.execPath, ['--import', 'tsx', 'bin/wmrl.ts', 'deploy', file, '--url', svc.url, '--episodes', '1', '--token-file', svc.tokenFile, '--json'], { stdio: ['ignore', 'pipe', 'pipe'] });
        let stdout = '', stderr = '';
        p.stdout.on('data', (d) => (stdout += d));
        p.stderr.on('data', (d) => (stderr += d));
        p.once('exit', (status) => resolve({ status, stdout, stderr }));
      });
      const doc = json<{ policy: { id: string; sha256: string }; robot: string; run: { id: string; state: string; progress: { done: number; total: number } } }>(r);
      expect(doc.policy.id).toBe('json-policy');
      expect(doc.robot).toBe('sim');
      expect(doc.run).toMatchObject({ state: 'finished', progress: { done: 1, total: 1 } });
      // The human lines went to stderr.
      expect(r.stderr).toMatch(/uploaded .*json-policy\.onnx as policy 'json-policy'/);
    } finally {
      await svc.close();
    }
  }, 60_000);
});
