// The service on a fleet of robots, every part its own process: `wmrl sim-robot --profile gap` serving rosbridge over a
// real WebSocket, a second `wmrl sim-robot` over MQTT through a real Mosquitto (logged in with its own account), and
// `wmrl serve --robot a.yaml --robot b.yaml --no-job`. Through the HTTP API only: a policy deployed on each robot; an
// e-stop mid-episode (latched, the episode partial); a WMRL run whose anchor groups execute on both robots at once
// (their episodes overlap in time); the MQTT robot's process killed mid-run: every episode recorded before stays in the
// store as it was, the one in flight on the lost robot is kept partial and runs again on the other, and the run
// finishes there, naming the robot it lost.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMosquitto, type Mosquitto } from '../bridge/mqtt/mosquitto.js';
import { EpisodeStore } from '../episodes/store/store.js';
import type { EpisodeSummary, RobotStatus, RunStatus } from '../server/schemas.js';
import type { WmrlCheckpoint } from '../server/wmrl-train.js';
import { policyOnnx } from './helpers/policy-onnx.js';
import { spawnMqttStandIn, spawnStandIn, type StandInProcess } from './helpers/standin-process.js';
import { until } from './helpers/until.js';
import { reachOverMqtt, reachOverRosbridge } from './helpers/robot-yaml.js';

const dir = mkdtempSync(join(tmpdir(), 'wmrl-fleet-e2e-'));
const data = join(dir, 'data');
const SERVICE_PW = 'service-secret-fleet';
const ROBOT_PW = 'arm-b-secret-fleet';

let mosquitto: Mosquitto;
let armA: StandInProcess;
let armB: StandInProcess;
let serve: ChildProcess;
let serveOut = '';
let url = '';
let auth: Record<string, string> = {};

async function api<T>(method: 'GET' | 'POST' | 'PUT', path: string, body?: unknown, status = 200): Promise<T> {
  const binary = body instanceof Uint8Array;
  const r = await fetch(`${url}${path}`, {
    method,
    headers: { ...auth, ...(body === undefined ? {} : { 'content-type': binary ? 'application/octet-stream' : 'application/json' }) },
    ...(body === undefined ? {} : { body: binary ? Buffer.from(body) : JSON.stringify(body) }),
  });
  const text = await r.text();
  expect(r.status, `${method} ${path}: ${text}`).toBe(status);
  return JSON.parse(text) as T;
}
/** How this file polls the service over HTTP; a timeout shows what the service printed. */
const polled = { every: 100, detail: () => `the service said:\n${serveOut}` };
const run = (id: string) => api<RunStatus>('GET', `/api/runs/${id}`);
const ended = (id: string, ms = 30_000) => until(async () => ((s) => (['finished', 'failed', 'stopped'].includes(s.state) ? s : undefined))(await run(id)), `run ${id} ended`, ms, polled);
const episodes = (q = '') => api<EpisodeSummary[]>('GET', `/api/episodes?limit=10000${q}`);

// The stand-in's robot YAML (task reach), pointed at this test's stand-in; the MQTT one announces its features and
// its timings are generous enough for a loaded machine, where a stalled process must not pass for a dead one.
const yamlA = () => reachOverRosbridge('arm-a', armA.port);
const yamlB = () => reachOverMqtt({ id: 'arm-b', url: mosquitto.url, maxStateAgeMs: 1500, login: { username: 'wmrl-service', passwordEnv: 'WMRL_FLEET_SERVICE_PW' } });

beforeAll(async () => {
  mosquitto = await startMosquitto({
    users: { 'wmrl-service': SERVICE_PW, 'arm-b': ROBOT_PW },
    acl: ['user wmrl-service', 'topic readwrite wmrl/#', '', 'pattern readwrite wmrl/robots/%u/#', ''].join('\n'),
  });
  [armA, armB] = await Promise.all([
    spawnStandIn(['--profile', 'gap']),
    spawnMqttStandIn(['--profile', 'gap', '--broker', mosquitto.url, '--robot-id', 'arm-b', '--protocol', '5', '--username', 'arm-b', '--password-env', 'ARM_B_PW'], { ARM_B_PW: ROBOT_PW }),
  ]);
  writeFileSync(join(dir, 'a.yaml'), yamlA());
  writeFileSync(join(dir, 'b.yaml'), yamlB());
  serve = spawn(process.execPath, ['--import', 'tsx', 'bin/wmrl.ts', 'serve', '--robot', join(dir, 'a.yaml'), '--robot', join(dir, 'b.yaml'), '--no-job', '--port', '0', '--foxglove-port', '0', '--no-mqtt', '--data', data], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, WMRL_FLEET_SERVICE_PW: SERVICE_PW },
  });
  serve.stdout!.on('data', (d) => (serveOut += d));
  serve.stderr!.on('data', (d) => (serveOut += d));
  url = await until(async () => /serving on (http:\/\/127\.0\.0\.1:\d+)/.exec(serveOut)?.[1] ?? (serve.exitCode !== null ? 'exited' : undefined), 'the service started', 60_000, polled);
  expect(url, serveOut).not.toBe('exited');
  auth = { authorization: `Bearer ${readFileSync(join(data, 'token'), 'utf8').trim()}` };
  await api('PUT', '/api/policies/pi', policyOnnx(2 * 2 + 13, 2), 201);
}, 90_000);

afterAll(async () => {
  if (serve && serve.exitCode === null && serve.signalCode === null) {
    const exited = new Promise((r) => serve.once('exit', r));
    serve.kill('SIGTERM');
    await exited;
  }
  await Promise.all([armA?.stop(), armB?.stop()]);
  await mosquitto?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

describe('wmrl serve with a fleet: a rosbridge robot and an MQTT robot, each its own process', () => {
  it('deploys a policy on each robot; an e-stop mid-episode latches and keeps the episode partial', async () => {
    const robots = await api<RobotStatus[]>('GET', '/api/robots');
    expect(robots.map((r) => [r.id, r.kind, r.connected, r.task])).toEqual([['arm-a', 'rosbridge', true, 'reach'], ['arm-b', 'mqtt', true, 'reach']]);
    const deployed = await Promise.all(['arm-a', 'arm-b'].map((robot) => api<RunStatus>('POST', '/api/policies/pi/deploy', { robot, episodes: 1 }, 201)));
    const done = await Promise.all(deployed.map((d) => ended(d.id)));
    expect(done.map((r) => [r.robot, r.state, r.error])).toEqual([['arm-a', 'finished', null], ['arm-b', 'finished', null]]);
    // Both scored by the robot's own outcome (the rosbridge topic, the MQTT outcome channel).
    for (const robot of ['arm-a', 'arm-b']) expect((await episodes(`&robot=${robot}`)).map((e) => [e.status, typeof e.success])).toEqual([['complete', 'boolean']]);

    const d = await api<RunStatus>('POST', '/api/policies/pi/deploy', { robot: 'arm-a', episodes: 5 }, 201);
    await until(async () => (await api<string[]>('GET', `/api/runs/${d.id}/rollouts`)).length > 0, 'real frames of the deployed policy', 30_000, polled);
    const stopped = await api<RobotStatus>('POST', '/api/robots/arm-a/estop?reason=fleet%20test', undefined, 200);
    expect([stopped.estopped, stopped.state]).toEqual([true, 'estopped']);
    await until(async () => (await episodes('&robot=arm-a&status=partial')).length === 1, 'the e-stopped episode partial', 30_000, polled);
    // Latched: the run waits for a reset, and a new one is refused.
    expect((await run(d.id)).state).toBe('running');
    await api('POST', '/api/policies/pi/deploy', { robot: 'arm-a', episodes: 1 }, 409);
    await api('POST', `/api/runs/${d.id}/stop`);
    expect((await ended(d.id)).state).toBe('stopped');
    // The stand-in latched its own stop too: cleared at the robot by its operator, then reset through the API.
    expect(await armA.clearEstop()).toMatch(/e-stop cleared by the operator/);
    expect((await api<RobotStatus>('POST', '/api/robots/arm-a/reset')).estopped).toBe(false);
  }, 60_000);

  it('a WMRL run anchors on both robots at once; one robot killed mid-run: nothing recorded lost, its episode partial and run again, the run finished on the other', async () => {
    const before = await episodes();
    const tiny = { pretrain: { bcEpisodes: 3, bcEpochs: 5, daggerRounds: 0, wmEpisodes: 4, wmEpochs: 2, wmMembers: 3, wmHidden: [32] }, calibrate: 0, updates: 3, prompts: 1, group: 2, imagine: 1, anchorGroups: 1, imagined: false };
    const started = await api<RunStatus>('POST', '/api/runs/wmrl-train', { robot: 'arm-a', fleet: ['arm-a', 'arm-b'], ...tiny }, 201);
    const id = started.id;
    const anchorsOf = async (robot: string) => (await episodes(`&robot=${robot}`)).filter((e) => e.policyVersion.startsWith('wmrl-'));
    // Both robots have finished anchor episodes, and one is recording on the MQTT robot: kill its process now.
    await until(async () => {
      const [a, b] = await Promise.all([anchorsOf('arm-a'), anchorsOf('arm-b')]);
      const done = (xs: EpisodeSummary[]) => xs.some((e) => e.status === 'complete');
      return done(a) && done(b) && b.some((e) => e.status === 'recording');
    }, 'anchor episodes on both robots, one recording on arm-b', 60_000, polled);
    armB.proc.kill('SIGKILL');
    const recorded = (await episodes()).filter((e) => e.status !== 'recording');

    const done = await ended(id, 90_000);
    expect([done.state, done.error]).toEqual(['finished', null]);
    expect(done.progress.phase).toBe('updates on 1 of 2 robots (lost: arm-b)');
    const after = await episodes();
    // Nothing recorded is lost: every episode finished before the kill is in the store as it was.
    for (const e of recorded) expect(after.find((x) => x.id === e.id)).toEqual(e);
    expect(after.filter((e) => before.some((b) => b.id === e.id))).toEqual(before);
    const lostEpisodes = after.filter((e) => e.robot === 'arm-b' && e.policyVersion.startsWith('wmrl-') && e.status === 'partial');
    expect(lostEpisodes).toHaveLength(1);
    expect(after.filter((e) => e.status === 'recording')).toEqual([]);

    // Robot time and wall-clock apart; the checkpoint names the fleet and the robot lost.
    const metrics = await api<Array<{ robotSeconds: number; robotWallSeconds: number }>>('GET', `/api/runs/${id}/metrics`);
    expect(metrics.at(-1)!.robotWallSeconds).toBeLessThan(metrics.at(-1)!.robotSeconds);
    const cp = JSON.parse(readFileSync(done.checkpoint!, 'utf8')) as WmrlCheckpoint;
    expect(cp).toMatchObject({ fleet: ['arm-a', 'arm-b'], updates: 3, policy: { id } });
    expect(cp.lostRobots!.map((l) => l.robot)).toEqual(['arm-b']);
    expect(cp.lostRobots![0]!.message).toMatch(new RegExp(`^robot 'arm-b' \\(mqtt\\) disconnected during episode ${lostEpisodes[0]!.id}: .*; the episode is kept as partial$`));
    expect(cp.episodes).toContain(lostEpisodes[0]!.id);
    expect((await api<RobotStatus>('GET', '/api/robots/arm-b')).connected).toBe(false);

    // The service's store read once it has stopped: both robots' anchor episodes overlapped in time, and the lost
    // episode's start state ran again, to its end, on arm-a.
    const exited = new Promise((r) => serve.once('exit', r));
    serve.kill('SIGTERM');
    await exited;
    const store = EpisodeStore.open(join(data, 'episodes.db'));
    try {
      const anchors = store.list().filter((e) => e.meta.policyVersion.startsWith('wmrl-')).map((e) => {
        const ep = store.get(e.meta.id);
        // At least the episode's steps at the robot's control rate (50 Hz): a lower bound of its wall-clock span.
        return { robot: e.meta.robot, status: e.status, seed: (e.meta.extra as { seed: number }).seed, version: e.meta.policyVersion, from: e.meta.startedAt, to: e.meta.startedAt + (ep.steps.length * 1000) / 50 };
      });
      const [a, b] = [anchors.filter((x) => x.robot === 'arm-a'), anchors.filter((x) => x.robot === 'arm-b')];
      expect(a.some((x) => b.some((y) => x.to > x.from && y.to > y.from && x.from < y.to && y.from < x.to)), JSON.stringify(anchors)).toBe(true);
      const lost = anchors.find((x) => x.robot === 'arm-b' && x.status === 'partial')!;
      expect(a.some((x) => x.status === 'complete' && x.seed === lost.seed && x.version === lost.version && x.from > lost.from), JSON.stringify(anchors)).toBe(true);
    } finally {
      store.close();
    }
  }, 150_000);
});
