// Child process of the SIGKILL durability test: records short episodes into <db> until killed.
// Protocol on stdout (pipes are synchronous on Linux, so a line is out before the next step):
//   READY                 modules loaded, waiting for "GO" on stdin (lets the parent preload children)
//   OPEN <recovered ids>  store opened (recovery done)
//   B <episode> <steps>   episode begun, <steps> planned
//   C <episode> <seq>     append() returned for that step
//   F <episode>           finish() returned
// Usage: node --import tsx tests/helpers/episode-writer.ts <db> <seed> (the test runs it transpiled)

import { EpisodeStore } from '../../episodes/store/store.js';
import { makeStep, rng } from './episode-data.js';

const [db, seedArg] = process.argv.slice(2);
const seed = Number(seedArg);
const rand = rng(seed);
const out = (line: string) => process.stdout.write(`${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  out('READY');
  await new Promise<void>((resolve) => {
    process.stdin.on('data', (d) => {
      if (d.toString().includes('GO')) resolve();
    });
  });
  const store = EpisodeStore.open(db);
  out(`OPEN ${store.recovered.join(',')}`);
  for (let k = 0; ; k++) {
    const id = `w${seed}-e${k}`;
    const steps = 3 + Math.floor(rand() * 8);
    const rec = store.begin({ id, robot: 'durability', policyVersion: 'v0', hardwareProfile: 'test', startedAt: Date.now() });
    out(`B ${id} ${steps}`);
    for (let seq = 0; seq < steps; seq++) {
      rec.append(makeStep(id, seq, seq === steps - 1));
      out(`C ${id} ${seq}`);
      if (rand() < 0.5) await sleep(Math.floor(rand() * 4));
    }
    rec.finish({ success: true });
    out(`F ${id}`);
  }
}

void main();
