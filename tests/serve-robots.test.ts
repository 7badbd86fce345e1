// The service hosting the robots robot YAMLs declare, each robot its own process: the sim stand-in serving rosbridge
// (`wmrl sim-robot --profile gap`) and one reached over MQTT behind a real Mosquitto (`wmrl sim-robot --transport mqtt`,
// logged in with its own broker account). Through the API: both listed and connected, a policy deployed on each
// (episodes recorded, real frames and Foxglove joint states from the robots' states), an e-stop mid-episode (latched,
// persisted, the episode partial, the robot's own stop cleared only at the robot), a robot process killed mid-run (shown
// disconnected, the run stops with an error naming it, the episode partial) and back (shown connected again), and the
// rosbridge robot killed during a WMRL run on it.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebSocket } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMosquitto, type Mosquitto } from '../bridge/mqtt/mosquitto.js';
import { latchFile } from '../server/estop-latch.js';
import { parse } from '@foxglove/rosmsg';
import { MessageReader } from '@foxglove/rosmsg2-serialization';
import { FoxgloveClient } from '../server/foxglove-protocol.js';
import type { RobotStatus, RunStatus } from '../server/schemas.js';
import { startService, type Service } from '../server/service.js';
import { policyOnnx } from './helpers/policy-onnx.js';
import { injector } from './helpers/service.js';
import { spawnMqttStandIn, spawnStandIn, type StandInProcess } from './helpers/standin-process.js';
import { until } from './helpers/until.js';
import { reachOverMqtt, reachOverRosbridge } from './helpers/robot-yaml.js';

const dir = mkdtempSync(join(tmpdir(), 'wmrl-serve-robots-'));
const data = join(dir, 'data');
const SERVICE_PW = 'service-secret-e2e';
const ROBOT_PW = 'arm-b-secret-e2e';
process.env.WMRL_E2E_SERVICE_PW = SERVICE_PW;

let mosquitto: Mosquitto;
let armA: StandInProcess;
let armB: StandInProcess;
let svc: Service;
let auth: Record<string, string>;
/** Faults the service reported (a run that failed): asserted, not printed. */
const errors: Error[] = [];

const inject = injector(() => svc);
const robot = async (id: string) => (await inject({ url: `/api/robots/${id}` })).json<RobotStatus>();
const run = async (id: string) => (await inject({ url: `/api/runs/${id}` })).json<RunStatus>();
const ended = (id: string) => until(async () => ((s) => (['finished', 'failed', 'stopped'].includes(s.state) ? s : undefined))(await run(id)), `run ${id} ended`, 30_000);
const episodesOf = (name: string) => svc.ctx.store.list({ robot: name });
/** Deploys policy `pi` on `robot` and waits until the robot has applied steps of an episode of it. */
async function deployRunning(robotId: string, episodes: number): Promise<string> {
  const d = await inject({ method: 'POST', url: '/api/policies/pi/deploy', headers: auth, payload: { robot: robotId, episodes } });
  expect(d.statusCode, d.body).toBe(201);
  const id = d.json<RunStatus>().id;
  await until(async () => (await inject({ url: `/api/runs/${id}/rollouts` })).json<string[]>().length > 0, `real frames of run ${id}`, 20_000);
  return id;
}

// The stand-in's robot YAML (its task: reach), pointed at this test's stand-in.
const yamlA = () => reachOverRosbridge('arm-a', armA.port);
// Over MQTT the robot announces its features; timings generous enough for a loaded 2-core machine, where a stalled
// process must not pass for a dead one.
const yamlB = () => reachOverMqtt({ id: 'arm-b', url: mosquitto.url, maxStateAgeMs: 1500, login: { username: 'wmrl-service', passwordEnv: 'WMRL_E2E_SERVICE_PW' } });
const mqttArgs = () => ['--broker', mosquitto.url, '--robot-id', 'arm-b', '--protocol', '5', '--username', 'arm-b', '--password-env', 'ARM_B_PW'];

beforeAll(async () => {
  // Closed, as a production broker is: the service's account sees every robot, a robot's only its own topics.
  mosquitto = await startMosquitto({
    users: { 'wmrl-service': SERVICE_PW, 'arm-b': ROBOT_PW },
    acl: ['user wmrl-service', 'topic readwrite wmrl/#', '', 'pattern readwrite wmrl/robots/%u/#', ''].join('\n'),
  });
  [armA, armB] = await Promise.all([spawnStandIn(['--profile', 'gap']), spawnMqttStandIn(mqttArgs(), { ARM_B_PW: ROBOT_PW })]);
  writeFileSync(join(dir, 'a.yaml'), yamlA());
  writeFileSync(join(dir, 'b.yaml'), yamlB());
  svc = await startService({ dataDir: data, port: 0, foxglovePort: 0, mqttPort: null, robots: [{ yaml: join(dir, 'a.yaml') }, { yaml: join(dir, 'b.yaml') }], onError: (e) => errors.push(e) });
  auth = { authorization: `Bearer ${svc.token}` };
  const obsDim = 2 * 2 + 13;
  const up = await inject({ method: 'PUT', url: '/api/policies/pi', headers: { ...auth, 'content-type': 'application/octet-stream' }, payload: Buffer.from(policyOnnx(obsDim, 2)) });
  expect(up.statusCode, up.body).toBe(201);
}, 90_000);

afterAll(async () => {
  await svc?.close();
  await Promise.all([armA?.stop(), armB?.stop()]);
  await mosquitto?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

describe('serve with robot YAMLs: a rosbridge robot and an MQTT robot, each its own process', () => {
  it('lists both robots, connected, with their transport, task and the task scene they are drawn in', async () => {
    const robots = (await inject({ url: '/api/robots' })).json<RobotStatus[]>();
    expect(robots.map((r) => [r.id, r.kind, r.connected, r.task, r.profile, r.estopped, r.robotStopped])).toEqual([
      ['arm-a', 'rosbridge', true, 'reach', 'real', false, null],
      ['arm-b', 'mqtt', true, 'reach', 'real', false, null],
    ]);
    expect(robots[1]!.joints).toEqual(['shoulder', 'elbow']);
    expect((await inject({ url: '/api/robots/arm-b/scene' })).json<{ format: string }>().format).toBe('wmrl-scene/1');
  });

  it('deploys a policy on each through its safety layer: episodes recorded (scored by the outcome topic, over MQTT by the outcome channel), real frames and Foxglove joint states from the robots', async () => {
    const ws = new WebSocket(svc.foxglove!.url, [FoxgloveClient.SUPPORTED_SUBPROTOCOL]);
    ws.binaryType = 'arraybuffer';
    const client = new FoxgloveClient({ ws: ws as unknown as ConstructorParameters<typeof FoxgloveClient>[0]['ws'] });
    const channels = await new Promise<Array<{ id: number; topic: string; schema: string }>>((resolve, reject) => {
      client.on('advertise', resolve);
      client.on('error', reject);
    });
    const jointStates = channels.find((c) => c.topic === '/arm-b/joint_states')!;
    client.subscribe(jointStates.id);
    const received: Array<{ position: number[] }> = [];
    // sensor_msgs/msg/JointState in CDR, decoded from the schema the channel advertises.
    const jointState = new MessageReader(parse(jointStates.schema, { ros2: true }));
    client.on('message', (m) => received.push(jointState.readMessage(m.data) as { position: number[] }));
    try {
      const starts = await Promise.all(['arm-a', 'arm-b'].map((r) => inject({ method: 'POST', url: '/api/policies/pi/deploy', headers: auth, payload: { robot: r, episodes: 1 } })));
      const runs = await Promise.all(starts.map((s) => ended(s.json<RunStatus>().id)));
      expect(runs.map((r) => [r.robot, r.state, r.error])).toEqual([['arm-a', 'finished', null], ['arm-b', 'finished', null]]);
      const [a, b] = [episodesOf('arm-a'), episodesOf('arm-b')];
      expect(a.map((e) => e.status)).toEqual(['complete']);
      // The rosbridge stand-in reports each step's outcome: the episode has a success, true or false.
      expect(typeof a[0]!.success).toBe('boolean');
      // The MQTT stand-in publishes each step's outcome too: scored, it ends at success or at the task's horizon.
      expect(b.map((e) => [e.status, typeof e.success, e.steps <= 100])).toEqual([['complete', 'boolean', true]]);
      for (const r of runs) {
        const [episode] = (await inject({ url: `/api/runs/${r.id}/rollouts` })).json<string[]>();
        const frames = (await inject({ url: `/api/runs/${r.id}/rollouts/${episode}` })).json<{ real: Array<{ q: number[]; poses: number[] }> }>().real;
        // A robot steps on its own clock: on a loaded machine its episode's horizon can pass after few commands.
        expect(frames.length).toBeGreaterThan(2);
        expect(frames.at(-1)!.q).toHaveLength(2);
        // Posed in the task's scene from the robot's joint positions.
        expect(frames.at(-1)!.poses.length).toBeGreaterThan(0);
        expect(new Set(frames.map((f) => f.q.join())).size).toBeGreaterThan(1);
      }
      expect(received.length).toBeGreaterThan(20);
      expect(received.at(-1)!.position).toHaveLength(2);
    } finally {
      client.close();
    }
  }, 60_000);

  it('jobs a robot cannot run are refused, naming why; a robot whose YAML task observes another robot is refused at start', async () => {
    const refusals: Array<[string, Record<string, unknown>, RegExp]> = [
      ['expert-session', { robot: 'arm-a' }, /^robot 'arm-a' is a rosbridge robot \(arm-a\), not the in-process sim: the expert session needs the sim's scripted expert/],
      ['vla-train', { robot: 'arm-a' }, /^robot 'arm-a' is a rosbridge robot .*: the VLA recipe needs the gap sim/],
      ['wmrl-train', { robot: 'arm-a', task: 'push' }, /^options\.task 'push' contradicts robot 'arm-a', whose task is 'reach'$/],
    ];
    for (const [kind, payload, message] of refusals) {
      const r = await inject({ method: 'POST', url: `/api/runs/${kind}`, headers: auth, payload });
      expect([r.statusCode, r.json().code], r.body).toEqual([400, 'WMRL_VALIDATION']);
      expect(r.json().message).toMatch(message);
    }
    writeFileSync(join(dir, 'push.yaml'), yamlA().replace('task: reach', 'task: push'));
    await expect(startService({ dataDir: join(dir, 'other'), port: 0, foxglovePort: null, mqttPort: null, robots: [{ yaml: join(dir, 'push.yaml'), id: 'pusher' }] })).rejects.toThrow(/^robot 'pusher' \(.*push\.yaml\): its task 'push' observes another robot .*: (joint|feature) \d+: task 'push' has/);
  });

  it('wmrl-train on the rosbridge robot: pretrained in its task, anchor episodes on it scored by its outcome topic, imagined rollouts posed in the task', async () => {
    const tiny = { pretrain: { bcEpisodes: 3, bcEpochs: 5, daggerRounds: 0, wmEpisodes: 4, wmEpochs: 2, wmMembers: 3, wmHidden: [32] }, calibrate: 0, updates: 1, prompts: 1, group: 2, imagine: 1, anchorGroups: 1 };
    const started = await inject({ method: 'POST', url: '/api/runs/wmrl-train', headers: auth, payload: { robot: 'arm-a', ...tiny } });
    expect(started.statusCode, started.body).toBe(201);
    const done = await ended(started.json<RunStatus>().id);
    expect([done.state, done.error]).toEqual(['finished', null]);
    const cp = JSON.parse(readFileSync(done.checkpoint!, 'utf8')) as { task: string; profile: string; episodes: string[]; policy: { id: string } };
    expect(cp).toMatchObject({ task: 'reach', profile: 'real', policy: { id: done.id } });
    expect(cp.episodes.length).toBeGreaterThanOrEqual(2);
    const anchors = episodesOf('arm-a').filter((e) => cp.episodes.includes(e.meta.id));
    expect(anchors.map((e) => [e.status, e.meta.policyVersion !== '', typeof e.success])).toEqual(cp.episodes.map(() => ['complete', true, 'boolean']));
    const [episode] = (await inject({ url: `/api/runs/${done.id}/rollouts` })).json<string[]>();
    const frames = (await inject({ url: `/api/runs/${done.id}/rollouts/${episode}` })).json<{ imagined: Array<{ source: string; members: number[][]; poses: number[][] }> }>();
    expect(frames.imagined[0]).toMatchObject({ source: 'world-model' });
    expect(frames.imagined[0]!.members).toHaveLength(3);
    expect(frames.imagined[0]!.poses[0]!.length).toBeGreaterThan(0);
    expect((await inject({ url: `/api/policies/${done.id}` })).json().metadata).toMatchObject({ source: 'wmrl', task: 'reach' });
  }, 60_000);

  it('e-stop mid-episode: latched and persisted, the episode partial; the robot\'s own stop is cleared only at the robot, then reset releases it', async () => {
    const id = await deployRunning('arm-a', 5);
    const stop = await inject({ method: 'POST', url: '/api/robots/arm-a/estop?reason=gripper%20jammed', headers: auth });
    expect(stop.statusCode, stop.body).toBe(200);
    expect(stop.json<RobotStatus>()).toMatchObject({ state: 'estopped', estopped: true, connected: true });
    expect(readFileSync(latchFile(data, 'arm-a'), 'utf8')).toMatch(/gripper jammed/);
    await until(() => episodesOf('arm-a').some((e) => e.status === 'partial'), 'the e-stopped episode finished as partial', 20_000);
    // Latched: the run waits for the reset; once it is stopped, nothing starts on the robot either.
    expect((await run(id)).state).toBe('running');
    expect((await inject({ method: 'POST', url: `/api/runs/${id}/stop`, headers: auth })).statusCode).toBe(200);
    expect((await ended(id)).state).toBe('stopped');
    expect((await inject({ method: 'POST', url: '/api/policies/pi/deploy', headers: auth, payload: { robot: 'arm-a', episodes: 1 } })).json().code).toBe('WMRL_ROBOT_ESTOPPED');
    // The stand-in latched its own e-stop: a reset over the API is refused and the service's latch holds.
    const refused = await inject({ method: 'POST', url: '/api/robots/arm-a/reset', headers: auth });
    expect(refused.statusCode).toBe(503);
    expect(refused.json()).toMatchObject({ code: 'WMRL_ROBOT_UNAVAILABLE', message: expect.stringMatching(/robot 'arm-a' did not reset: .*e-stopped.*it stays e-stopped/) });
    expect((await robot('arm-a')).estopped).toBe(true);
    expect(existsSync(latchFile(data, 'arm-a'))).toBe(true);
    expect(await armA.clearEstop()).toMatch(/e-stop cleared by the operator/);
    const reset = await inject({ method: 'POST', url: '/api/robots/arm-a/reset', headers: auth });
    expect(reset.statusCode, reset.body).toBe(200);
    expect(reset.json<RobotStatus>()).toMatchObject({ state: 'idle', estopped: false });
    expect(existsSync(latchFile(data, 'arm-a'))).toBe(false);
  }, 60_000);

  it('a robot process killed mid-run: shown disconnected, the run stops with an error naming it, the episode kept partial; back, shown connected', async () => {
    const before = episodesOf('arm-b').length;
    const id = await deployRunning('arm-b', 5);
    armB.proc.kill('SIGKILL');
    const failed = await ended(id);
    expect(failed.state).toBe('failed');
    expect(failed.error).toMatch(/^robot 'arm-b' \(mqtt\) disconnected during episode \S+: .*; the episode is kept as partial$/);
    expect(errors.map((e) => e.message)).toEqual([`run ${id} failed: ${failed.error}`]);
    expect(failed.checkpoint).not.toBeNull();
    expect(JSON.parse(readFileSync(failed.checkpoint!, 'utf8'))).toMatchObject({ stoppedEarly: true, episodesDone: 0 });
    expect((await robot('arm-b')).connected).toBe(false);
    const eps = episodesOf('arm-b');
    expect(eps).toHaveLength(before + 1);
    expect(eps.at(-1)!.status).toBe('partial');
    const refused = await inject({ method: 'POST', url: '/api/policies/pi/deploy', headers: auth, payload: { robot: 'arm-b' } });
    expect(refused.statusCode).toBe(503);
    expect(refused.json().message).toMatch(/robot 'arm-b' is disconnected/);

    armB = await spawnMqttStandIn(mqttArgs(), { ARM_B_PW: ROBOT_PW });
    await until(async () => (await robot('arm-b')).connected, 'arm-b connected again', 20_000);
  }, 60_000);

  it('a rosbridge robot killed during a WMRL run: its anchor episode kept partial, the run fails naming it with the policy of its last update; back on its port, connected again', async () => {
    const tiny = { pretrain: { bcEpisodes: 3, bcEpochs: 5, daggerRounds: 0, wmEpisodes: 4, wmEpochs: 2, wmMembers: 3, wmHidden: [32] }, calibrate: 0, updates: 3, prompts: 1, group: 2, imagine: 1, anchorGroups: 1, imagined: false };
    const started = await inject({ method: 'POST', url: '/api/runs/wmrl-train', headers: auth, payload: { robot: 'arm-a', ...tiny } });
    expect(started.statusCode, started.body).toBe(201);
    const id = started.json<RunStatus>().id;
    await until(async () => (await inject({ url: `/api/runs/${id}/rollouts` })).json<string[]>().length > 0, 'an anchor episode on arm-a', 45_000);
    const port = armA.port;
    armA.proc.kill('SIGKILL');
    const failed = await ended(id);
    expect(failed.state).toBe('failed');
    expect(failed.error).toMatch(/^robot 'arm-a' \(rosbridge\) disconnected during episode (\S+): .*; the episode is kept as partial$/);
    const episode = /during episode (\S+):/.exec(failed.error!)![1]!;
    const cp = JSON.parse(readFileSync(failed.checkpoint!, 'utf8')) as { episodes: string[]; stoppedDuring: string; policy: { id: string } | null };
    expect(cp).toMatchObject({ stoppedDuring: 'training', policy: { id } });
    expect(cp.episodes).toContain(episode);
    expect(episodesOf('arm-a').find((e) => e.meta.id === episode)!.status).toBe('partial');
    // No episode the trainer had queued started after the failure.
    expect(episodesOf('arm-a').filter((e) => e.status === 'recording')).toEqual([]);
    expect((await robot('arm-a')).connected).toBe(false);
    armA = await spawnStandIn(['--profile', 'gap', '--port', String(port)]);
    await until(async () => (await robot('arm-a')).connected, 'arm-a reconnected', 20_000);
  }, 90_000);
});
