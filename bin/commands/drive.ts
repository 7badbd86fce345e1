// `wmrl drive`: run a policy on a robot — the in-process sim or a robot YAML (rosbridge / ROS 2) —
// through the safety layer, recording every episode in the episode store.
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { parseArgs } from 'node:util';
import { loadRobotConfig } from '../../hardware/config.js';
import { EpisodeStore } from '../../episodes/store/store.js';
import { runEpisode, type Policy, type Scorer } from '../../hardware/record.js';
import { connectRobot } from '../../hardware/robots/index.js';
import { SimRobot } from '../../hardware/robots/sim.js';
import { SafetyLayer, DEFAULT_SAFETY } from '../../hardware/safety.js';
import { OnnxPolicy } from '../../policies/onnx-policy.js';
import { progressBar } from '../progress.js';

export const DEFAULT_STORE = 'data/episodes.db';

export async function drive(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      robot: { type: 'string' },
      policy: { type: 'string', default: 'expert' },
      episodes: { type: 'string', default: '1' },
      steps: { type: 'string' },
      store: { type: 'string', default: DEFAULT_STORE },
      'policy-version': { type: 'string' },
      fast: { type: 'boolean', default: false },
    },
  });
  if (!values.robot) throw new Error('--robot is required: a robot YAML file, or sim:TASK[:PROFILE] for the in-process sim');
  const n = Number(values.episodes);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--episodes must be a positive integer, got '${values.episodes}'`);

  const isSim = values.robot.startsWith('sim:');
  if (values.policy === 'expert' && !isSim) throw new Error("--policy expert is the sim's scripted expert; it needs --robot sim:TASK");

  let robot: SafetyLayer;
  let sim: SimRobot | undefined;
  let profile = 'real';
  if (isSim) {
    const [, task, prof = 'nominal'] = values.robot.split(':');
    sim = await SimRobot.create({ task: task!, profile: prof });
    profile = prof;
    robot = new SafetyLayer(sim, { ...DEFAULT_SAFETY, maxDelta: 2 }, { watchdog: !values.fast });
  } else {
    robot = await connectRobot(loadRobotConfig(values.robot), (e) => console.error(`safety: ${e.kind}: ${e.detail}`));
  }
  try {
    await driveEpisodes(robot, sim, profile, values as DriveValues, n);
  } finally {
    await robot[Symbol.asyncDispose]();
  }
}

interface DriveValues {
  policy: string;
  steps?: string;
  store: string;
  'policy-version'?: string;
  fast: boolean;
}

async function driveEpisodes(robot: SafetyLayer, sim: SimRobot | undefined, profile: string, values: DriveValues, n: number): Promise<void> {
  const maxSteps = values.steps ? Number(values.steps) : (sim?.env.horizon ?? 500);
  if (!Number.isInteger(maxSteps) || maxSteps < 1) throw new Error(`--steps must be a positive integer, got '${values.steps}'`);

  let policy: Policy;
  if (values.policy === 'expert') {
    let expert = sim!.env.expert();
    let last = -1;
    policy = () => {
      const t = sim!.lastStep?.info.t ?? 0;
      if (t === 0 && last !== 0) expert = sim!.env.expert(); // a fresh expert per episode
      last = t;
      return expert.act(sim!.lastObs);
    };
  } else if (values.policy === 'hold') {
    policy = () => robot.holdAction();
  } else {
    const p = await OnnxPolicy.load(values.policy, robot.spec);
    policy = (o) => p.act(o);
  }
  const score: Scorer | undefined = sim ? () => ({ reward: sim!.lastStep?.reward ?? 0, done: !!(sim!.lastStep?.terminated || sim!.lastStep?.truncated), success: sim!.lastStep?.info.success }) : undefined;

  mkdirSync(dirname(values.store), { recursive: true });
  const store = EpisodeStore.open(values.store);
  const bar = progressBar();
  let successes = 0;
  try {
    for (let k = 0; k < n; k++) {
      const out = await runEpisode({
        robot,
        policy,
        maxSteps,
        store,
        score,
        realTime: !values.fast,
        meta: { robot: robot.spec.name, policyVersion: values['policy-version'] ?? values.policy, hardwareProfile: profile, task: sim?.env.task },
      });
      if (out.success) successes++;
      bar(k + 1, n, `episode ${out.id.slice(0, 8)}: ${out.steps} steps, ${out.status}${out.success === undefined ? '' : out.success ? ', success' : ', failure'}${out.stoppedBy ? ` (stopped: ${out.stoppedBy})` : ''}`);
    }
  } finally {
    store.close();
  }
  console.log(`${n} episode(s) recorded in ${values.store}${sim ? `; success ${successes}/${n}` : ''}; interventions: ${JSON.stringify(Object.fromEntries(Object.entries(robot.counts).filter(([, v]) => v > 0)))}`);
}
