// start: the README's main job as `npm start` runs it. The service on its defaults (the built-in sim robot, reach
// under the gap profile, reporting its last commands) and its default wmrl-train job (bin/commands/serve.ts
// defaultJobOptions: pretraining, calibration, updates with anchors on the robot in real time), timed from the
// service's start to the policy the job leaves, with what the job measured on the way: the pretrained clone's held-out
// success, the calibrated clone's, and that of the policy it exports. The README's figures for that job come from here.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { defaultJobOptions, serveRobots } from '../bin/commands/serve.js';
import type { WmrlCheckpoint } from '../server/wmrl-train.js';
import type { RunStatus } from '../server/schemas.js';
import { PRIORITIES, startService } from '../server/service.js';
import type { CalibrationReport } from '../wmrl/calibration.js';
import { fmt, type BenchOptions, type BenchReport } from './lib/report.js';

const minutes = (ms: number) => ms / 60_000;
/** The longest the job may take before the benchmark stops it and fails. */
const LIMIT_MINUTES = 60;
const pct = (x: number | null | undefined) => (x === null || x === undefined ? '—' : `${Math.round(x * 100)}%`);

export async function run(o: BenchOptions): Promise<BenchReport> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-start-'));
  const load0 = loadavg()[0]!;
  const t0 = performance.now();
  const svc = await startService({ dataDir: dir, port: 0, foxglovePort: null, mqttPort: null, robots: serveRobots({}), ...PRIORITIES });
  try {
    const robot = [...svc.ctx.robots.values()][0]!;
    // --quick: the same job as a smoke run (small pretraining and calibration, one update, the sim as fast as it goes).
    const options = { ...defaultJobOptions(robot.id), ...(o.quick ? { quick: true, updates: 1, realTime: false, evalEpisodes: 10 } : {}) };
    const started = svc.ctx.runs.start('wmrl-train', options);
    const phases = new Map<string, number>();
    // A job that hangs is stopped and reported, not waited on for ever.
    const timeout = (id: string) => new Promise<never>((_, reject) => {
      const t = setTimeout(() => void svc.ctx.runs.stop(id).finally(() => reject(new Error(`bench start: the default job did not end within ${LIMIT_MINUTES} minutes; stopped`))), LIMIT_MINUTES * 60_000);
      t.unref();
    });
    const done = new Promise<RunStatus>((resolve) => {
      svc.ctx.runs.events.on('event', (ev) => {
        if (ev.type !== 'run' || ev.status.id !== started.id) return;
        const p = ev.status.progress;
        const phase = ['pretraining', 'calibration', 'updates'].find((x) => p.phase.startsWith(x));
        if (phase && !phases.has(phase)) phases.set(phase, performance.now());
        if (p.total > 0) o.progress(p.done, p.total, p.phase);
        if (['finished', 'stopped', 'failed'].includes(ev.status.state)) resolve(ev.status);
      });
    });
    const end = await Promise.race([done, timeout(started.id)]);
    const wall = performance.now() - t0;
    if (end.state !== 'finished' || !end.checkpoint) throw new Error(`bench start: the default job ended ${end.state}${end.error ? `: ${end.error}` : ''}`);
    const cp = JSON.parse(readFileSync(end.checkpoint, 'utf8')) as WmrlCheckpoint;
    const calFile = join(dirname(end.checkpoint), 'calibration.json');
    if (!existsSync(calFile)) throw new Error('bench start: the default job did not calibrate (no calibration.json in its run folder); this benchmark measures the job that does');
    const cal = JSON.parse(readFileSync(calFile, 'utf8')) as CalibrationReport;
    const episodes = (started.options as { evalEpisodes: number }).evalEpisodes;
    const start = cp.metrics.find((m) => m.step === 0)!;
    const updates = cp.metrics.filter((m) => m.step > 0 && m.trueSuccess !== null);
    const keptUpdate = cp.policy?.keptUpdate ?? cp.updates;
    const kept = cp.metrics.find((m) => m.step === keptUpdate)!;
    const last = cp.metrics.at(-1)!;
    const at = (phase: string) => (phases.has(phase) ? minutes(phases.get(phase)! - t0) : NaN);
    const updatesAt = at('updates');
    const lo = Math.min(...updates.map((m) => m.trueSuccess!)), hi = Math.max(...updates.map((m) => m.trueSuccess!));
    const rows: Array<Array<string | number>> = [
      ['pretrained clone (before calibration)', pct(cal.before), '—', fmt(at('calibration'), 1)],
      [`calibrated clone (delay ${cal.delay}, ${cal.robotEpisodes} robot episodes${cal.kept ? '' : '; put back: the pretrained clone measured better'})`, pct(cal.after), fmt(start.robotSeconds / 3600, 3), fmt(updatesAt, 1)],
      [`after each of the ${updates.length} updates (lowest – highest)`, `${pct(lo)} – ${pct(hi)}`, fmt(last.robotSeconds / 3600, 3), fmt(minutes(wall), 1)],
      [keptUpdate === 0 ? 'exported policy: the one post-training started from (the evaluation kept)' : `exported policy: update ${keptUpdate}'s, the evaluation kept`, pct(kept.trueSuccess), fmt(kept.robotSeconds / 3600, 3), fmt(minutes(wall), 1)],
    ];
    const cores = cpus().length;
    return {
      title: 'start: the service\'s default job, from `npm start` to the policy',
      summary: [
        `The service as \`npm start\` starts it (the built-in sim robot: reach under the gap profile, reporting its last ${robot.commandHistory} commands) and its default job (${o.quick ? 'a smoke run: quick sizes, 1 update, the sim as fast as it goes' : `${options.updates} updates, anchors on the robot in real time`}), on a ${cores}-core machine whose 1-minute load was ${load0.toFixed(1)} when it began.`,
        `From the service's start to the exported policy: ${fmt(minutes(wall), 1)} minutes (pretraining until ${fmt(at('calibration'), 1)}, calibration until ${fmt(updatesAt, 1)}).`,
        `True success on ${episodes} held-out start states of the robot's sim twin: the pretrained clone ${pct(cal.before)}, the calibrated clone ${pct(cal.after)}${cal.kept ? '' : ' (put back: the pretrained clone measured better)'}, ${pct(lo)} to ${pct(hi)} after the ${updates.length} updates; the run exported ${keptUpdate === 0 ? 'the policy post-training started from' : `update ${keptUpdate}'s policy`}, the evaluation it kept (${pct(kept.trueSuccess)}, ${fmt(kept.robotSeconds / 3600, 3)} robot-hours in; the latest, unless the best measured higher by more than one standard error), after ${fmt(last.robotSeconds / 3600, 3)} robot-hours in all.`,
      ].join(' '),
      header: ['policy', 'true success', 'robot-hours (the run\'s, calibration included)', 'minutes from start'],
      rows,
      plot: { title: 'true success along the default job', xLabel: 'update', yLabel: 'true success', lines: [{ label: 'true success', points: cp.metrics.filter((m) => m.trueSuccess !== null).map((m) => [m.step, m.trueSuccess!]) }] },
      result: {
        minutes: +minutes(wall).toFixed(2),
        clone_success: cal.before ?? NaN,
        calibrated_success: cal.after ?? NaN,
        updates_success_lo: lo,
        updates_success_hi: hi,
        exported_update: keptUpdate,
        exported_success: kept.trueSuccess ?? NaN,
        robot_hours: +(last.robotSeconds / 3600).toFixed(4),
        load: +load0.toFixed(2),
      },
    };
  } finally {
    await svc.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
