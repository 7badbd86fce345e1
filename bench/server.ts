// server: does watching slow the robot? The service's 50 Hz control loop (the scripted-expert job on
// the sim robot, with its imagined replay) with no viewers vs 50 viewer WebSocket clients on
// /api/stream plus one Foxglove client subscribed to every channel, in another process, same run,
// phases interleaved. Control rate and action latency come from the job's own tick log.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { startService } from '../server/service.js';
import type { ControlTick } from '../server/robot-host.js';
import { fmt, median, quantile, type BenchOptions, type BenchReport } from './lib/report.js';

const VIEWERS = 50;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Viewers {
  stop(): Promise<{ seconds: number; perClient: number[]; foxglove: number }>;
}

async function startViewers(url: string, foxUrl: string): Promise<Viewers> {
  const p = spawn(process.execPath, ['--import', 'tsx', 'bench/lib/server-clients.ts', url, foxUrl, String(VIEWERS)], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: p.stdout! });
  const next = () =>
    new Promise<string>((resolve, reject) => {
      lines.once('line', resolve);
      p.once('exit', (code) => reject(new Error(`viewer process exited (${code})`)));
    });
  const ready = await next();
  if (ready !== 'ready') throw new Error(`viewer process: ${ready}`);
  return {
    stop: async () => {
      const reply = next();
      p.stdin!.write('report\n');
      return JSON.parse(await reply) as { seconds: number; perClient: number[]; foxglove: number };
    },
  };
}

function stats(ticks: ControlTick[], seconds: number) {
  return {
    rate: ticks.length / seconds,
    p50: quantile(ticks.map((t) => t.late), 0.5),
    p99: quantile(ticks.map((t) => t.late), 0.99),
    max: Math.max(...ticks.map((t) => t.late)),
    p99Compute: quantile(ticks.map((t) => t.obsToApplied), 0.99),
  };
}

export async function run(o: BenchOptions): Promise<BenchReport> {
  const rounds = o.quick ? 2 : 4;
  const phaseMs = o.quick ? 3000 : 7000;
  const dir = mkdtempSync(join(tmpdir(), 'bench-server-'));
  const svc = await startService({ dataDir: dir, port: 0, foxglovePort: 0, mqttPort: null });
  const idle: ControlTick[] = [];
  const loaded: ControlTick[] = [];
  const received: Array<{ seconds: number; perClient: number[]; foxglove: number }> = [];
  let idleS = 0;
  let loadedS = 0;
  try {
    const run = svc.ctx.runs.start('expert-session', { robot: 'sim', episodes: 100000, imagined: true, seed: 0 });
    const host = svc.ctx.robots.get('sim')!;
    await sleep(1500); // the run's start (env creation, first reset) is not part of either phase
    for (let r = 0; r < rounds; r++) {
      let a = performance.now();
      await sleep(phaseMs);
      let b = performance.now();
      idle.push(...host.ticks.between(a, b));
      idleS += (b - a) / 1000;
      o.progress(2 * r + 1, 2 * rounds, `round ${r + 1}: no viewers`);
      const viewers = await startViewers(svc.url, svc.foxglove!.url);
      a = performance.now();
      await sleep(phaseMs);
      b = performance.now();
      loaded.push(...host.ticks.between(a, b));
      loadedS += (b - a) / 1000;
      received.push(await viewers.stop());
      o.progress(2 * r + 2, 2 * rounds, `round ${r + 1}: ${VIEWERS} viewers + Foxglove`);
    }
    await svc.ctx.runs.stop(run.id);
  } finally {
    await svc.close();
    rmSync(dir, { recursive: true, force: true });
  }

  const hz = svc.ctx.robots.get('sim')!.sim.spec.controlHz;
  const I = stats(idle, idleS);
  const L = stats(loaded, loadedS);
  const rateDrop = 1 - L.rate / I.rate;
  const p99Rise = L.p99 / I.p99 - 1;
  // Signed: negative when the loop did better with viewers (noise of a shared machine).
  const degradation = Math.max(rateDrop, p99Rise);
  const viewerS = received.reduce((a, x) => a + x.seconds, 0);
  const perViewerHz = median(received.flatMap((x) => x.perClient.map((c) => c / x.seconds)));
  const minViewerHz = Math.min(...received.flatMap((x) => x.perClient.map((c) => c / x.seconds)));
  const foxHz = received.reduce((a, x) => a + x.foxglove, 0) / viewerS;
  const ok = degradation <= 0.1;

  return {
    title: `Control loop under viewers: ${VIEWERS} WebSocket viewers + 1 Foxglove client vs none`,
    summary: [
      `The service's ${hz} Hz control loop (scripted expert on the sim robot, reach, gap profile, with its nominal-sim imagined replay) ran for ${rounds} interleaved rounds of ${phaseMs / 1000} s with no viewers and ${phaseMs / 1000} s with ${VIEWERS} viewer WebSocket clients (every event, parsed) plus one Foxglove client subscribed to every channel, all in another process.`,
      `Action latency is measured from the tick's slot on the control clock (episode start + k periods) to the action applied on the robot, so it includes any delay of the event loop; the p99 compute latency (observation to applied action) is shown beside it.`,
      `With viewers the control rate was ${fmt(L.rate)} Hz against ${fmt(I.rate)} Hz without (${rateDrop >= 0 ? `${fmt(100 * rateDrop, 2)}% lower` : `${fmt(-100 * rateDrop, 2)}% higher`}), and the p99 action latency ${fmt(L.p99)} ms against ${fmt(I.p99)} ms (${p99Rise >= 0 ? `${fmt(100 * p99Rise, 2)}% higher` : `${fmt(-100 * p99Rise, 2)}% lower`}).`,
      `The larger of the two relative losses is ${degradation >= 0 ? `a degradation of ${fmt(100 * degradation, 2)}%` : `${fmt(100 * degradation, 2)}% (no degradation)`}, ${ok ? 'within' : 'above'} the 10% budget.`,
      `Each viewer received a median ${fmt(perViewerHz)} frames/s (slowest ${fmt(minViewerHz)}), the Foxglove client ${fmt(foxHz)} messages/s.`,
    ].join(' '),
    header: ['phase', 'control rate (Hz)', 'p50 latency (ms)', 'p99 latency (ms)', 'max latency (ms)', 'p99 obs→applied (ms)', 'ticks'],
    rows: [
      ['no viewers', fmt(I.rate), fmt(I.p50), fmt(I.p99), fmt(I.max), fmt(I.p99Compute), idle.length],
      [`${VIEWERS} viewers + Foxglove`, fmt(L.rate), fmt(L.p50), fmt(L.p99), fmt(L.max), fmt(L.p99Compute), loaded.length],
    ],
    notes: `Viewer traffic: median ${fmt(perViewerHz)} frames/s per viewer (slowest ${fmt(minViewerHz)}), Foxglove ${fmt(foxHz)} messages/s; frames are sent after the control step that made them (setImmediate), never inside it.`,
    plot: {
      title: 'Action latency (tick slot → applied), ms',
      xLabel: 'statistic',
      yLabel: 'ms',
      bars: [
        { label: 'p50 none', value: I.p50 },
        { label: `p50 ${VIEWERS}+fox`, value: L.p50 },
        { label: 'p99 none', value: I.p99 },
        { label: `p99 ${VIEWERS}+fox`, value: L.p99 },
      ],
    },
    result: { p99_ms_idle: Number(fmt(I.p99)), p99_ms_loaded: Number(fmt(L.p99)), degradation: Number(fmt(degradation)), rate_hz_idle: Number(fmt(I.rate)), rate_hz_loaded: Number(fmt(L.rate)), viewer_fps: Number(fmt(perViewerHz)) },
  };
}
