// server: can serving make a robot's control loop late? A robot over rosbridge (`wmrl sim-robot` in its own
// process, serving rosbridge over a real WebSocket) hosted by the service from a robot YAML, a deployed policy
// driving it at 50 Hz (its control thread: ONNX inference, the safety layer, stepping), with the service quiet vs
// loaded by 50 viewer WebSocket clients on /api/stream, one Foxglove client subscribed to every channel and 10
// clients downloading the robot's episodes as MCAP bags back to back, all in another process; phases interleaved in
// one run. Control rate and lateness come from the run's own tick log.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { layoutDim, layoutOf } from '../common/layout.js';
import { GaussianPolicy } from '../policies/gaussian.js';
import { exportEmbodiedPolicy } from '../recipes/embodied.js';
import type { ControlTick, ThreadPriority } from '../server/robot-host.js';
import { PRIORITIES, startService } from '../server/service.js';
import { fmt, median, quantile, type BenchOptions, type BenchReport } from './lib/report.js';
import type { ClientsReport } from './lib/server-clients.js';

const VIEWERS = 50;
const DOWNLOADS = 10;
/** The robot's id, and its name in the episodes. */
const ROBOT = 'arm';
/** The clients' and the robot stand-in's nice value: the serving thread's under `wmrl serve`. */
const NICE = PRIORITIES.servingNice;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Runs node with `args` at NICE: the clients and the robot stand in for other machines, so they take only what the control thread leaves. */
const niceNode = (args: string[], stdio: Parameters<typeof spawn>[2]['stdio']) => spawn('nice', ['-n', String(NICE), process.execPath, ...args], { stdio });

/** Where the control thread ran: on a CPU of its own (`wmrl serve`'s isolateControl), or sharing them, and why. */
function cpuSentence(p: ThreadPriority): string {
  if (!p.cpu) return 'The control thread shared every CPU with serving (no CPU of its own was asked for).';
  if (p.cpu.refused !== null) return `The control thread shared every CPU with serving: its own CPU ${p.cpu.asked} was refused (${p.cpu.refused}).`;
  return `CPUs are \`wmrl serve\`'s too: the control thread on CPU ${p.cpu.allowed.join(',')} alone, the service's other threads on the others, and the clients, started by it, on those; the robot stand-in, started before, on any.`;
}

async function until<T>(f: () => T | undefined, what: string, ms = 60_000): Promise<T> {
  const end = performance.now() + ms;
  for (;;) {
    const v = f();
    if (v !== undefined) return v;
    if (performance.now() > end) throw new Error(`bench server: ${what}: not within ${ms / 1000} s`);
    await sleep(20);
  }
}

/** `wmrl sim-robot` serving rosbridge on a free port, in its own process; resolves with it and its port. */
async function startRobot(): Promise<{ proc: ChildProcess; port: number }> {
  const proc = niceNode(['--import', 'tsx', 'bin/wmrl.ts', 'sim-robot', '--port', '0', '--profile', 'gap'], ['ignore', 'pipe', 'inherit']);
  const lines = createInterface({ input: proc.stdout! });
  const port = await new Promise<number>((resolve, reject) => {
    lines.on('line', (l) => {
      const m = /serving rosbridge v2 on ws:\/\/[^:]+:(\d+)/.exec(l);
      if (m) resolve(Number(m[1]));
    });
    proc.once('exit', (code) => reject(new Error(`bench server: the sim-robot process exited (${code}) before serving`)));
  });
  return { proc, port };
}

const stopProcess = (p: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (p.exitCode !== null) return resolve();
    p.once('exit', () => resolve());
    p.kill('SIGTERM');
    setTimeout(() => p.kill('SIGKILL'), 3000).unref();
  });

interface Clients {
  stop(): Promise<ClientsReport>;
}

async function startClients(url: string, foxUrl: string): Promise<Clients> {
  const p = niceNode(['--import', 'tsx', 'bench/lib/server-clients.ts', url, foxUrl, String(VIEWERS), String(DOWNLOADS), ROBOT], ['pipe', 'pipe', 'inherit']);
  const lines = createInterface({ input: p.stdout! });
  const next = () =>
    new Promise<string>((resolve, reject) => {
      lines.once('line', resolve);
      p.once('exit', (code) => reject(new Error(`bench server: the clients' process exited (${code})`)));
    });
  const ready = await next();
  if (ready !== 'ready') throw new Error(`bench server: the clients' process: ${ready}`);
  return {
    stop: async () => {
      const reply = next();
      p.stdin!.write('report\n');
      return JSON.parse(await reply) as ClientsReport;
    },
  };
}

function stats(ticks: ControlTick[], seconds: number) {
  if (ticks.length === 0) throw new Error('bench server: no control ticks in a phase');
  return {
    rate: ticks.length / seconds,
    p50: quantile(ticks.map((t) => t.late), 0.5),
    p99: quantile(ticks.map((t) => t.late), 0.99),
    max: Math.max(...ticks.map((t) => t.late)),
    p99Compute: quantile(ticks.map((t) => t.obsToApplied), 0.99),
  };
}

const pct = (x: number) => `${x >= 0 ? '+' : '−'}${fmt(Math.abs(100 * x), 2)}%`;

export async function run(o: BenchOptions): Promise<BenchReport> {
  const rounds = o.quick ? 2 : 4;
  const phaseMs = o.quick ? 3000 : 7000;
  const loadBefore = loadavg()[0]!;
  const dir = mkdtempSync(join(tmpdir(), 'bench-server-'));
  const robot = await startRobot();
  const quiet: ControlTick[] = [];
  const loaded: ControlTick[] = [];
  const received: ClientsReport[] = [];
  const loopDelay = { quiet: [] as number[], loaded: [] as number[] };
  let quietS = 0;
  let loadedS = 0;
  let hz = 0;
  let priority: ThreadPriority | null = null;
  try {
    // The stand-in's own YAML, pointed at this process; without its outcome topic the service's control clock paces
    // the episodes (a scored robot's episodes wait for its step reports, so its own clock would be the measure).
    const yaml = join(dir, 'arm.yaml');
    writeFileSync(
      yaml,
      readFileSync('launch/robots/sim-reach.yaml', 'utf8')
        .replace('name: sim-reach', `name: ${ROBOT}`)
        .replace('ws://127.0.0.1:9090', `ws://127.0.0.1:${robot.port}`)
        .replace(/^outcome_topic: .*$/m, ''),
    );
    const svc = await startService({ dataDir: join(dir, 'data'), port: 0, foxglovePort: 0, mqttPort: null, robots: [{ yaml }], ...PRIORITIES, onError: (e) => console.error(`bench server: ${e.message}`) });
    const delay = monitorEventLoopDelay({ resolution: 1 });
    delay.enable();
    try {
      const host = svc.ctx.robots.get(ROBOT)!;
      if (!host.controlThread) throw new Error(`bench server: robot '${ROBOT}' is not hosted in a control thread`);
      priority = host.controlThread.priority;
      hz = host.spec.controlHz;
      // An untrained policy with the robot's layout: its inference costs what a trained one's does.
      const layout = layoutOf(host.spec);
      const policy = new GaussianPolicy({ obsDim: layoutDim(layout), actDim: host.spec.action.names.length, actLow: host.spec.action.low, actHigh: host.spec.action.high, seed: 0 });
      exportEmbodiedPolicy(policy, host.spec, svc.ctx.policies.path('bench'), { policyVersion: 'bench', runId: 'bench-server' });
      const run = svc.ctx.runs.start('policy', { robot: ROBOT, policy: 'bench', episodes: 100000 });
      // An episode to download before the first loaded phase; the run's start is part of neither phase.
      await until(() => (svc.ctx.store.list({ robot: ROBOT, status: 'complete' }).length > 0 ? true : undefined), 'a recorded episode');
      /** The ticks of [a, b), once the thread's messages up to b have arrived (they come in order). */
      const window = async (a: number, b: number) => {
        await until(() => (host.ticks.between(b, Infinity).length > 0 ? true : undefined), 'a control tick after the phase');
        return host.ticks.between(a, b);
      };
      for (let r = 0; r < rounds; r++) {
        delay.reset();
        let a = performance.now();
        await sleep(phaseMs);
        let b = performance.now();
        loopDelay.quiet.push(delay.percentile(99) / 1e6);
        quiet.push(...(await window(a, b)));
        quietS += (b - a) / 1000;
        o.progress(2 * r + 1, 2 * rounds, `round ${r + 1}: quiet`);
        const clients = await startClients(svc.url, svc.foxglove!.url);
        delay.reset();
        a = performance.now();
        await sleep(phaseMs);
        b = performance.now();
        loopDelay.loaded.push(delay.percentile(99) / 1e6);
        received.push(await clients.stop());
        loaded.push(...(await window(a, b)));
        loadedS += (b - a) / 1000;
        o.progress(2 * r + 2, 2 * rounds, `round ${r + 1}: ${VIEWERS} viewers + Foxglove + ${DOWNLOADS} MCAP downloads`);
      }
      const stopped = await svc.ctx.runs.stop(run.id);
      if (stopped.state !== 'stopped') throw new Error(`bench server: the policy run ended ${stopped.state}: ${stopped.error}`);
    } finally {
      delay.disable();
      await svc.close();
    }
  } finally {
    await stopProcess(robot.proc);
    rmSync(dir, { recursive: true, force: true });
  }
  const loadAfter = loadavg()[0]!;

  const Q = stats(quiet, quietS);
  const L = stats(loaded, loadedS);
  const rateRatio = L.rate / Q.rate;
  const p99Ratio = L.p99 / Q.p99;
  const rateDrop = 1 - rateRatio;
  const p99Rise = p99Ratio - 1;
  const ok = rateDrop <= 0.1 && p99Rise <= 0.1;
  const viewerS = received.reduce((s, x) => s + x.seconds, 0);
  const perViewer = received.flatMap((x) => x.perViewer.map((c) => c / x.seconds));
  const foxHz = received.reduce((s, x) => s + x.foxglove, 0) / viewerS;
  const downloads = received.reduce((s, x) => s + x.downloads, 0);
  const mib = received.reduce((s, x) => s + x.downloadBytes, 0) / 2 ** 20;
  const loopQ = median(loopDelay.quiet);
  const loopL = median(loopDelay.loaded);
  const load = `load average (1 min) ${fmt(loadBefore, 2)} at the start and ${fmt(loadAfter, 2)} at the end on this machine's ${availableParallelism()} cores`;

  return {
    title: `Control loop under serving: ${VIEWERS} viewers + Foxglove + ${DOWNLOADS} MCAP downloads vs none, robot over rosbridge`,
    summary: [
      `A robot over rosbridge (\`wmrl sim-robot --profile gap\`, reach, in its own process, over a real WebSocket) hosted by the service from a robot YAML, a deployed ONNX policy driving it at ${hz} Hz in the robot's control thread, ran ${rounds} interleaved rounds of ${phaseMs / 1000} s with the service quiet and ${phaseMs / 1000} s with ${VIEWERS} viewer WebSocket clients (every event, parsed), one Foxglove client subscribed to every channel and ${DOWNLOADS} clients downloading the robot's episodes as MCAP bags back to back, all in another process.`,
      `Lateness is measured from the tick's slot on the control clock (episode start + k periods) to the action applied on the robot; the YAML leaves out the robot's outcome topic so that the service's clock, not the robot's step reports, paces the episodes.`,
      `Priorities are \`wmrl serve\`'s: the service's own thread at nice ${PRIORITIES.servingNice}, the control thread asking for nice ${PRIORITIES.controlNice} and running at ${priority!.nice}${priority!.refused === null ? '' : ` (refused: ${priority!.refused})`}; the clients and the robot stand-in, which stand in for other machines, at nice ${NICE}. ${cpuSentence(priority!)}`,
      `Loaded, the control rate was ${fmt(L.rate)} Hz against ${fmt(Q.rate)} Hz quiet (ratio ${fmt(rateRatio, 4)}, ${pct(-rateDrop)}) and the p99 lateness ${fmt(L.p99)} ms against ${fmt(Q.p99)} ms (ratio ${fmt(p99Ratio, 4)}, ${pct(p99Rise)}): ${ok ? 'both within' : 'not both within'} the 10% budget.`,
      `The service's own thread was loaded: its p99 event-loop delay was ${fmt(loopL)} ms loaded against ${fmt(loopQ)} ms quiet (median over rounds).`,
      `Other processes shared the machine: ${load}.`,
    ].join(' '),
    header: ['phase', 'control rate (Hz)', 'p50 lateness (ms)', 'p99 lateness (ms)', 'max lateness (ms)', 'p99 obs→applied (ms)', "service thread's p99 event-loop delay (ms)", 'ticks'],
    rows: [
      ['quiet', fmt(Q.rate), fmt(Q.p50), fmt(Q.p99), fmt(Q.max), fmt(Q.p99Compute), fmt(loopQ), quiet.length],
      [`${VIEWERS} viewers + Foxglove + ${DOWNLOADS} MCAP downloads`, fmt(L.rate), fmt(L.p50), fmt(L.p99), fmt(L.max), fmt(L.p99Compute), fmt(loopL), loaded.length],
    ],
    notes: [
      `Load served in the loaded phases: each viewer a median ${fmt(median(perViewer))} frames/s (slowest ${fmt(Math.min(...perViewer))}), Foxglove ${fmt(foxHz)} messages/s, ${downloads} MCAP downloads (${fmt(mib)} MiB, ${fmt(downloads / viewerS)} per second).`,
      `Ratios (loaded / quiet): control rate ${fmt(rateRatio, 4)}, p99 lateness ${fmt(p99Ratio, 4)}. ${load[0]!.toUpperCase()}${load.slice(1)}.`,
    ].join('\n\n'),
    plot: {
      title: 'Lateness (tick slot → applied), ms',
      xLabel: 'statistic',
      yLabel: 'ms',
      bars: [
        { label: 'p50 quiet', value: Q.p50 },
        { label: 'p50 loaded', value: L.p50 },
        { label: 'p99 quiet', value: Q.p99 },
        { label: 'p99 loaded', value: L.p99 },
      ],
    },
    result: {
      rate_ratio: Number(fmt(rateRatio, 4)),
      p99_ratio: Number(fmt(p99Ratio, 4)),
      rate_drop: Number(fmt(rateDrop, 4)),
      p99_rise: Number(fmt(p99Rise, 4)),
      rate_hz_quiet: Number(fmt(Q.rate)),
      rate_hz_loaded: Number(fmt(L.rate)),
      p99_ms_quiet: Number(fmt(Q.p99)),
      p99_ms_loaded: Number(fmt(L.p99)),
      loop_delay_p99_ms_loaded: Number(fmt(loopL)),
      downloads,
      load_avg: Number(fmt(Math.max(loadBefore, loadAfter), 2)),
      control_nice: priority!.nice,
      control_cpu_alone: priority!.cpu && priority!.cpu.refused === null ? 1 : 0,
    },
  };
}
