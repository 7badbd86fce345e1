// The viewers of `npm run bench -- server`, in their own process (as browsers would be): N WebSocket
// clients on /api/stream and one Foxglove client subscribed to every channel. Prints "ready" once all
// are connected, then on stdin "report" prints the messages each received as JSON and exits.
import { WebSocket } from 'ws';
import { FoxgloveClient } from '../../server/foxglove-protocol.js';

const [url, foxUrl, nArg] = process.argv.slice(2);
const n = Number(nArg);
const counts = new Array<number>(n).fill(0);
let fox = 0;
const sockets: WebSocket[] = [];
await Promise.all(
  counts.map(
    (_, i) =>
      new Promise<void>((resolve, reject) => {
        const ws = new WebSocket(`${url!.replace(/^http/, 'ws')}/api/stream`);
        ws.on('message', (data: Buffer) => {
          JSON.parse(data.toString()); // a viewer parses every frame
          counts[i]!++;
        });
        ws.once('open', () => resolve());
        ws.once('error', reject);
        sockets.push(ws);
      }),
  ),
);
const fws = new WebSocket(foxUrl!, [FoxgloveClient.SUPPORTED_SUBPROTOCOL]);
fws.binaryType = 'arraybuffer';
const client = new FoxgloveClient({ ws: fws as unknown as ConstructorParameters<typeof FoxgloveClient>[0]['ws'] });
await new Promise<void>((resolve, reject) => {
  client.on('advertise', (chs) => {
    for (const c of chs) client.subscribe(c.id);
    resolve();
  });
  client.on('error', reject);
});
client.on('message', () => fox++);
const t0 = performance.now();
console.log('ready');
process.stdin.on('data', (d) => {
  if (!d.toString().includes('report')) return;
  const s = (performance.now() - t0) / 1000;
  console.log(JSON.stringify({ seconds: s, perClient: counts, foxglove: fox }));
  for (const ws of sockets) ws.close();
  client.close();
  setTimeout(() => process.exit(0), 100);
});
