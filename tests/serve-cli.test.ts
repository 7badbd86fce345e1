// `wmrl serve` (what `npm start` runs) as its own process: it starts on embedded defaults, prints the
// viewer URL and the token file, serves the viewer and the API, and Ctrl-C (SIGINT) finishes the
// episode being recorded and checkpoints the run. `wmrl deploy` then talks to a running service.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { benchNames } from '../bench/lib/names.js';
import { EpisodeStore } from '../episodes/store/store.js';
import { startService } from '../server/service.js';
import { policyOnnx } from './helpers/policy-onnx.js';

const dir = mkdtempSync(join(tmpdir(), 'wmrl-serve-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const wmrl = (...args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', 'bin/wmrl.ts', ...args], { encoding: 'utf8', timeout: 60_000 });

describe('wmrl serve', () => {
  it('starts the WMRL trainer as its default job, shows pretraining progress, and Ctrl-C during pretraining checkpoints it', async () => {
    const data = join(dir, 'data-wmrl');
    const p = spawn(process.execPath, ['--import', 'tsx', 'bin/wmrl.ts', '--port', '0', '--foxglove-port', '0', '--mqtt-port', '0', '--data', data], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (err += d));
    const exited = new Promise<number | null>((resolve) => p.once('exit', resolve));
    const t0 = Date.now();
    while (!/\] \d+\/\d+ pretraining: demonstrations/.test(err) && Date.now() - t0 < 60_000 && p.exitCode === null) await new Promise((r) => setTimeout(r, 100));
    expect(err).toMatch(/\] \d+\/150 pretraining: demonstrations/);
    // The product's defaults: the robot reports its last 4 commands, the run calibrates before its updates.
    expect(out).toMatch(/robot sim: +sim \(reach, profile gap, reporting its last 4 commands\)/);
    expect(out).toMatch(/default job: +run wmrl-train-\S+: WMRL post-training .*, calibration \(16 robot episodes identify the robot; the clone learns the task again in the sim as identified\), then 8 updates of 128 groups × 8 rollouts imagined in the sim as the calibration identified it \(MuJoCo, each start written in from the state the robot reported\), 0.5 anchor group\(s\) per update/);
    p.kill('SIGINT');
    expect(await exited).toBe(0);
    const row = /^(wmrl-train-\S+)\s+stopped\s+.*?(\S+checkpoint\.json)$/m.exec(out);
    expect(row, out).not.toBeNull();
    expect(JSON.parse(readFileSync(row![2]!, 'utf8'))).toMatchObject({ run: row![1], stoppedEarly: true, stoppedDuring: 'pretraining', policy: null });
  });

  it('starts on embedded defaults, prints where the viewer and the token are, and shuts down gracefully on SIGINT', async () => {
    const data = join(dir, 'data');
    const p = spawn(process.execPath, ['--import', 'tsx', 'bin/wmrl.ts', 'serve', '--port', '0', '--foxglove-port', '0', '--mqtt-port', '0', '--data', data, '--job', 'expert-session', '--episodes', '50'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (err += d));
    const exited = new Promise<number | null>((resolve) => p.once('exit', resolve));
    const t0 = Date.now();
    // Off a terminal the progress bar prints a line per tenth of the run.
    while (!/\] \d+\/50 true success/.test(err) && Date.now() - t0 < 60_000 && p.exitCode === null) await new Promise((r) => setTimeout(r, 100));
    expect(err).toMatch(/\] 5\/50 true success \d\.\d\d \[\d\.\d\d, \d\.\d\d\]/);
    const url = /serving on (http:\/\/127\.0\.0\.1:\d+)/.exec(out)![1]!;
    expect(out).toMatch(new RegExp(`viewer: +${url.replace(/\./g, '\\.')}/#token=[0-9a-f]{64}`));
    expect(out).toContain(`access token: ${join(data, 'token')} (mode 0600`);
    expect(out).toMatch(/Foxglove: +ws:\/\/127\.0\.0\.1:\d+/);
    expect(out).toMatch(/MQTT broker: +mqtt:\/\/127\.0\.0\.1:\d+/);
    expect(statSync(join(data, 'token')).mode & 0o777).toBe(0o600);
    const html = await (await fetch(`${url}/`)).text();
    expect(html).toContain('<canvas id="scene">');
    expect(html).toContain('E-STOP');
    expect(((await (await fetch(`${url}/api/robots`)).json()) as Array<{ state: string }>)[0]!.state).toBe('running');

    p.kill('SIGINT');
    expect(await exited).toBe(0);
    expect(out).toMatch(/shutting down: finishing the episode being recorded, checkpointing runs/);
    const row = /^(expert-session-\S+)\s+stopped\s+(\d+)\/50\s+.*?(\S+checkpoint\.json)$/m.exec(out);
    expect(row, out).not.toBeNull();
    const cp = JSON.parse(readFileSync(row![3]!, 'utf8')) as { episodes: string[]; stoppedEarly: boolean; policy: { id: string } | null };
    expect(cp.stoppedEarly).toBe(true);
    // The checkpoint of the stopped run left the policy cloned from the episodes so far.
    expect(cp.policy!.id).toBe(`bc-${row![1]}`);
    expect(existsSync(join(data, 'policies', `${cp.policy!.id}.onnx`))).toBe(true);
    // The episode being recorded at Ctrl-C was finished (partial), not left 'recording'.
    const store = EpisodeStore.open(join(data, 'episodes.db'));
    try {
      expect(store.list({ status: 'recording' })).toHaveLength(0);
      expect(store.list().length).toBe(cp.episodes.length);
      expect(store.list({ status: 'complete' }).length).toBeGreaterThanOrEqual(1);
    } finally {
      store.close();
    }
  });

  it('a robot e-stopped before a restart stays stopped: no default job, and how to reset it is printed', async () => {
    const data = join(dir, 'data-latched');
    const before = await startService({ dataDir: data, port: 0, foxglovePort: null, mqttPort: null });
    await before.ctx.robots.get('sim')!.estop('gripper jammed');
    await before.close();
    const p = spawn(process.execPath, ['--import', 'tsx', 'bin/wmrl.ts', 'serve', '--port', '0', '--foxglove-port', '0', '--no-mqtt', '--data', data, '--job', 'expert-session', '--episodes', '5'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (out += d));
    const exited = new Promise<number | null>((resolve) => p.once('exit', resolve));
    const t0 = Date.now();
    while (!/Ctrl-C stops/.test(out) && Date.now() - t0 < 60_000 && p.exitCode === null) await new Promise((r) => setTimeout(r, 100));
    expect(out).toContain('robot sim is E-STOPPED (gripper jammed); the default job is not started');
    const url = /serving on (http:\/\/127\.0\.0\.1:\d+)/.exec(out)![1]!;
    expect(out).toContain(`curl -X POST -H "Authorization: Bearer $(cat ${join(data, 'token')})" ${url}/api/robots/sim/reset`);
    expect(out).toContain("the viewer's reset button");
    expect(out).not.toMatch(/default job: +run/);
    const robots = (await (await fetch(`${url}/api/robots`)).json()) as Array<{ state: string; run: string | null; stepsApplied: number }>;
    expect(robots[0]).toMatchObject({ state: 'estopped', run: null, stepsApplied: 0 });
    p.kill('SIGINT');
    expect(await exited).toBe(0);
  });

  it('--help on every command; bad options are errors naming the option', () => {
    for (const c of ['serve', 'drive', 'episodes', 'export', 'deploy', 'bench', 'sim-robot', 'inspect', 'demo']) {
      const h = wmrl(c, '--help');
      expect(h.status, c).toBe(0);
      expect(h.stdout).toMatch(new RegExp(`^usage: wmrl ${c} `));
    }
    const bad = wmrl('serve', '--port', 'eighty');
    expect(bad.status).toBe(1);
    expect(bad.stderr).toMatch(/--port must be a port number \(0-65535\), got 'eighty'/);
  });

  it('bench lists every benchmark file and passes --seed and --combine on to the harness', () => {
    const names = benchNames();
    expect(names).toContain('vla');
    const h = wmrl('bench', '--help');
    for (const n of names) expect(h.stdout.replace(/\s+/g, ' ')).toMatch(new RegExp(`[ ,]${n}(,|\\s|$)`));
    // The harness (bench/run.ts) answers both: a benchmark that has no seed or nothing to combine is refused by name.
    const seeded = wmrl('bench', 'sim', '--seed', '1');
    expect(seeded.status).toBe(1);
    expect(seeded.stderr).toMatch(/benchmark 'sim' takes no --seed/);
    const combined = wmrl('bench', 'sim', '--combine');
    expect(combined.status).toBe(1);
    expect(combined.stderr).toMatch(/benchmark 'sim' has nothing to combine/);
  });

  it('export writes every complete episode as MCAP with a summary table', () => {
    const db = join(dir, 'ex.db');
    expect(wmrl('drive', '--robot', 'sim:reach', '--episodes', '2', '--fast', '--store', db).status).toBe(0);
    const r = wmrl('export', '--out', join(dir, 'bags'), '--store', db);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/exported 2 episode\(s\)/);
    expect(r.stdout).toMatch(/episode\s+steps\s+status\s+robot\s+file/);
    const ids = [...r.stdout.matchAll(/bags\/([0-9a-f-]{36})\.mcap/g)].map((m) => m[1]!);
    expect(ids).toHaveLength(2);
    for (const id of ids) expect(existsSync(join(dir, 'bags', `${id}.mcap`))).toBe(true);
    const none = wmrl('export', 'no-such-id', '--out', join(dir, 'bags'), '--store', db);
    expect(none.status).toBe(1);
    expect(none.stderr).toMatch(/no-such-id/);
  });

  it('deploy uploads a policy to a running service and follows its run to the end', async () => {
    const svc = await startService({ dataDir: join(dir, 'deploy-data'), port: 0, foxglovePort: null, mqttPort: null });
    try {
      const spec = svc.ctx.robots.get('sim')!.sim.spec;
      const file = join(dir, 'my-policy.onnx');
      writeFileSync(file, policyOnnx(spec.joints.length * 2 + (spec.features?.length ?? 0), 2));
      // The service runs in this process: the CLI is spawned without blocking its event loop.
      const deploy = (args: string[], env: NodeJS.ProcessEnv = process.env) =>
        new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
          const p = spawn(process.execPath, ['--import', 'tsx', 'bin/wmrl.ts', 'deploy', file, '--url', svc.url, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
          let out = '';
          let err = '';
          p.stdout.on('data', (d) => (out += d));
          p.stderr.on('data', (d) => (err += d));
          p.once('exit', (code) => resolve({ code, out, err }));
        });
      const { code, out, err } = await deploy(['--episodes', '1', '--token-file', svc.tokenFile]);
      expect(code, err).toBe(0);
      expect(out).toMatch(/uploaded .*my-policy\.onnx as policy 'my-policy'/);
      expect(out).toMatch(/deployed on robot 'sim': run policy-/);
      expect(out).toMatch(/policy-\S+\s+finished\s+1\/1/);
      expect(svc.ctx.store.list().at(-1)!.meta.policyVersion).toBe('my-policy');
      const wrong = await deploy([], { ...process.env, WMRL_TOKEN: 'f'.repeat(64) });
      expect(wrong.code).toBe(1);
      expect(wrong.err).toMatch(/wmrl deploy: PUT \/api\/policies\/my-policy: 401 WMRL_UNAUTHORIZED: the access token is wrong/);
    } finally {
      await svc.close();
    }
  });
});
