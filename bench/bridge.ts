// A policy drives the sim stand-in (its own process) through safety → roslib → rosbridge WebSocket
// at 50 Hz. Measures the action round trip (act() until the robot's echo of the applied command
// arrives) and the achieved control rate, beside a bare WebSocket echo on the same loopback.
import { spawn } from 'node:child_process';
import { Ros, Topic } from 'roslib';
import WebSocket, { WebSocketServer } from 'ws';
import { loadRobotConfig } from '../hardware/config.js';
import { RosRobot } from '../hardware/robots/ros.js';
import { SafetyLayer } from '../hardware/safety.js';
import { median, quantile, type BenchOptions, type BenchReport } from './lib/report.js';

async function startStandIn(): Promise<{ port: number; stop: () => void }> {
  const proc = spawn(process.execPath, ['--import', 'tsx', 'bin/wmrl.ts', 'sim-robot', '--task', 'reach', '--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    proc.stdout!.on('data', (d) => {
      out += d;
      const m = /ws:\/\/[^:]+:(\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    proc.once('exit', (c) => reject(new Error(`stand-in exited with ${c}`)));
  });
  return { port, stop: () => proc.kill('SIGTERM') };
}

/** One run: `steps` control steps at `hz`; returns round-trip times (ms) and the achieved rate. */
async function drive(url: string, steps: number, hz: number, progress: (i: number) => void) {
  const cfg = loadRobotConfig('launch/robots/sim-reach.yaml');
  cfg.url = url;
  const robot = new SafetyLayer(await RosRobot.connect(cfg), cfg.safety);
  const echo = new Ros({});
  const up = new Promise<void>((r) => echo.once('connection', () => r()));
  await echo.connect(url);
  await up;
  const pending = new Map<string, number>();
  const rtt: number[] = [];
  new Topic<{ data: number[] }>({ ros: echo, name: '/wmrl/applied_command', messageType: 'std_msgs/msg/Float64MultiArray' }).subscribe((m) => {
    const t0 = pending.get(m.data.join());
    if (t0 !== undefined) {
      rtt.push(performance.now() - t0);
      pending.delete(m.data.join());
    }
  });
  await new Promise((r) => setTimeout(r, 200));
  let obs = await robot.reset();
  const period = 1000 / hz;
  const start = performance.now();
  for (let i = 0; i < steps; i++) {
    // A small proportional policy; the step-dependent term makes every command unique to match its echo.
    obs = await robot.observe();
    const a = Float32Array.of(Math.tanh(0.5 - obs.position[0]!) * 0.8, Math.tanh(-obs.position[1]!) * 0.8 + (i % 997) * 1e-5);
    const t0 = performance.now();
    const sent = await robot.act(a, { stamp: t0 });
    pending.set(Array.from(sent).join(), t0);
    if (i % 50 === 49) progress(i + 1);
    const wait = start + (i + 1) * period - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  }
  const elapsed = (performance.now() - start) / 1000;
  await new Promise((r) => setTimeout(r, 200));
  echo.close();
  await robot[Symbol.asyncDispose]();
  return { rtt, rate: steps / elapsed, lost: pending.size, interventions: Object.values(robot.counts).reduce((a, b) => a + b, 0) };
}

/** The floor: a bare JSON message echoed by a ws server on the same loopback. */
async function bareEcho(n: number, hz: number): Promise<number[]> {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise((r) => wss.once('listening', r));
  wss.on('connection', (s) => s.on('message', (d) => s.send(d.toString())));
  const ws = new WebSocket(`ws://127.0.0.1:${(wss.address() as { port: number }).port}`);
  await new Promise((r) => ws.once('open', r));
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await new Promise<void>((resolve) => {
      ws.once('message', () => resolve());
      ws.send(JSON.stringify({ op: 'publish', topic: '/x', msg: { data: [i, 0.5] } }));
    });
    out.push(performance.now() - t0);
    await new Promise((r) => setTimeout(r, 1000 / hz));
  }
  ws.close();
  wss.close();
  return out;
}

export async function run(opts: BenchOptions): Promise<BenchReport> {
  const hz = 50;
  const steps = opts.quick ? 250 : 1000;
  const repeats = opts.quick ? 1 : 3;
  const standIn = await startStandIn();
  const url = `ws://127.0.0.1:${standIn.port}`;
  const runs: Array<Awaited<ReturnType<typeof drive>>> = [];
  const bare: number[][] = [];
  try {
    for (let r = 0; r < repeats; r++) {
      runs.push(await drive(url, steps, hz, (i) => opts.progress(r * steps + i, repeats * steps, `run ${r + 1}/${repeats}`)));
      bare.push(await bareEcho(opts.quick ? 100 : 300, hz));
    }
  } finally {
    standIn.stop();
  }
  const p = (q: number) => median(runs.map((x) => quantile(x.rtt, q)));
  const pb = (q: number) => median(bare.map((x) => quantile(x, q)));
  const rate = median(runs.map((x) => x.rate));
  const result = { rt_p50_ms: p(0.5), rt_p99_ms: p(0.99), rate_hz: rate };
  return {
    title: 'Bridge: policy → safety → roslib → rosbridge WebSocket → sim stand-in, at 50 Hz',
    summary: [
      `A proportional policy drives the sim stand-in (reach, nominal profile, its own process) for ${steps} control steps at ${hz} Hz, ${repeats} run(s).`,
      'Round trip = from act() (safety layer, roslib publish, WebSocket, server decode and conformance, applied to the sim) until the',
      "robot's echo of the applied command arrives back at a roslib subscriber. Beside it, a bare ws JSON echo on the same loopback",
      'is the floor any WebSocket bridge pays. Medians over runs of each run’s percentile.',
    ].join(' '),
    header: ['path', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms', 'ratio p50 to bare'],
    rows: [
      ['full bridge round trip', p(0.5), p(0.9), p(0.99), Math.max(...runs.flatMap((x) => x.rtt)), p(0.5) / pb(0.5)],
      ['bare WebSocket echo', pb(0.5), pb(0.9), pb(0.99), Math.max(...bare.flat()), 1],
    ],
    notes: [
      `Achieved control rate: ${rate.toFixed(2)} Hz (target ${hz}); commands whose echo never arrived: ${runs.map((x) => x.lost).join(', ')}; safety interventions: ${runs.map((x) => x.interventions).join(', ')}.`,
      `Target: round-trip p99 < 5 ms on loopback — ${result.rt_p99_ms < 5 ? 'met' : 'NOT met'} (${result.rt_p99_ms.toFixed(2)} ms).`,
    ].join('\n\n'),
    plot: {
      title: 'Action round trip, percentiles',
      xLabel: 'percentile',
      yLabel: 'ms',
      lines: [
        { label: 'full bridge', points: [0.5, 0.75, 0.9, 0.95, 0.99].map((q) => [q * 100, p(q)] as [number, number]) },
        { label: 'bare ws echo', points: [0.5, 0.75, 0.9, 0.95, 0.99].map((q) => [q * 100, pb(q)] as [number, number]) },
      ],
    },
    result,
  };
}
