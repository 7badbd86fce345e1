// `wmrl deploy`: uploads a policy .onnx to the running service and deploys it on one of its robots
// (a `policy` run that records every episode), then follows the run to its end.
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { progressBar } from '../progress.js';
import { printJson } from '../json-output.js';
import { printTable } from '../table.js';

interface DeployOptions {
  url: string;
  id?: string;
  robot?: string;
  episodes: number;
  tokenFile: string;
  json?: boolean;
}

interface RunStatusLike {
  id: string;
  state: string;
  progress: { done: number; total: number };
  error: string | null;
  lastMetrics: { trueSuccess: number | null; ppi: [number, number] | null } | null;
  checkpoint: string | null;
}

export async function deploy(file: string, o: DeployOptions): Promise<void> {
  const token = process.env.WMRL_TOKEN ?? readFileSync(o.tokenFile, 'utf8').trim();
  const base = o.url.replace(/\/$/, '');
  const call = async <T>(method: string, path: string, body?: Buffer | object): Promise<T> => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': Buffer.isBuffer(body) ? 'application/octet-stream' : 'application/json' } : {}) },
      body: body ? (Buffer.isBuffer(body) ? new Uint8Array(body) : JSON.stringify(body)) : undefined,
    });
    const text = await res.text();
    if (!res.ok) {
      const err = (() => {
        try {
          return JSON.parse(text) as { code: string; message: string };
        } catch {
          return { code: String(res.status), message: text };
        }
      })();
      throw new Error(`${method} ${path}: ${res.status} ${err.code}: ${err.message}`);
    }
    return JSON.parse(text) as T;
  };
  const id = o.id ?? basename(file).replace(/\.onnx$/, '').replace(/[^A-Za-z0-9._-]/g, '_');
  const info = await call<{ id: string; bytes: number; sha256: string }>('PUT', `/api/policies/${id}`, readFileSync(file));
  console.log(`uploaded ${file} as policy '${info.id}' (${info.bytes} bytes, sha256 ${info.sha256.slice(0, 12)})`);
  const robot = o.robot ?? (await call<Array<{ id: string }>>('GET', '/api/robots')).map((r) => r.id)[0];
  if (!robot) throw new Error(`the service at ${base} has no robots`);
  let run = await call<RunStatusLike>('POST', `/api/policies/${info.id}/deploy`, { robot, episodes: o.episodes });
  console.log(`deployed on robot '${robot}': run ${run.id}`);
  const bar = progressBar();
  let shown = -1;
  while (run.state === 'running' || run.state === 'stopping') {
    await new Promise((r) => setTimeout(r, 250));
    run = await call<RunStatusLike>('GET', `/api/runs/${run.id}`);
    if (run.progress.done !== shown) bar((shown = run.progress.done), run.progress.total, `true success ${run.lastMetrics?.trueSuccess?.toFixed(2) ?? '-'}`);
  }
  if (o.json) printJson({ policy: info, robot, run });
  else printTable('deployment', [{ run: run.id, state: run.state, episodes: `${run.progress.done}/${run.progress.total}`, 'true success': run.lastMetrics?.trueSuccess ?? undefined, interval: run.lastMetrics?.ppi?.map((x) => x.toFixed(2)).join('–') ?? '', checkpoint: run.checkpoint ?? '' }]);
  if (run.state === 'failed') throw new Error(`run ${run.id} failed: ${run.error}`);
}
