// The service a user runs: the episode store, the robots, the run manager, the HTTP/WebSocket API with
// the viewer, the Foxglove endpoint and the embedded MQTT broker, started and stopped together.
import { setPriority } from 'node:os';
import { cpuSplit, pinProcess, type CpuSplit } from './cpu-affinity.js';
import { join } from 'node:path';
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { loadOrCreateMqttCredentials } from '../bridge/mqtt/auth.js';
import { startEmbeddedBroker, type EmbeddedBroker } from '../bridge/mqtt/broker.js';
import { EpisodeStore } from '../episodes/store/store.js';
import { loadRobotConfig } from '../hardware/config.js';
import { buildApp, type App, type AppContext, type AppOptions } from './app.js';
import { Auth, loadOrCreateToken, type AuthOptions } from './auth.js';
import { EPISODES_DB, preparePrivateDataDir } from './data-dir.js';
import { latchFile } from './estop-latch.js';
import { startFoxglove, type FoxgloveEndpoint } from './foxglove.js';
import { HostPolicy, type HostPolicyOptions } from '../common/host-policy.js';
import { packageVersion } from '../common/package-root.js';
import { expertSession, policyRun } from './jobs.js';
import { PolicyLibrary } from './policy-library.js';
import { THREADED_TRANSPORTS, WorkerRobotHost } from './control-worker.js';
import { LocalRobotHost, type RobotHost } from './robot-host.js';
import { RunManager, type JobDefinition } from './runs.js';
import { wmrlTrain } from './wmrl-train.js';
import { researchJob } from './research-job.js';
import { vlaTrain } from './vla-train.js';
import { StreamHub } from './stream-hub.js';

export interface ServiceOptions {
  /** The data folder: episodes.db, token, policies/, runs/. */
  dataDir: string;
  host?: string;
  /** HTTP port; 0 = any free port. */
  port?: number;
  /** Foxglove WebSocket port; null = no endpoint. */
  foxglovePort?: number | null;
  /** Embedded MQTT broker port; null = no broker. */
  mqttPort?: number | null;
  /** The robots (default: one sim robot 'sim', reach under the gap profile): in-process sims, and robots robot YAMLs declare. */
  robots?: ServiceRobot[];
  /** Extra job kinds, beside the built-in ones (wmrl-train, vla-train, expert-session, policy, research). */
  jobs?: JobDefinition[];
  viewerDir?: string;
  logger?: boolean;
  auth?: AuthOptions;
  /** Largest policy upload, bytes (default 64 MiB). */
  policyBodyLimit?: number;
  /** Safety watchdogs of the robots (default on). */
  watchdog?: boolean;
  /**
   * The nice value this thread (HTTP, streaming, exports, the in-process sims) lowers itself to once robots' control
   * threads run, which keep theirs (Linux: a thread's own; `wmrl serve`: PRIORITIES). Unset or 0: unchanged.
   */
  servingNice?: number;
  /**
   * The nice value robots' control threads ask for (`wmrl serve`: PRIORITIES; below 0 needs root or CAP_SYS_NICE;
   * refused, a thread runs at the service's and its `controlThread.priority` says why). Unset: the service's.
   */
  controlNice?: number;
  /**
   * Linux, two CPUs or more: robots' control threads run on the last CPU the service may use and every other thread
   * of the service on the others (`wmrl serve`: PRIORITIES). Where it cannot, the service says why and runs unpinned.
   */
  isolateControl?: boolean;
  /** Faults of background work (a run that failed, the broker): reported, never swallowed. */
  onError?: (e: Error) => void;
  /** The reward API's service (autoresearch/), served under /reward; its owner closes it. */
  reward?: AppOptions['reward'];
  /** False: /reward takes requests without the access token (default: it needs it). */
  rewardAuth?: boolean;
  /** Host names the API and the Foxglove endpoint answer to besides loopback, their addresses and the bound host. */
  allowedHosts?: HostPolicyOptions['allowedHosts'];
  /** Browser origins besides the service's own that may open its WebSockets (/api/stream, Foxglove). */
  allowedOrigins?: HostPolicyOptions['allowedOrigins'];
}

/** The priorities `wmrl serve` runs at (Linux nice values and CPUs, per thread): on a busy host robots' control loops come first. */
export const PRIORITIES = { servingNice: 10, controlNice: -10, isolateControl: true } as const;

/** A sim robot: a task under a hardware profile; `urdf`: the robot's URDF, which the viewer then draws it from. */
export interface SimRobotEntry {
  id: string;
  task: string;
  profile: string;
  seed?: number;
  urdf?: string;
  commandHistory?: number;
  /** Side of its square camera image, px (a VLA reads it). */
  image?: number;
  /** ROS packages of its URDF: name → folder (`package://name/...`). */
  packages?: Record<string, string>;
}

/** The robot a robot YAML declares (rosbridge, native ROS 2, MQTT), reached over its transport. */
export interface YamlRobotEntry {
  /** Path of the robot YAML (hardware/config.ts). */
  yaml: string;
  /** The robot's id in the API (default: the YAML's name). */
  id?: string;
  urdf?: string;
  packages?: Record<string, string>;
}

export type ServiceRobot = SimRobotEntry | YamlRobotEntry;

/** An id the API can name a robot by (schemas.ts Id). */
const ROBOT_ID = /^[A-Za-z0-9._-]{1,128}$/;

export interface Service {
  app: App;
  ctx: AppContext;
  url: string;
  tokenFile: string;
  token: string;
  foxglove: FoxgloveEndpoint | null;
  broker: EmbeddedBroker | null;
  /** The broker's logins (service, worker, robot key; mode 0600), null without a broker. */
  mqttCredentialsFile: string | null;
  /** Stops runs (checkpointed, the episode being recorded finished), then the endpoints, then the store. */
  close(): Promise<void>;
}

const VERSION = packageVersion();

/** Moves the service's threads off the CPU its control threads are to have (cpu-affinity.ts); that CPU, or null and the reason told. */
function isolate(onError: (e: Error) => void): number | null {
  const split = cpuSplit();
  const refused = typeof split === 'string' ? split : pinProcess(split.serving);
  if (refused === null) return (split as CpuSplit).control;
  onError(new Error(`robots' control threads share the CPUs with serving: ${refused}`));
  return null;
}

export async function startService(o: ServiceOptions): Promise<Service> {
  const onError = o.onError ?? ((e: Error) => console.error(`wmrl: ${e.message}`));
  preparePrivateDataDir(o.dataDir);
  const tok = loadOrCreateToken(o.dataDir);
  const store = EpisodeStore.open(join(o.dataDir, EPISODES_DB));
  const cleanup: Array<() => Promise<void> | void> = [() => store.close()];
  const undo = async () => {
    for (const f of cleanup.reverse()) await f();
  };
  try {
    const robots = new Map<string, RobotHost>();
    const urdfPackages: Record<string, Record<string, string>> = {};
    const entries = o.robots ?? [{ id: 'sim', task: 'reach', profile: 'gap' }];
    const configs = entries.map((r) => ('yaml' in r ? loadRobotConfig(r.yaml) : null));
    const cpu = o.isolateControl && configs.some((c) => c && THREADED_TRANSPORTS.has(c.transport)) ? isolate(onError) : null;
    for (const [i, r] of entries.entries()) {
      const config = configs[i] ?? null;
      const id = 'yaml' in r ? (r.id ?? config!.spec.name) : r.id;
      const where = 'yaml' in r ? ` (${r.yaml})` : '';
      if (!ROBOT_ID.test(id)) throw new Error(`robot '${id}'${where}: a robot's id in the API is 1-128 letters, digits, '.', '_' or '-'${'yaml' in r && r.id === undefined ? " (it is the YAML's name unless an id is given)" : ''}`);
      if (robots.has(id)) throw new Error(`robot '${id}'${where}: two robots have this id`);
      const common = { urdf: r.urdf, watchdog: o.watchdog, latch: { file: latchFile(o.dataDir, id), onError } };
      let host: RobotHost;
      if (!('yaml' in r)) host = await LocalRobotHost.create({ ...r, ...common });
      else if (THREADED_TRANSPORTS.has(config!.transport)) host = await WorkerRobotHost.start({ ...common, id, config: config!, source: r.yaml, store, onError, ...(o.controlNice !== undefined ? { nice: o.controlNice } : {}), ...(cpu !== null ? { cpu } : {}) });
      else host = await LocalRobotHost.connect({ ...common, id, config: config!, source: r.yaml });
      robots.set(id, host);
      cleanup.push(() => host.dispose());
      if (r.packages) urdfPackages[id] = r.packages;
    }
    if (o.servingNice && [...robots.values()].some((r) => r.controlThread)) {
      // Node cannot raise a thread's priority without privileges; lowering serving's lets the control threads win the CPU.
      try {
        setPriority(o.servingNice);
      } catch (e) {
        onError(new Error(`the service's thread could not lower its priority to nice ${o.servingNice} (${(e as Error).message}): its robots' control threads share the CPU with serving at one priority`, { cause: e }));
      }
    }
    const policies = new PolicyLibrary(join(o.dataDir, 'policies'));
    const runs = new RunManager({ store, robots, dataDir: o.dataDir, policyPath: (id) => policies.path(id), onError });
    for (const j of [wmrlTrain, vlaTrain, expertSession, policyRun, researchJob, ...(o.jobs ?? [])] as JobDefinition[]) runs.register(j);
    cleanup.push(() => runs.stopAll());

    const hub = new StreamHub();
    const registry = new Registry();
    collectDefaultMetrics({ register: registry });
    const steps = new Counter({ name: 'wmrl_robot_commands_total', help: 'commands applied by each robot', labelNames: ['robot'], registers: [registry] });
    const episodes = new Counter({ name: 'wmrl_episodes_total', help: 'episodes finished, by outcome', labelNames: ['status'], registers: [registry] });
    new Gauge({ name: 'wmrl_stream_clients', help: 'connected WebSocket viewers', registers: [registry], collect() { this.set(hub.size); } });
    new Gauge({ name: 'wmrl_stream_frames_dropped', help: 'frames not sent to viewers that fell behind', registers: [registry], collect() { this.set(hub.dropped); } });
    new Gauge({ name: 'wmrl_robot_estopped', help: '1 while the e-stop is latched', labelNames: ['robot'], registers: [registry], collect() { for (const r of robots.values()) this.set({ robot: r.id }, r.safety.isEstopped ? 1 : 0); } });
    new Gauge({ name: 'wmrl_runs', help: 'runs by state', labelNames: ['state'], registers: [registry], collect() { this.reset(); for (const s of runs.list()) this.inc({ state: s.state }); } });
    const trueSuccess = new Gauge({ name: 'wmrl_run_true_success', help: 'latest true success rate of each run', labelNames: ['run'], registers: [registry] });

    for (const r of robots.values()) {
      r.events.on('step', () => steps.inc({ robot: r.id }));
      r.events.on('status', (status) => hub.publish({ type: 'robot', status }));
    }
    runs.events.on('event', (ev) => {
      hub.publish(ev);
      if (ev.type === 'episode' && ev.phase === 'end') episodes.inc({ status: ev.success === null ? ev.status : ev.success ? 'success' : 'failure' });
      if (ev.type === 'metrics' && ev.metrics.trueSuccess !== null) trueSuccess.set({ run: ev.run }, ev.metrics.trueSuccess);
      // A run's start and end change what its robot is doing.
      if (ev.type === 'run' && ev.status.robot) {
        const r = robots.get(ev.status.robot);
        if (r) hub.publish({ type: 'robot', status: r.status() });
      }
    });

    const hosts = new HostPolicy({ bind: o.host ?? '127.0.0.1', allowedHosts: o.allowedHosts, allowedOrigins: o.allowedOrigins });
    let foxglove: FoxgloveEndpoint | null = null;
    if (o.foxglovePort !== null && o.foxglovePort !== undefined) {
      foxglove = await startFoxglove({ host: o.host ?? '127.0.0.1', port: o.foxglovePort, robots: [...robots.values()], runs, onError, hosts });
      const fx = foxglove;
      cleanup.push(() => fx.close());
    }
    new Gauge({ name: 'wmrl_foxglove_frames_dropped', help: 'frames not sent to Foxglove clients that fell behind', registers: [registry], collect() { this.set(foxglove?.dropped() ?? 0); } });
    let broker: EmbeddedBroker | null = null;
    let mqttCredentialsFile: string | null = null;
    if (o.mqttPort !== null && o.mqttPort !== undefined) {
      // Closed: clients log in with the credentials kept beside the token (roles in bridge/mqtt/auth.ts).
      const creds = loadOrCreateMqttCredentials(o.dataDir);
      mqttCredentialsFile = creds.file;
      broker = await startEmbeddedBroker({ host: o.host ?? '127.0.0.1', port: o.mqttPort, auth: creds.credentials, onError });
      const b = broker;
      cleanup.push(() => b.close());
    }

    const ctx: AppContext = {
      store,
      robots,
      runs,
      policies,
      auth: new Auth(tok.token, o.auth),
      hub,
      registry,
      version: VERSION,
      startedAt: Date.now(),
      endpoints: () => ({ foxglove: foxglove?.url ?? null, mqtt: broker?.url ?? null }),
      onError,
    };
    const app = await buildApp(ctx, { viewerDir: o.viewerDir, logger: o.logger, policyBodyLimit: o.policyBodyLimit, reward: o.reward, rewardAuth: o.rewardAuth, hosts, urdfPackages });
    cleanup.push(async () => {
      hub.closeAll();
      await app.close();
    });
    const port = o.port ?? 8080;
    const host = o.host ?? '127.0.0.1';
    const address = await app.listen({ host, port });
    hosts.addOwnPort(Number(new URL(address).port));
    return {
      app,
      ctx,
      url: address.replace('://[::1]', '://localhost'),
      tokenFile: tok.file,
      token: tok.token,
      foxglove,
      broker,
      mqttCredentialsFile,
      close: async () => {
        // Runs first (they use the robots and the store), then endpoints, robots, the store.
        await runs.stopAll();
        await undo();
      },
    };
  } catch (e) {
    await undo();
    throw e;
  }
}
