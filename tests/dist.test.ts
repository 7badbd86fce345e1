// The build (bin/build.mjs, `npm run build`, run by npm ci): every product module transpiled into its own
// folder with plain node, no tsx — the CLI's version, help, a verb on the sim's assets and one whose sandbox
// children run from the build — and bin/wmrl.mjs's check that a build still matches the sources.
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SOURCE_FOLDERS, buildState, sourceFiles } from '../bin/build.mjs';
import { policyOnnx } from './helpers/policy-onnx.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
// Inside the package (the built code finds package.json and node_modules above it), not dist/, which bin/wmrl.mjs may be running.
const OUT = join(ROOT, 'test-artifacts', `dist-${process.pid}-${Date.now()}`);
const NO_TS = join(ROOT, 'tests', 'fixtures', 'no-typescript.mjs');
const work = mkdtempSync(join(tmpdir(), 'wmrl-dist-'));
chmodSync(work, 0o755); // a sandbox run as root drops to nobody, who reads the module program there

/** The built CLI with plain node from a folder outside the package; any TypeScript or tsx import fails the run. */
const built = (...args: string[]) =>
  spawnSync(process.execPath, ['--import', NO_TS, join(OUT, 'bin', 'wmrl.js'), ...args], { cwd: work, encoding: 'utf8', timeout: 120_000, env: { ...process.env, NODE_OPTIONS: '' } });

beforeAll(() => {
  const r = spawnSync(process.execPath, ['bin/build.mjs', '--out', relative(ROOT, OUT)], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
  expect(r.status, r.stderr).toBe(0);
  expect(r.stdout).toMatch(/^built \d+ modules into test-artifacts\/dist-\S+\/ in [\d.]+ s$/m);
}, 60_000);
afterAll(() => {
  rmSync(OUT, { recursive: true, force: true });
  rmSync(work, { recursive: true, force: true });
});

describe('the build', () => {
  it('transpiles every product .ts file into the same layout, with its source map, and nothing else', () => {
    const sources = sourceFiles();
    expect(sources).toContain('bin/wmrl.ts');
    expect(sources).toContain('autoresearch/sandbox-runner.ts');
    for (const f of sources) {
      const js = join(OUT, f.replace(/\.ts$/, '.js'));
      expect(existsSync(js), f).toBe(true);
      expect(readFileSync(js, 'utf8')).toMatch(/\/\/# sourceMappingURL=\S+\.js\.map\n$/);
      expect(existsSync(`${js}.map`), f).toBe(true);
    }
    const top = readdirSync(OUT).sort();
    expect(top).toEqual([...SOURCE_FOLDERS, 'build-manifest.json'].sort());
    const files = readdirSync(OUT, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => e.name);
    expect(files.filter((f) => !/\.js(\.map)?$/.test(f))).toEqual(['build-manifest.json']);
    expect(files).toHaveLength(2 * sources.length + 1);
  });

  it('builds every folder of code tsconfig.json includes but the viewer, the benchmarks and the tests', () => {
    const include = (JSON.parse(readFileSync(join(ROOT, 'tsconfig.json'), 'utf8')) as { include: string[] }).include;
    // web/ is Vite's (dist/web), launch/ holds no code, bench/ and tests/ run from their sources.
    expect([...include].sort()).toEqual([...SOURCE_FOLDERS, 'web', 'launch', 'bench', 'tests', '*.ts'].sort());
  });

  it('removes what an earlier build left of a source that is gone', () => {
    const stale = join(OUT, 'common', 'removed-module.js');
    writeFileSync(stale, 'export {};\n');
    writeFileSync(`${stale}.map`, '{}');
    const r = spawnSync(process.execPath, ['bin/build.mjs', '--out', relative(ROOT, OUT)], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
    expect(r.status, r.stderr).toBe(0);
    expect(existsSync(stale)).toBe(false);
    expect(existsSync(`${stale}.map`)).toBe(false);
    expect(existsSync(join(OUT, 'common', 'package-root.js'))).toBe(true);
  }, 60_000);

  it('refuses an output folder outside the package or on the sources', () => {
    for (const out of [work, 'bin', '.']) {
      const r = spawnSync(process.execPath, ['bin/build.mjs', '--out', out], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
      expect(r.status, out).toBe(1);
      expect(r.stderr).toMatch(/must be a new folder inside .* and outside its sources/);
    }
  });
});

describe('the built CLI, with plain node (no tsx, no TypeScript module loaded)', () => {
  it('--version, --help and bench --help: package.json and the bench folder found from the package root', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    const v = built('--version');
    expect(v.status, v.stderr).toBe(0);
    expect(v.stdout.trim()).toBe(pkg.version);
    const h = built('--help');
    expect(h.status, h.stderr).toBe(0);
    for (const verb of ['serve', 'drive', 'episodes', 'train', 'research', 'bench', 'sim-robot', 'inspect']) expect(h.stdout).toMatch(new RegExp(`^  ${verb} `, 'm'));
    const b = built('bench', '--help');
    expect(b.status, b.stderr).toBe(0);
    expect(b.stdout.replace(/\s+/g, ' ')).toMatch(/name +autoresearch, .*embodied, .*vla/);
  });

  it('drive records on the sim robot (its MJCF scene and the gap profile YAML) and prints JSON', () => {
    const store = join(work, 'episodes.db');
    const r = built('drive', '--robot', 'sim:push:gap', '--episodes', '1', '--steps', '5', '--fast', '--store', store, '--json');
    expect(r.status, r.stderr).toBe(0);
    const doc = JSON.parse(r.stdout) as { store: string; episodes: Array<{ steps: number; status: string }> };
    expect(doc.store).toBe(store);
    expect(doc.episodes).toEqual([expect.objectContaining({ steps: 5, status: 'complete' })]);
    const l = built('episodes', 'list', '--store', store, '--json');
    expect(l.status, l.stderr).toBe(0);
    expect((JSON.parse(l.stdout) as { episodes: Array<{ hardwareProfile: string }> }).episodes).toEqual([expect.objectContaining({ hardwareProfile: 'gap' })]);
  });

  it('research runs its proposals in sandbox children started from the build', () => {
    const out = join(work, 'research');
    const r = built('research', '--task', 'controller', '--algo', 'standard', '--groups-per-step', '1', '--group-size', '2', '--eval-seeds', '1', '--steps', '1', '--out', out, '--json');
    expect(r.status, r.stderr).toBe(0);
    const doc = JSON.parse(r.stdout) as { executed: number; steps: Array<{ executions: number; failedExecutions: number }> };
    expect(doc.executed).toBeGreaterThan(0);
    expect(doc.steps).toHaveLength(1);
    expect(doc.steps[0]!.failedExecutions).toBe(0);
  }, 120_000);

  it("a sandbox child of the build is the built runner with plain node: no tsx loader on its command line", async () => {
    const prog = join(work, 'argv.mjs');
    writeFileSync(prog, 'export function run() { return { execArgv: process.execArgv, runner: process.argv[1] }; }\n');
    chmodSync(prog, 0o644);
    const script = join(work, 'pool.mjs');
    writeFileSync(script, `import { SandboxPool } from ${JSON.stringify(pathToFileURL(join(OUT, 'autoresearch', 'sandbox.js')).href)};
      const pool = SandboxPool.create({ slots: 1 });
      try {
        process.stdout.write(JSON.stringify(await pool.run({ program: { kind: 'module', path: ${JSON.stringify(prog)}, export: 'run' }, input: {} })));
      } finally {
        await pool.close();
      }`);
    const r = spawnSync(process.execPath, ['--import', NO_TS, script], { cwd: work, encoding: 'utf8', timeout: 60_000, env: { ...process.env, NODE_OPTIONS: '' } });
    expect(r.status, r.stderr).toBe(0);
    const o = JSON.parse(r.stdout) as { ok: boolean; value: { execArgv: string[]; runner: string } };
    expect(o.ok, r.stdout).toBe(true);
    expect(o.value.runner).toBe(join(OUT, 'autoresearch', 'sandbox-runner.js'));
    expect(o.value.execArgv.filter((a) => !a.startsWith('--max-old-space-size='))).toEqual([]);
  }, 60_000);
});

describe("the built service's control threads", () => {
  it('a robot over rosbridge (the built sim-robot) is hosted in a control thread running the built module with plain node; a deployed policy records its episode', async () => {
    const robot = spawn(process.execPath, ['--import', NO_TS, join(OUT, 'bin', 'wmrl.js'), 'sim-robot', '--port', '0', '--profile', 'gap'], { cwd: work, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NODE_OPTIONS: '' } });
    try {
      let out = '';
      const port = await new Promise<string>((resolve, reject) => {
        robot.stdout!.on('data', (d) => {
          out += d;
          const m = /serving rosbridge v2 on ws:\/\/[^:]+:(\d+)/.exec(out);
          if (m) resolve(m[1]!);
        });
        robot.once('exit', (code) => reject(new Error(`the built sim-robot exited (${code}): ${out}`)));
      });
      const yaml = join(work, 'arm.yaml');
      writeFileSync(yaml, readFileSync(join(ROOT, 'launch', 'robots', 'sim-reach.yaml'), 'utf8').replace('ws://127.0.0.1:9090', `ws://127.0.0.1:${port}`));
      const policy = join(work, 'pi.onnx');
      writeFileSync(policy, policyOnnx(2 * 2 + 13, 2));
      const script = join(work, 'serve-thread.mjs');
      writeFileSync(script, `import { copyFileSync } from 'node:fs';
        import { startService } from ${JSON.stringify(pathToFileURL(join(OUT, 'server', 'service.js')).href)};
        const svc = await startService({ dataDir: ${JSON.stringify(join(work, 'serve-data'))}, port: 0, foxglovePort: null, mqttPort: null, robots: [{ yaml: ${JSON.stringify(yaml)}, id: 'arm' }] });
        try {
          const host = svc.ctx.robots.get('arm');
          copyFileSync(${JSON.stringify(policy)}, svc.ctx.policies.path('pi'));
          const run = svc.ctx.runs.start('policy', { robot: 'arm', policy: 'pi', episodes: 1 });
          while (!['finished', 'failed', 'stopped'].includes(svc.ctx.runs.get(run.id).status.state)) await new Promise((r) => setTimeout(r, 50));
          process.stdout.write(JSON.stringify({ module: host.threadModule, run: svc.ctx.runs.get(run.id).status, episodes: svc.ctx.store.list({ robot: 'sim-reach' }).map((e) => [e.status, e.steps]) }));
        } finally {
          await svc.close();
        }`);
      const r = spawnSync(process.execPath, ['--import', NO_TS, script], { cwd: work, encoding: 'utf8', timeout: 90_000, env: { ...process.env, NODE_OPTIONS: '' } });
      expect(r.status, r.stderr).toBe(0);
      const o = JSON.parse(r.stdout) as { module: string; run: { state: string; error: string | null }; episodes: Array<[string, number]> };
      expect(o.module).toBe(pathToFileURL(join(OUT, 'server', 'control-worker-thread.js')).href);
      expect([o.run.state, o.run.error]).toEqual(['finished', null]);
      expect(o.episodes).toHaveLength(1);
      expect(o.episodes[0]![0]).toBe('complete');
      expect(o.episodes[0]![1]).toBeGreaterThan(0);
    } finally {
      robot.kill('SIGTERM');
    }
  }, 120_000);
});

describe('buildState: bin/wmrl.mjs runs a build only while it matches the sources', () => {
  const manifest = join(OUT, 'build-manifest.json');
  const withManifest = (edit: (m: { inputs: Record<string, number> }) => void, check: () => void) => {
    const text = readFileSync(manifest, 'utf8');
    const m = JSON.parse(text) as { inputs: Record<string, number> };
    edit(m);
    writeFileSync(manifest, JSON.stringify(m));
    try {
      check();
    } finally {
      writeFileSync(manifest, text);
    }
  };

  it('a fresh build is current; its entry is the built bin/wmrl.js', () => {
    expect(buildState(OUT)).toEqual({ current: true, reason: '', built: true, entry: pathToFileURL(join(OUT, 'bin', 'wmrl.js')).href });
  });

  it('a source changed, added or removed since the build, or a missing build, is named', () => {
    withManifest((m) => (m.inputs['sim/profiles.ts']! -= 1000), () => expect(buildState(OUT)).toMatchObject({ current: false, built: true, reason: 'sim/profiles.ts changed since the build' }));
    withManifest((m) => delete m.inputs['common/package-root.ts'], () => expect(buildState(OUT).reason).toBe('common/package-root.ts is newer than the build'));
    withManifest((m) => (m.inputs['bin/gone.ts'] = 1), () => expect(buildState(OUT).reason).toBe('bin/gone.ts was removed since the build'));
    withManifest((m) => (m.inputs['tsconfig.json']! += 1), () => expect(buildState(OUT).reason).toBe('tsconfig.json changed since the build'));
    expect(buildState(join(work, 'nothing-here'))).toMatchObject({ current: false, built: false, reason: expect.stringMatching(/nothing-here\/ is not built$/) });
  });
});
