// Child process of the robot-side outbox test: a robot that records episodes and uploads them over
// MQTT through EpisodeUploader with a durable outbox, until it is killed or has recorded its quota.
// Protocol on stdout (pipes are synchronous on Linux, so a line is out before the next step):
//   RESUMED <ids>        uploader created; episodes taken over from the outbox (comma-separated)
//   INTERRUPTED <ids>    those of them that were still recording, now ended as partial
//   C <episode> <seq>    step() returned: the step is in the outbox
//   DRAINED              every episode ended and acknowledged (only when not killed)
// Usage: node <transpiled>.js <mqtt url> <outbox file> <run tag> <episodes> <steps per episode>
import { connect } from '../../bridge/mqtt/client.js';
import { EpisodeUploader } from '../../bridge/mqtt/episodes.js';
import { EpisodeOutbox } from '../../bridge/mqtt/outbox.js';
import { makeStep } from './episode-data.js';

const [url, file, tag, episodesArg, stepsArg] = process.argv.slice(2) as [string, string, string, string, string];
const out = (line: string) => process.stdout.write(`${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const client = await connect({ url, clientId: 'outbox-robot', clean: false, protocolVersion: 5, reconnectPeriodMs: 100, onError: () => {} });
  const uploader = await EpisodeUploader.create(client, 'outbox-robot', { resendMs: 200, outbox: EpisodeOutbox.open(file), onError: () => {} });
  out(`RESUMED ${uploader.resumed.join(',')}`);
  out(`INTERRUPTED ${uploader.interrupted.join(',')}`);
  const ended: Array<Promise<void>> = [];
  for (let k = 0; k < Number(episodesArg); k++) {
    const id = `${tag}-e${k}`;
    uploader.begin({ id, robot: 'outbox-robot', policyVersion: 'v0', hardwareProfile: 'test', startedAt: Date.now() });
    const steps = Number(stepsArg);
    for (let seq = 0; seq < steps; seq++) {
      uploader.step(id, makeStep(id, seq, seq === steps - 1));
      out(`C ${id} ${seq}`);
      await sleep(3);
    }
    ended.push(uploader.end(id));
  }
  await Promise.all(ended);
  await uploader.drained();
  out('DRAINED');
  process.exit(0);
}

void main();
