// `wmrl reward-serve`: the reward API for external RL trainers (OpenRLHF, verl) on its own port,
// over a built-in research task, its sandbox pool and the WMRL correction core.
import { serveRewardApi } from '../../autoresearch/reward-api.js';
import { RewardService } from '../../autoresearch/reward-service.js';
import { SandboxPool } from '../../autoresearch/sandbox.js';
import { RESEARCH_TASKS } from '../../autoresearch/tasks/index.js';

export interface RewardServeOptions {
  task: string;
  host: string;
  port: number;
  slots: number;
  deadlineMs: number;
  anchorFraction: number;
  invalidReward: number;
}

export async function rewardServe(o: RewardServeOptions): Promise<void> {
  const task = RESEARCH_TASKS.get(o.task);
  if (!task) throw new Error(`--task ${o.task}: not a built-in research task (${[...RESEARCH_TASKS.keys()].join(', ')})`);
  const pool = SandboxPool.create({ slots: o.slots });
  const service = new RewardService({
    task, executor: pool, deadlineMs: o.deadlineMs, invalidReward: o.invalidReward,
    corrector: { anchors: { fraction: o.anchorFraction } },
    onError: (e) => console.error(`wmrl reward-serve: ${e.message}`),
  });
  const server = await serveRewardApi(service, { host: o.host, port: o.port });
  const iso = pool.isolation;
  console.log(`reward API on ${server.url} (task ${task.name}: ${task.metric})`);
  console.log(`  OpenRLHF: --remote_rm_url ${server.url}/get_reward    grade: POST ${server.url}/grade    health: GET ${server.url}/health`);
  console.log(`  sandbox: ${pool.capacity} slots; network ${iso.network ? 'isolated' : 'NOT isolated (unshare refused)'}, pid namespace ${iso.pidNamespace ? 'on' : 'off'}, rlimits ${iso.rlimits ? 'on' : 'off'}${iso.droppedToUid !== null ? `, runs as uid ${iso.droppedToUid}` : ''}`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', () => resolve());
    process.once('SIGTERM', () => resolve());
  });
  await server.close();
  await pool.close();
  await service.close();
}
