// A robot over rosbridge (the sim stand-in in its own process) hosted in its own control thread: its deployed
// policy keeps its control rate while the service's thread is blocked (the in-process sim beside it, on that thread,
// does not), its episodes are recorded step by step into the service's store by the thread, the e-stop latches at
// once through the shared flag and is confirmed by the robot, and a store opened by a control thread leaves the
// episodes the service's thread is recording alone.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadRobotConfig } from '../hardware/config.js';
import { RosRobot } from '../hardware/robots/ros.js';
import { SafetyStop } from '../hardware/safety.js';
import { EpisodeStore } from '../episodes/store/store.js';
import { EstopFlag, WorkerRobotHost } from '../server/control-worker.js';
import { latchFile } from '../server/estop-latch.js';
import { policyRun } from '../server/jobs.js';
import { LocalRobotHost } from '../server/robot-host.js';
import { RunManager } from '../server/runs.js';
import type { RunStatus, StreamEvent } from '../server/schemas.js';
import { startService, type Service } from '../server/service.js';
import { policyOnnx } from './helpers/policy-onnx.js';
import { injector } from './helpers/service.js';
import { spawnStandIn, type StandInProcess } from './helpers/standin-process.js';
import { allowedCpus, parseCpuList } from '../server/cpu-affinity.js';
import { sleep, until } from './helpers/until.js';

const dir = mkdtempSync(join(tmpdir(), 'wmrl-control-thread-'));
const data = join(dir, 'data');
let arm: StandInProcess;
let svc: Service;
let auth: Record<string, string>;
const errors: Error[] = [];

const inject = injector(() => svc);
const runState = async (id: string) => (await inject({ url: `/api/runs/${id}` })).json<RunStatus>();
// Without its outcome topic: the service's clock paces the episodes, not the robot's step reports.
const yaml = () =>
  readFileSync('launch/robots/sim-reach.yaml', 'utf8')
    .replace('name: sim-reach', 'name: arm')
    .replace('ws://127.0.0.1:9090', `ws://127.0.0.1:${arm.port}`)
    .replace(/^outcome_topic: .*$/m, '');
/** Holds this thread for `ms` without yielding to its event loop. */
function block(ms: number): void {
  const end = performance.now() + ms;
  let spins = 0;
  while (performance.now() < end) spins++;
  expect(spins).toBeGreaterThan(0);
}

beforeAll(async () => {
  arm = await spawnStandIn(['--profile', 'gap']);
  writeFileSync(join(dir, 'arm.yaml'), yaml());
  svc = await startService({ dataDir: data, port: 0, foxglovePort: null, mqttPort: null, robots: [{ id: 'sim', task: 'reach', profile: 'gap' }, { yaml: join(dir, 'arm.yaml') }], onError: (e) => errors.push(e) });
  auth = { authorization: `Bearer ${svc.token}` };
  const up = await inject({ method: 'PUT', url: '/api/policies/pi', headers: { ...auth, 'content-type': 'application/octet-stream' }, payload: Buffer.from(policyOnnx(2 * 2 + 13, 2)) });
  expect(up.statusCode, up.body).toBe(201);
}, 90_000);

afterAll(async () => {
  await svc?.close();
  await arm?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('a robot over rosbridge in its own control thread', () => {
  it('is hosted in a thread running the control thread module (the TypeScript source, under tsx); the in-process sim is not', () => {
    const host = svc.ctx.robots.get('arm')!;
    expect(host).toBeInstanceOf(WorkerRobotHost);
    expect((host as WorkerRobotHost).threadModule).toMatch(/\/server\/control-worker-thread\.ts$/);
    expect(host.controlThread).not.toBeNull();
    expect(svc.ctx.robots.get('sim')!.controlThread).toBeNull();
    expect(host.status()).toMatchObject({ id: 'arm', kind: 'rosbridge', connected: true, task: 'reach', estopped: false, robotStopped: null });
    expect(host.scene?.format).toBe('wmrl-scene/1');
  });

  it("keeps its control rate while the service's thread is blocked; the sim on that thread stops; its episodes are recorded step by step", async () => {
    const arm = svc.ctx.robots.get('arm')!;
    const sim = svc.ctx.robots.get('sim')!;
    const deployed = await inject({ method: 'POST', url: '/api/policies/pi/deploy', headers: auth, payload: { robot: 'arm', episodes: 1000 } });
    expect(deployed.statusCode, deployed.body).toBe(201);
    const expert = svc.ctx.runs.start('expert-session', { robot: 'sim', episodes: 1000, imagined: false, clone: false });
    const ids = [deployed.json<RunStatus>().id, expert.id];
    try {
      await until(() => arm.ticks.between(performance.now() - 500, Infinity).length > 10 && sim.ticks.between(performance.now() - 500, Infinity).length > 10, 'both robots stepping', 20_000);
      const a = performance.now();
      block(1000);
      const b = performance.now();
      // The thread's ticks of the blocked time arrive, in order, once this thread reads its messages again.
      await until(() => arm.ticks.between(b, Infinity).length > 0, 'a tick after the block', 20_000);
      const expected = arm.spec.controlHz * ((b - a) / 1000);
      // A quarter of its rate at least, on a machine others may load; the blocked thread's robot none at all (a tick may land at either edge).
      expect(arm.ticks.between(a, b).length).toBeGreaterThanOrEqual(0.25 * expected);
      expect(sim.ticks.between(a + 25, b - 25)).toEqual([]);
    } finally {
      for (const id of ids) expect((await inject({ method: 'POST', url: `/api/runs/${id}/stop`, headers: auth })).json<RunStatus>().state).toBe('stopped');
    }
    const episodes = svc.ctx.store.list({ robot: 'arm' });
    expect(episodes.length).toBeGreaterThanOrEqual(1);
    // Every episode finished (the last by the stop), its steps in order with none missing.
    for (const e of episodes) {
      expect(['complete', 'partial']).toContain(e.status);
      const steps = svc.ctx.store.get(e.meta.id).steps.map((s) => s.seq);
      expect(steps).toEqual(steps.map((_, i) => i));
    }
    expect(errors).toEqual([]);
  }, 60_000);

  it('e-stop: latched at once, the robot confirms, nothing applied after; the episode partial; reset at the robot and through the API releases it', async () => {
    const host = svc.ctx.robots.get('arm')!;
    const run = await inject({ method: 'POST', url: '/api/policies/pi/deploy', headers: auth, payload: { robot: 'arm', episodes: 5 } });
    expect(run.statusCode, run.body).toBe(201);
    const id = run.json<RunStatus>().id;
    // Mid-episode: a few steps in, far from its end.
    const episode = await until(() => svc.ctx.runs.rollouts(id).find((ep) => ((n) => n >= 3 && n <= 60)(svc.ctx.runs.rollout(id, ep)!.real.length)), 'an episode under way', 20_000);
    const stopping = host.estop('bumped the table');
    // Latched before any message went: the shared flag.
    expect(host.safety.isEstopped).toBe(true);
    await stopping;
    expect(host.status()).toMatchObject({ state: 'estopped', estopped: true, connected: true });
    expect(readFileSync(latchFile(data, 'arm'), 'utf8')).toMatch(/bumped the table/);
    const applied = host.stepsApplied;
    await sleep(300);
    expect(host.stepsApplied).toBe(applied);
    const partial = await until(() => svc.ctx.store.list({ robot: 'arm' }).find((e) => e.meta.id === episode && e.status === 'partial'), 'the e-stopped episode partial', 20_000);
    expect(partial.steps).toBeGreaterThanOrEqual(3);
    expect(host.status().interventions.estop).toBeGreaterThanOrEqual(1);
    expect((await inject({ method: 'POST', url: `/api/runs/${id}/stop`, headers: auth })).json<RunStatus>().state).toBe('stopped');
    // The stand-in latched its own stop: refused until the operator clears it there.
    expect((await inject({ method: 'POST', url: '/api/robots/arm/reset', headers: auth })).json()).toMatchObject({ code: 'WMRL_ROBOT_UNAVAILABLE', message: expect.stringMatching(/it stays e-stopped/) });
    expect(host.safety.isEstopped).toBe(true);
    expect(await arm.clearEstop()).toMatch(/e-stop cleared/);
    const reset = await inject({ method: 'POST', url: '/api/robots/arm/reset', headers: auth });
    expect(reset.statusCode, reset.body).toBe(200);
    expect(reset.json()).toMatchObject({ state: 'idle', estopped: false });
    expect(host.safety.isEstopped).toBe(false);
    expect(existsSync(latchFile(data, 'arm'))).toBe(false);
    expect((await runState(id)).state).toBe('stopped');
  }, 60_000);

  it('a control thread that dies: the robot shows disconnected, the run fails naming it, its episode is kept as partial; an e-stop then latches here', async () => {
    const host = svc.ctx.robots.get('arm') as WorkerRobotHost;
    const run = await inject({ method: 'POST', url: '/api/policies/pi/deploy', headers: auth, payload: { robot: 'arm', episodes: 1000 } });
    expect(run.statusCode, run.body).toBe(201);
    const id = run.json<RunStatus>().id;
    await until(() => svc.ctx.runs.rollouts(id).length > 0 && host.ticks.between(performance.now() - 200, Infinity).length > 3, 'the policy stepping', 20_000);
    // What a crash of the thread does: it stops where it is, closing neither its robot link nor its episode.
    await (host as unknown as { worker: Worker }).worker.terminate();
    const failed = await until(async () => ((s) => (s.state === 'running' ? undefined : s))(await runState(id)), 'the run ended', 20_000);
    expect(failed.state).toBe('failed');
    expect(failed.error).toMatch(/^robot 'arm': its control thread exited \(code 1\) during episode (\S+); the episode is kept as partial$/);
    expect(host.status()).toMatchObject({ connected: false, run: null });
    const episode = svc.ctx.store.get(/during episode (\S+);/.exec(failed.error!)![1]!);
    expect(episode.status).toBe('partial');
    expect(episode.steps.length).toBeGreaterThan(0);
    expect(svc.ctx.store.list({ status: 'recording' })).toEqual([]);
    expect(errors.map((e) => e.message)).toEqual(["robot 'arm': its control thread exited (code 1)", `run ${id} failed: ${failed.error}`]);
    errors.length = 0;
    const stop = await inject({ method: 'POST', url: '/api/robots/arm/estop?reason=thread%20gone', headers: auth });
    expect([stop.statusCode, stop.json().code]).toEqual([503, 'WMRL_ROBOT_UNAVAILABLE']);
    expect(host.safety.isEstopped).toBe(true);
    expect(readFileSync(latchFile(data, 'arm'), 'utf8')).toMatch(/thread gone/);
    expect((await inject({ method: 'POST', url: '/api/policies/pi/deploy', headers: auth, payload: { robot: 'arm', episodes: 1 } })).json().code).toBe('WMRL_ROBOT_ESTOPPED');
  }, 60_000);
});

describe('the shared e-stop flag', () => {
  it("latched as an episode's reset was to go out: the reset is not sent, that episode ends unrecorded as partial (estop), the run waits for the robot's reset and goes on", async () => {
    const work = join(dir, 'at-reset');
    mkdirSync(work);
    const store = EpisodeStore.open(join(work, 'episodes.db'));
    const policy = join(work, 'pi.onnx');
    writeFileSync(policy, policyOnnx(2 * 2 + 13, 2));
    let resets = 0;
    let latched: Promise<void> | null = null;
    const ref: { host?: LocalRobotHost } = {};
    // What the control thread's guard does when the flag is up: latch the layer, send nothing.
    const host = await LocalRobotHost.create({
      id: 'sim', task: 'reach', profile: 'nominal', watchdog: false,
      guard: (what) => {
        if (what !== 'reset' || ++resets !== 2) return;
        latched = ref.host!.estop('raised at the reset');
        throw new SafetyStop('estop', 'e-stop latched; the reset was not sent');
      },
    });
    ref.host = host;
    const runs = new RunManager({ store, robots: new Map([['sim', host]]), dataDir: work, policyPath: () => policy, onError: (e) => errors.push(e) });
    runs.register(policyRun);
    const ends: string[] = [];
    runs.events.on('event', (e: StreamEvent) => {
      if (e.type === 'episode' && e.phase === 'end') ends.push(e.status);
    });
    try {
      const run = runs.start('policy', { robot: 'sim', policy: 'pi', episodes: 2 });
      await until(() => latched !== null, 'the e-stop at the second reset', 20_000);
      await latched;
      await sleep(200);
      expect(runs.get(run.id).status.state).toBe('running');
      expect(ends).toEqual(['complete', 'partial (estop)']);
      expect(store.list().map((e) => e.status)).toEqual(['complete']);
      await host.reset();
      const done = await until(() => ((s) => (s.state === 'running' ? undefined : s))(runs.get(run.id).status), 'the run finished', 30_000);
      expect([done.state, done.error]).toEqual(['finished', null]);
      expect(ends).toEqual(['complete', 'partial (estop)', 'complete']);
      expect(store.list().map((e) => e.status)).toEqual(['complete', 'complete']);
      expect(errors).toEqual([]);
    } finally {
      await runs.stopAll();
      await host.dispose();
      store.close();
    }
  }, 60_000);

  it('each raise is taken once, with its reason; a reason too long is cut to the room there is', () => {
    const service = new EstopFlag();
    const thread = new EstopFlag(service.buffer);
    expect(thread.take()).toBeNull();
    expect(service.raise('first')).toBe(1);
    expect(service.raise('second, é')).toBe(2);
    expect(thread.take()).toBe('second, é');
    expect(thread.take()).toBeNull();
    expect([thread.taken, service.generation]).toEqual([2, 2]);
    service.raise('x'.repeat(5000));
    expect(thread.take()).toHaveLength(1024);
  });
});

describe('a control thread started on its own', () => {
  it("a rosbridge robot is connected once its observation can be read: joint states and, where the YAML declares them, features", async () => {
    const cfg = loadRobotConfig(join(dir, 'arm.yaml'));
    const robot = await RosRobot.connect(cfg, { timeoutMs: 5000 });
    try {
      expect((await robot.observe()).features).toHaveLength(13);
    } finally {
      await robot[Symbol.asyncDispose]();
    }
    await expect(RosRobot.connect({ ...cfg, featuresTopic: '/nobody/publishes/this' }, { timeoutMs: 1000 })).rejects.toThrow(/timed out after 1000 ms: no features on \/nobody\/publishes\/this from ws:/);
  });


  it('a robot it cannot reach fails the start, naming it; once disposed, the thread is gone and calls on it fail', async () => {
    const store = EpisodeStore.open(join(dir, 'own.db'));
    try {
      writeFileSync(join(dir, 'nowhere.yaml'), yaml().replace(`:${arm.port}`, ':9'));
      await expect(WorkerRobotHost.start({ id: 'nowhere', config: loadRobotConfig(join(dir, 'nowhere.yaml')), store, onError: (e) => errors.push(e) })).rejects.toThrow(/^robot 'nowhere': cannot reach it over rosbridge at ws:\/\/127\.0\.0\.1:9/);
      const host = await WorkerRobotHost.start({ id: 'again', config: loadRobotConfig(join(dir, 'arm.yaml')), watchdog: false, store, onError: (e) => errors.push(e) });
      expect(host.status()).toMatchObject({ id: 'again', connected: true, estopped: false });
      expect((await host.safety.observe()).position).toHaveLength(2);
      await host.dispose();
      expect(host.connected).toBe(false);
      await expect(host.safety.observe()).rejects.toThrow(/^robot 'again': its control thread exited/);
      expect(errors).toEqual([]);
    } finally {
      store.close();
    }
  }, 60_000);
});

describe("the service's own thread beside control threads", () => {
  it('lowers its priority (servingNice) and leaves a CPU to the control threads once a robot has one, which takes the nice it asks for (controlNice); not for the in-process sim alone', () => {
    const script = join(dir, 'nice.mts');
    writeFileSync(
      script,
      `import { readFileSync } from 'node:fs';
      import { startService } from ${JSON.stringify(pathToFileURL(resolve('server/service.ts')).href)};
      const [robot, data] = process.argv.slice(2);
      const svc = await startService({ dataDir: data, port: 0, foxglovePort: null, mqttPort: null, servingNice: 10, controlNice: 5, isolateControl: true, ...(robot === 'sim' ? {} : { robots: [{ yaml: robot }] }) });
      const stat = readFileSync('/proc/thread-self/stat', 'utf8');
      const cpus = readFileSync('/proc/thread-self/status', 'utf8').match(/^Cpus_allowed_list:\\s*(.+)$/m)[1];
      const control = [...svc.ctx.robots.values()][0].controlThread;
      process.stdout.write(JSON.stringify({ serving: Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]), servingCpus: cpus, control: control ? control.priority : null }));
      await svc.close();`,
    );
    const nice = (robot: string) => {
      const r = spawnSync(process.execPath, ['--import', 'tsx', script, robot, join(dir, `nice-${robot === 'sim' ? 'sim' : 'arm'}`)], { encoding: 'utf8', timeout: 90_000 });
      expect(r.status, r.stderr).toBe(0);
      return JSON.parse(r.stdout) as { serving: number; servingCpus: string; control: unknown };
    };
    // With two CPUs or more the control thread has the last to itself and serving the others (isolateControl).
    const cpus = allowedCpus('/proc/self');
    const split = cpus.length >= 2 ? { control: { asked: cpus.at(-1), allowed: [cpus.at(-1)], refused: null }, serving: cpus.slice(0, -1) } : null;
    const arm = nice(join(dir, 'arm.yaml'));
    expect(arm).toMatchObject({ serving: 10, control: { asked: 5, nice: 5, refused: null } });
    if (split) {
      expect((arm.control as { cpu: unknown }).cpu).toEqual(split.control);
      expect(parseCpuList(arm.servingCpus)).toEqual(split.serving);
    } else {
      expect((arm.control as { cpu: { refused: string } }).cpu.refused).toMatch(/none to give the control threads alone/);
    }
    // The in-process sim alone has no control thread: nothing lowered, nothing pinned.
    const sim = nice('sim');
    expect(sim).toMatchObject({ serving: 0, control: null });
    expect(parseCpuList(sim.servingCpus)).toEqual(cpus);
  }, 120_000);
});
