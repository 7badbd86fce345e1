// `wmrl drive`: run a policy on a robot — the in-process sim or a robot YAML (rosbridge / ROS 2) —
// through the safety layer, recording every episode in the episode store.
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { loadRobotConfig } from '../../hardware/config.js';
import { EpisodeStore } from '../../episodes/store/store.js';
import { runEpisode, type Policy, type Scorer } from '../../hardware/record.js';
import { connectRobot } from '../../hardware/robots/index.js';
import { SimRobot } from '../../hardware/robots/sim.js';
import { SafetyLayer, DEFAULT_SAFETY } from '../../hardware/safety.js';
import { readOnnxInfo } from '../../nn/index.js';
import { OnnxPolicy } from '../../policies/onnx-policy.js';
import { loadProfile } from '../../sim/index.js';
import { progressBar } from '../progress.js';
import { printJson } from '../json-output.js';
import { printTable } from '../table.js';
import { SIM_COMMAND_HISTORY } from '../../recipes/options.js';

export const DEFAULT_STORE = 'data/episodes.db';

export interface DriveOptions {
  robot: string;
  policy: string;
  episodes: number;
  steps?: number;
  store: string;
  policyVersion?: string;
  fast: boolean;
  /** Sim robot: report the last this many commands sent (a robot YAML sets command_history). */
  commandHistory?: number;
  json?: boolean;
}

/** The camera size a policy .onnx reads (its `image` input [batch, H, W, 3]), so the sim robot renders it. */
function policyImageSize(policy: string): number | undefined {
  if (!policy.endsWith('.onnx')) return undefined;
  const img = readOnnxInfo(policy).inputs.find((i) => i.name === 'image');
  if (!img) return undefined;
  const [, h, w] = img.shape.map(Number);
  if (h !== w) throw new Error(`${policy}: reads ${w}x${h} images; the sim robot renders square images`);
  return h;
}

export async function drive(values: DriveOptions): Promise<void> {
  const n = values.episodes;
  const isSim = values.robot.startsWith('sim:');
  if (values.policy === 'expert' && !isSim) throw new Error("--policy expert is the sim's scripted expert; it needs --robot sim:TASK");
  if (values.policy === 'demonstrator' && !isSim) throw new Error("--policy demonstrator is the sim's robust demonstrator; it needs --robot sim:TASK[:PROFILE]");

  let robot: SafetyLayer;
  let sim: SimRobot | undefined;
  let profile = 'real';
  if (values.commandHistory !== undefined && !isSim) throw new Error(`--command-history is the sim robot's; robot ${values.robot} sets command_history in its YAML`);
  if (isSim) {
    const [, task, prof = 'nominal'] = values.robot.split(':');
    const s = await SimRobot.create({ task: task!, profile: prof, image: policyImageSize(values.policy), commandHistory: values.commandHistory ?? SIM_COMMAND_HISTORY });
    sim = s;
    profile = prof;
    // --fast steps the sim as fast as it goes: the safety layer then reads the sim's clock, not the host's.
    robot = new SafetyLayer(s, { ...DEFAULT_SAFETY, maxDelta: 2 }, { watchdog: !values.fast, ...(values.fast ? { now: () => s.clockMs } : {}) });
  } else {
    robot = await connectRobot(loadRobotConfig(values.robot), (e) => console.error(`safety: ${e.kind}: ${e.detail}`));
  }
  try {
    await driveEpisodes(robot, sim, profile, values, n);
  } finally {
    await robot[Symbol.asyncDispose]();
  }
}

async function driveEpisodes(robot: SafetyLayer, sim: SimRobot | undefined, profile: string, values: DriveOptions, n: number): Promise<void> {
  const maxSteps = values.steps ?? sim?.env.horizon ?? 500;

  let policy: Policy;
  if (values.policy === 'demonstrator') {
    // told the actuation latency the robot's profile declares; the safety layer (maxDelta 2 on [-1, 1]) passes its commands unchanged
    const latencySteps = loadProfile(profile).action_latency_steps;
    let demo = sim!.env.demonstrator({ latencySteps });
    let last = -1;
    policy = () => {
      const t = sim!.lastStep?.info.t ?? 0;
      if (t === 0 && last !== 0) demo = sim!.env.demonstrator({ latencySteps }); // a fresh one per episode
      last = t;
      return demo.act(sim!.lastObs);
    };
  } else if (values.policy === 'expert') {
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
    let last = -1;
    policy = (o) => {
      // a chunked policy starts each episode with a fresh chunk
      const t = sim?.lastStep?.info.t ?? 0;
      if (t === 0 && last !== 0) p.reset();
      last = t;
      return p.act(o);
    };
  }
  const score: Scorer | undefined = sim ? () => ({ reward: sim!.lastStep?.reward ?? 0, done: !!(sim!.lastStep?.terminated || sim!.lastStep?.truncated), success: sim!.lastStep?.info.success }) : undefined;

  mkdirSync(dirname(values.store), { recursive: true });
  const store = EpisodeStore.open(values.store);
  const bar = progressBar();
  let successes = 0;
  const done: Array<{ id: string; steps: number; status: string; success: boolean | null; return: number; stoppedBy: string | null }> = [];
  try {
    for (let k = 0; k < n; k++) {
      const out = await runEpisode({
        robot,
        policy,
        maxSteps,
        store,
        score,
        realTime: !values.fast,
        meta: { robot: robot.spec.name, policyVersion: values.policyVersion ?? values.policy, hardwareProfile: profile, task: sim?.env.task },
      });
      if (out.success) successes++;
      done.push({ id: out.id, steps: out.steps, status: out.status, success: out.success ?? null, return: out.return, stoppedBy: out.stoppedBy ?? null });
      bar(k + 1, n, `episode ${out.id.slice(0, 8)}: ${out.steps} steps, ${out.status}${out.success === undefined ? '' : out.success ? ', success' : ', failure'}${out.stoppedBy ? ` (stopped: ${out.stoppedBy})` : ''}`);
    }
  } finally {
    store.close();
  }
  const interventions = Object.fromEntries(Object.entries(robot.counts).filter(([, v]) => v > 0));
  if (values.json) return printJson({ robot: values.robot, policy: values.policy, store: values.store, episodes: done, successes: sim ? successes : null, interventions });
  printTable('episodes', done.map((e) => ({ episode: e.id.slice(0, 8), steps: e.steps, status: e.status, success: e.success === null ? '' : e.success ? 'yes' : 'no', return: e.return, stopped: e.stoppedBy ?? '' })));
  console.log(`${n} episode(s) recorded in ${values.store}${sim ? `; success ${successes}/${n}` : ''}; interventions: ${JSON.stringify(interventions)}`);
}
