// `wmrl reward-serve`: the reward API for external RL trainers (OpenRLHF, verl) on its own port,
// over a built-in research task, its sandbox pool and the WMRL correction core.
import { newRewardToken, serveRewardApi } from '../../autoresearch/reward-api.js';
import { RewardService } from '../../autoresearch/reward-service.js';
import { SandboxPool } from '../../autoresearch/sandbox.js';
import { isLoopback } from '../../common/host-policy.js';
import { RESEARCH_TASKS } from '../../autoresearch/tasks/index.js';

export interface RewardServeOptions {
  task: string;
  host: string;
  port: number;
  slots: number;
  deadlineMs: number;
  anchorFraction: number;
  invalidReward: number;
  /** The access token: given, or made here (undefined), or none (false: loopback only). */
  token?: string | false;
  allowedHost?: string[];
  /** Run proposals without the sandbox (--unsafe-no-sandbox): only where bwrap cannot run. */
  unsafeNoSandbox?: boolean;
}


export async function rewardServe(o: RewardServeOptions): Promise<void> {
  const task = RESEARCH_TASKS.get(o.task);
  if (!task) throw new Error(`--task ${o.task}: not a built-in research task (${[...RESEARCH_TASKS.keys()].join(', ')})`);
  // Without a token, anyone who reaches the port runs code in the sandbox: never beyond this machine.
  if (o.token === false && !isLoopback(o.host)) throw new Error(`--no-token with --host ${o.host}: without a token anyone on the network could run proposals in the sandbox; keep a token, or listen on 127.0.0.1`);
  const token = o.token === false ? undefined : (o.token ?? newRewardToken());
  const pool = SandboxPool.create({ slots: o.slots, unsafeNoIsolation: o.unsafeNoSandbox === true });
  const service = new RewardService({
    task, executor: pool, deadlineMs: o.deadlineMs, invalidReward: o.invalidReward,
    corrector: { anchors: { fraction: o.anchorFraction } },
    onError: (e) => console.error(`wmrl reward-serve: ${e.message}`),
  });
  const server = await serveRewardApi(service, { host: o.host, port: o.port, token, allowedHosts: o.allowedHost });
  const iso = pool.isolation;
  console.log(`reward API on ${server.url} (task ${task.name}: ${task.metric})`);
  const q = token ? `?token=${token}` : '';
  console.log(token ? `  access token: ${token} (Authorization: Bearer <token>, or ?token=<token> for trainers that send no headers)` : '  access token: none (--no-token; loopback only)');
  console.log(`  OpenRLHF: --remote_rm_url ${server.url}/get_reward${q}    grade: POST ${server.url}/grade${q}    health: GET ${server.url}/health`);
  console.log(`  sandbox: ${pool.capacity} slots; ${iso.filesystem ? `network isolated, files and processes too (bubblewrap)${iso.droppedToUid !== null ? `, runs as uid ${iso.droppedToUid}` : ''}` : 'NOT ISOLATED (--unsafe-no-sandbox): proposals see this machine\'s network and files'}`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', () => resolve());
    process.once('SIGTERM', () => resolve());
  });
  await server.close();
  await pool.close();
  await service.close();
}
