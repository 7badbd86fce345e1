// `wmrl serve` (the default of `npm start`): the service on embedded defaults — SQLite store under
// data/, the sim stand-in robot, the embedded MQTT broker, the API with the viewer, the Foxglove
// endpoint — and the default job. Ctrl-C finishes the episode being recorded and checkpoints the run.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startService } from '../../server/service.js';
import { progressBar } from '../progress.js';
import { printTable } from '../table.js';
import { ensureViewer } from '../viewer.js';

export interface ServeOptions {
  host: string;
  port: number;
  foxglovePort: number;
  data: string;
  task: string;
  profile: string;
  episodes: number;
  job: boolean;
  mqtt: boolean;
  mqttPort: number;
}

export async function serve(o: ServeOptions): Promise<void> {
  const viewerDir = await ensureViewer();
  const svc = await startService({
    dataDir: o.data,
    host: o.host,
    port: o.port,
    foxglovePort: o.foxglovePort,
    mqttPort: o.mqtt ? o.mqttPort : null,
    robots: [{ id: 'sim', task: o.task, profile: o.profile }],
    viewerDir,
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
  if (svc.broker) console.log(`  MQTT broker:  ${svc.broker.url}`);
  console.log(`  robot:        sim (${o.task}, profile ${o.profile}); episodes in ${join(o.data, 'episodes.db')}`);
  if (o.job) {
    const run = svc.ctx.runs.start('expert-session', { robot: 'sim', episodes: o.episodes, imagined: true, seed: 0 });
    console.log(`  default job:  run ${run.id}: the scripted expert on the sim robot, ${o.episodes} episodes, imagined = sim replay in the nominal profile (not yet the WMRL trainer: post-train with 'npm start -- train', deploy with 'npm start -- deploy')`);
    const bar = progressBar();
    svc.ctx.runs.events.on('event', (ev) => {
      if (ev.type === 'metrics' && ev.run === run.id) bar(ev.metrics.step, o.episodes, `true success ${ev.metrics.trueSuccess?.toFixed(2)} [${ev.metrics.ppi?.map((x) => x.toFixed(2)).join(', ')}]`);
      if (ev.type === 'run' && ev.status.id === run.id && ev.status.state === 'finished' && ev.status.checkpoint) {
        const cp = JSON.parse(readFileSync(ev.status.checkpoint, 'utf8')) as { policy: { id: string; samples: number } | null };
        console.log(`default job finished; checkpoint ${ev.status.checkpoint}`);
        if (cp.policy) console.log(`  policy ${cp.policy.id} (behaviour cloning on ${cp.policy.samples} steps): deploy it with  npm start -- deploy ${join(o.data, 'policies', `${cp.policy.id}.onnx`)} --url ${svc.url}`);
      }
    });
  }
  console.log('Ctrl-C stops: the episode being recorded is finished and the run checkpointed.');
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  console.log('\nshutting down: finishing the episode being recorded, checkpointing runs ...');
  await svc.close();
  printTable(
    'runs',
    svc.ctx.runs.list().map((r) => ({ run: r.id, state: r.state, episodes: `${r.progress.done}/${r.progress.total}`, 'true success': r.lastMetrics?.trueSuccess ?? undefined, checkpoint: r.checkpoint ?? '' })),
  );
}
