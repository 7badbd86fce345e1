// A remote sandbox worker process: `npx tsx autoresearch/remote-worker.ts --url mqtt://host:1883
// [--slots N] [--group sandbox] [--id NAME] [--protocol 4|5]`. It takes sandbox jobs from the
// broker's share group and runs them in its own sandbox pool until SIGINT/SIGTERM; prints
// "ready <id> <slots> network=<on|off>" once subscribed.
import { hostname } from 'node:os';
import { parseArgs } from 'node:util';
import { connector } from '../bridge/mqtt/client.js';
import { serveRemoteSlots } from './remote.js';
import { SandboxPool } from './sandbox.js';

const { values } = parseArgs({
  options: {
    url: { type: 'string' },
    slots: { type: 'string', default: '1' },
    group: { type: 'string', default: 'sandbox' },
    id: { type: 'string', default: `${hostname()}-${process.pid}` },
    protocol: { type: 'string', default: '5' },
  },
});
if (!values.url) throw new Error('--url mqtt://host:port is required');
const protocolVersion = values.protocol === '4' ? 4 : 5;
const pool = SandboxPool.create({ slots: Number(values.slots) });
const fail = (e: Error) => console.error(`remote-worker ${values.id}: ${e.message}`);
const served = await serveRemoteSlots({ connect: connector(values.url, { protocolVersion, reconnectPeriodMs: 500 }), pool, group: values.group, workerId: values.id, onError: fail });
console.log(`ready ${values.id} ${pool.capacity} network=${pool.isolation.network ? 'on' : 'off'}`);
const stop = async () => {
  await served.stop();
  await pool.close();
  process.exit(0);
};
process.once('SIGINT', () => void stop());
process.once('SIGTERM', () => void stop());
