// The clients of `npm run bench -- server`, in their own process (as browsers and tools would be): N viewer WebSocket
// clients on /api/stream, one Foxglove client subscribed to every channel, and M clients downloading the robot's
// recorded episodes as MCAP bags back to back. Prints "ready" once all are connected, then on stdin "report" stops,
// prints what each received as JSON and exits.
import { WebSocket } from 'ws';
import { FoxgloveClient } from '../../server/foxglove-protocol.js';

/** What the clients received. */
export interface ClientsReport {
  seconds: number;
  /** Events each viewer received. */
  perViewer: number[];
  /** Messages the Foxglove client received. */
  foxglove: number;
  /** MCAP bags downloaded, and their bytes. */
  downloads: number;
  downloadBytes: number;
}

const [url, foxUrl, viewersArg, downloadsArg, robot] = process.argv.slice(2);
const counts = new Array<number>(Number(viewersArg)).fill(0);
let fox = 0;
let downloads = 0;
let downloadBytes = 0;
let stopping = false;
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

async function fetchOk(path: string): Promise<Response> {
  const r = await fetch(`${url}${path}`);
  if (!r.ok) throw new Error(`GET ${path}: ${r.status} ${await r.text()}`);
  return r;
}

/** Downloads the robot's newest complete episodes as MCAP, one after another, each client starting at its own. */
async function downloader(k: number): Promise<void> {
  for (let i = k; !stopping; i++) {
    const episodes = (await (await fetchOk(`/api/episodes?robot=${encodeURIComponent(robot!)}&status=complete&limit=${Number(downloadsArg)}`)).json()) as Array<{ id: string }>;
    if (episodes.length === 0) throw new Error(`robot '${robot}' has no complete episode to download`);
    const bag = await (await fetchOk(`/api/episodes/${episodes[i % episodes.length]!.id}/mcap`)).arrayBuffer();
    downloads++;
    downloadBytes += bag.byteLength;
  }
}
const downloading = Array.from({ length: Number(downloadsArg) }, (_, k) => downloader(k));

const t0 = performance.now();
console.log('ready');
process.stdin.on('data', (d) => {
  if (!d.toString().includes('report')) return;
  stopping = true;
  const seconds = (performance.now() - t0) / 1000;
  void Promise.all(downloading).then(() => {
    const report: ClientsReport = { seconds, perViewer: counts, foxglove: fox, downloads, downloadBytes };
    console.log(JSON.stringify(report));
    for (const ws of sockets) ws.close();
    client.close();
    setTimeout(() => process.exit(0), 100);
  });
});
