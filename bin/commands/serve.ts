// `wmrl serve` (the default of `npm start`): the service on embedded defaults — SQLite store under
// data/, the sim stand-in robot, the embedded MQTT broker, the API with the viewer, the Foxglove
// endpoint — and the default job: a short WMRL post-training run on the sim robot (or a scripted-expert
// session). `--robot` (repeatable) hosts the robots robot YAMLs declare, or sims, instead; they get no
// default job unless --job asks. Ctrl-C finishes the episode being recorded and checkpoints the run.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RunStatus, WmrlTrainOptions } from '../../server/schemas.js';
import { PRIORITIES, startService, type Service, type ServiceRobot } from '../../server/service.js';
import { jobCalibration } from '../../server/wmrl-train.js';
import { imaginationIn, imagineMultiple } from '../../recipes/embodied.js';
import { progressBar } from '../progress.js';
import { printTable } from '../table.js';
import { ensureViewer } from '../viewer.js';
import { DEFAULT_PRETRAIN } from '../../wmrl/sim-setup.js';
import { SIM_COMMAND_HISTORY } from '../../recipes/options.js';

export interface ServeOptions {
  host: string;
  port: number;
  foxglovePort: number;
  data: string;
  /** --robot, repeatable: a robot YAML, or sim:TASK[:PROFILE]; none: the built-in sim robot. */
  robot?: string[];
  /** The built-in sim robot's task and profile (default reach, gap); not with --robot. */
  task?: string;
  profile?: string;
  urdf?: string;
  commandHistory?: number;
  /** Side of the sim robot's camera image, px; none when absent. */
  camera?: number;
  episodes: number;
  updates: number;
  /** The default job's kind, or false for none (--no-job); absent: wmrl-train on the built-in sim robot, none with --robot. */
  job?: string | false;
  mqtt: boolean;
  mqttPort: number;
  allowedHost?: string[];
  allowedOrigin?: string[];
  /** --urdf-package NAME=DIR, repeatable. */
  urdfPackage?: Record<string, string>;
}

/**
 * The robots the flags name: each --robot (a robot YAML, its id the YAML's name; sim:TASK[:PROFILE], profile nominal
 * unless given, ids sim, sim-2, ...), or without any the built-in sim robot 'sim' (--task, --profile: reach, gap).
 * The sim robot's flags (--command-history, --camera) go to every sim robot; --urdf to the one robot there is.
 */
export function serveRobots(o: Pick<ServeOptions, 'robot' | 'task' | 'profile' | 'urdf' | 'commandHistory' | 'camera' | 'urdfPackage'>): ServiceRobot[] {
  const given = o.robot ?? [];
  const simFlagsGiven = o.commandHistory !== undefined || o.camera !== undefined;
  const simFlags = { commandHistory: o.commandHistory ?? SIM_COMMAND_HISTORY, ...(o.camera ? { image: o.camera } : {}) };
  const drawn = { ...(o.urdf ? { urdf: o.urdf } : {}), ...(o.urdfPackage && Object.keys(o.urdfPackage).length ? { packages: o.urdfPackage } : {}) };
  if (!given.length) return [{ id: 'sim', task: o.task ?? 'reach', profile: o.profile ?? 'gap', ...simFlags, ...drawn }];
  if (o.task !== undefined || o.profile !== undefined) throw new Error('--task and --profile set the built-in sim robot; with --robot, name a sim robot as sim:TASK[:PROFILE]');
  if (given.length > 1 && Object.keys(drawn).length) throw new Error('--urdf and --urdf-package draw one robot; with several --robot, serve the robot to draw on its own');
  let sims = 0;
  const robots = given.map((r): ServiceRobot => {
    if (!r.startsWith('sim:')) return { yaml: r, ...drawn };
    const [, task, profile = 'nominal', extra] = r.split(':');
    if (!task || extra !== undefined) throw new Error(`--robot ${r}: a sim robot is sim:TASK[:PROFILE], e.g. sim:reach:gap`);
    sims++;
    return { id: sims === 1 ? 'sim' : `sim-${sims}`, task, profile, ...simFlags, ...drawn };
  });
  if (!sims && simFlagsGiven) throw new Error('--command-history and --camera are the sim robot\'s; a robot YAML sets command_history and camera itself');
  return robots;
}

export async function serve(o: ServeOptions): Promise<void> {
  const robots = serveRobots(o);
  // A robot over a transport gets no default job unless one is asked for.
  const job = o.job ?? (o.robot?.length ? false : 'wmrl-train');
  const viewerDir = await ensureViewer();
  const svc = await startService({
    dataDir: o.data,
    host: o.host,
    port: o.port,
    foxglovePort: o.foxglovePort,
    mqttPort: o.mqtt ? o.mqttPort : null,
    robots,
    viewerDir,
    allowedHosts: o.allowedHost,
    allowedOrigins: o.allowedOrigin,
    ...PRIORITIES,
  }).catch((e: NodeJS.ErrnoException) => {
    if (e.code === 'EADDRINUSE') throw new Error(`${e.message}: is another service running? Choose other ports (--port, --foxglove-port, --mqtt-port; 0 = any free port) or --no-mqtt`, { cause: e });
    throw e;
  });
  const url = svc.url;
  console.log(`WMRL Bridge ${svc.ctx.version} serving on ${svc.url}`);
  console.log(`  viewer:       ${url}/#token=${svc.token}`);
  console.log(`  access token: ${svc.tokenFile} (mode 0600; send it as "Authorization: Bearer <token>")`);
  console.log(`  API docs:     ${url}/docs    metrics: ${url}/metrics`);
  if (svc.foxglove) console.log(`  Foxglove:     ${svc.foxglove.url} (Open connection → Foxglove WebSocket)`);
  if (svc.broker) console.log(`  MQTT broker:  ${svc.broker.url} (logins in ${svc.mqttCredentialsFile}, mode 0600: service, worker, robot:<id>)`);
  for (const r of svc.ctx.robots.values()) {
    const what = r.simulated
      ? `sim (${r.task}, profile ${r.profile}${r.commandHistory ? `, reporting its last ${r.commandHistory} commands` : ''}${r.spec.camera ? `, a ${r.spec.camera.width}x${r.spec.camera.height} camera` : ''}`
      : `${r.spec.name} (over ${r.kind}${r.task ? `, task ${r.task}` : ', no sim task'}${r.scorer() ? '' : ', its episodes unscored: it reports no outcome'}`;
    console.log(`  robot ${r.id}:${' '.repeat(Math.max(1, 7 - r.id.length))}${what}${r.urdf ? `, drawn from ${r.urdf}` : ''})`);
    const p = r.controlThread?.priority;
    if (p) {
      const refused = p.refused === null ? '' : ` (nice ${p.asked} was refused: ${p.refused}; run the service as root or with CAP_SYS_NICE to raise it)`;
      const cpu = !p.cpu ? '' : p.cpu.refused === null ? `, on CPU ${p.cpu.allowed.join(',')} alone` : `, on any CPU (CPU ${p.cpu.asked} was refused: ${p.cpu.refused})`;
      console.log(`  ${' '.repeat(r.id.length + 7)}its control loop in its own thread at nice ${p.nice}${refused}${cpu}, serving at nice ${PRIORITIES.servingNice}`);
    }
    // A robot over a transport can drop and come back: the operator sees it here as in the viewer.
    let up = r.connected;
    r.events.on('status', (st) => {
      if (st.connected === up) return;
      up = st.connected;
      console.log(`robot ${r.id} ${up ? 'reconnected' : `DISCONNECTED (its ${r.kind} link is down or it sends no state); a run on it stops, its episode kept as partial`}`);
    });
  }
  console.log(`  episodes in ${join(o.data, 'episodes.db')}`);
  const robot = [...svc.ctx.robots.values()][0]!;
  // A latch kept from before the restart holds: no job drives the robot until the operator resets it.
  if (job && robot.safety.isEstopped) {
    const why = robot.restoredLatch?.reason ?? 'e-stopped';
    console.log(`  robot ${robot.id} is E-STOPPED (${why}); the default job is not started.`);
    console.log(`  reset it when it is safe:  curl -X POST -H "Authorization: Bearer $(cat ${svc.tokenFile})" ${url}/api/robots/${robot.id}/reset   (or the viewer's reset button), then start a run from the viewer or the API`);
  } else if (job) {
    const run = await startDefaultJob(svc, o, job, robot.id);
    const bar = progressBar();
    let shown = '';
    svc.ctx.runs.events.on('event', (ev) => {
      if (ev.type === 'run' && ev.status.id === run.id) {
        const p = ev.status.progress;
        // Pretraining from the run's progress; updates and episodes from the metrics, which carry the figures.
        if (p.phase.startsWith('pretraining') && `${p.phase}${p.done}` !== shown && p.total > 0) bar(p.done, p.total, p.phase);
        shown = `${p.phase}${p.done}`;
        if ((ev.status.state === 'finished' || ev.status.state === 'stopped') && ev.status.checkpoint) {
          const cp = JSON.parse(readFileSync(ev.status.checkpoint, 'utf8')) as { policy: { id: string } | null };
          console.log(`default job ${ev.status.state}; checkpoint ${ev.status.checkpoint}`);
          if (cp.policy) console.log(`  policy ${cp.policy.id}: deploy it with  npm start -- deploy ${join(o.data, 'policies', `${cp.policy.id}.onnx`)} --url ${svc.url}`);
        }
      }
      if (ev.type === 'metrics' && ev.run === run.id) {
        const m = ev.metrics;
        const f = (x: number | null, d = 2) => (x === null ? '-' : x.toFixed(d));
        const interval = m.ppi ? ` [${m.ppi.map((x) => x.toFixed(2)).join(', ')}]` : '';
        if (run.kind === 'wmrl-train') {
          if (m.step > 0) bar(m.step, o.updates, `updates · robot ${(m.robotSeconds / 3600).toFixed(3)} h · true success ${f(m.trueSuccess)}${interval} · anchors ${f(m.anchorFraction)} · bias reduction ${f(m.biasReduction)} · anchor weight ${f(m.anchorWeight)}`);
          else console.error(`pretrained policy: true success ${f(m.trueSuccess)}${interval} on held-out start states`);
        } else bar(m.step, o.episodes, `true success ${f(m.trueSuccess)}${interval}`);
      }
    });
  }
  // Listening before the line is printed: a supervisor that waits for it may send SIGTERM at once.
  const stopped = new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  console.log('Ctrl-C stops: the episode being recorded is finished and the run checkpointed.');
  await stopped;
  console.log('\nshutting down: finishing the episode being recorded, checkpointing runs ...');
  await svc.close();
  printTable(
    'runs',
    svc.ctx.runs.list().map((r) => ({ run: r.id, state: r.state, progress: `${r.progress.done}/${r.progress.total} ${r.progress.phase}`, 'true success': r.lastMetrics?.trueSuccess ?? undefined, checkpoint: r.checkpoint ?? '' })),
  );
}

/** The default job's pretraining: the trainer's own, with fewer DAgger rounds, so that the whole run takes minutes. */
const DEFAULT_JOB_PRETRAIN = { daggerRounds: 2 };

/** The default job's updates (`--updates`' default). */
export const DEFAULT_JOB_UPDATES = 8;

/** The default wmrl-train job's options on `robot` (`bench start` runs the same). */
export const defaultJobOptions = (robot: string, updates = DEFAULT_JOB_UPDATES) => ({ robot, updates, pretrain: DEFAULT_JOB_PRETRAIN });

/** The default job on the first robot: short WMRL post-training (reach against the gap sim robot by default), or a scripted-expert session. */
async function startDefaultJob(svc: Service, o: ServeOptions, job: string, robot: string): Promise<RunStatus> {
  const runs = svc.ctx.runs;
  if (job === 'wmrl-train') {
    const run = runs.start('wmrl-train', defaultJobOptions(robot, o.updates));
    const w = run.options as WmrlTrainOptions;
    const host = svc.ctx.robots.get(robot)!;
    const task = w.task ?? host.task;
    const calibrate = task === null ? 0 : await jobCalibration(w, host, task);
    const worldModel = imaginationIn(w, calibrate);
    console.log(`  default job:  run ${run.id}: WMRL post-training of a behaviour-cloned policy on robot ${robot} — pretraining (demonstrations, behaviour cloning and ${DEFAULT_JOB_PRETRAIN.daggerRounds} DAgger rounds on the nominal sim; a world model on ${DEFAULT_PRETRAIN.wmRandomize > 0 ? `sims of randomized mass, friction, damping and gain, the robot's identified from its anchors` : 'the nominal sim'}), ${calibrate > 0 ? `calibration (${calibrate} robot episodes identify the robot; the clone learns the task again in the sim as identified), ` : ''}then ${w.updates} updates of ${w.prompts * imagineMultiple(w, worldModel)} groups × ${w.group} rollouts imagined in ${worldModel === 'identified-sim' ? 'the sim as the calibration identified it (MuJoCo, each start written in from the state the robot reported)' : 'the world model'}, ${w.anchorGroups} anchor group(s) per update on average run on the robot in real time; the policy goes to ${join(o.data, 'policies', `${run.id}.onnx`)}`);
    return run;
  }
  if (job === 'expert-session') {
    const run = runs.start('expert-session', { robot, episodes: o.episodes, imagined: true, seed: 0 });
    console.log(`  default job:  run ${run.id}: the scripted expert on the sim robot, ${o.episodes} episodes, imagined = sim replay in the nominal profile; a behaviour-cloned policy at the end`);
    return run;
  }
  throw new Error(`--job must be wmrl-train or expert-session, got '${job}'`);
}
