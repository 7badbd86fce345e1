// `wmrl bc`: behaviour cloning from recorded episodes (an episode store, an MCAP recording or a LeRobot
// v3.0 dataset) for a robot (the sim's sim:TASK[:PROFILE] or a robot YAML), exported as one deployable
// policy .onnx (policies/artifact.ts). A Gaussian MLP on the observation vector, or the VLA on the
// observation vector, the camera image and the instruction (the episodes must carry images).
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { layoutOf, type ObservationLayout } from '../../common/layout.js';
import type { RobotDeclaration } from '../../common/robot.js';
import { withCommandHistorySpec } from '../../hardware/command-history.js';
import { loadRobotConfig } from '../../hardware/config.js';
import { SimRobot } from '../../hardware/robots/sim.js';
import { exportPolicyArtifact } from '../../policies/artifact.js';
import { behaviourClone } from '../../policies/bc.js';
import { demonstrationsFromEpisodes, loadEpisodes, observationStats, parseEpisodeSource } from '../../policies/episode-demos.js';
import { GaussianPolicy } from '../../policies/gaussian.js';
import type { Policy } from '../../policies/types.js';
import { VlaPolicy } from '../../policies/vla.js';
import { progressBar } from '../progress.js';
import { printJson } from '../json-output.js';
import { printTable } from '../table.js';
import { SIM_COMMAND_HISTORY } from '../../recipes/options.js';

export interface BcCliOptions {
  from: string;
  robot: string;
  out: string;
  policy: 'gaussian' | 'vla';
  epochs: number;
  batch: number;
  lr: number;
  chunk: number;
  seed: number;
  ids?: string[];
  partial: boolean;
  policyVersion: string;
  runId: string;
  /** Sim robot: its observation reports the last this many commands sent (a robot YAML sets command_history). */
  commandHistory?: number;
  json?: boolean;
}

/** The robot's declaration and instructions: the sim's (camera of `image` px), or a robot YAML's spec. */
async function robotOf(robot: string, image: number | undefined, commandHistory: number | undefined): Promise<{ spec: RobotDeclaration; layout: ObservationLayout; instructions: string[] }> {
  if (robot.startsWith('sim:')) {
    const [, task, profile = 'nominal'] = robot.split(':');
    const sim = await SimRobot.create({ task: task!, profile, image, commandHistory: commandHistory ?? SIM_COMMAND_HISTORY });
    try {
      return { spec: sim.spec, layout: sim.env.layout, instructions: [...sim.env.observationSpace.instructions] };
    } finally {
      await sim[Symbol.asyncDispose]();
    }
  }
  if (commandHistory !== undefined) throw new Error(`--command-history is the sim robot's; robot ${robot} sets command_history in its YAML`);
  const cfg = loadRobotConfig(robot);
  // The observation the robot reports once connected (hardware/robots/index.ts connectRobot): its history included.
  const spec = withCommandHistorySpec(cfg.spec, cfg.commandHistory ?? 0);
  return { spec, layout: layoutOf(spec), instructions: [] };
}

export async function bc(o: BcCliOptions): Promise<void> {
  const src = parseEpisodeSource(o.from);
  // The sim renders the camera at the episodes' image size; read the size from a first pass without images.
  const first = await robotOf(o.robot, undefined, o.commandHistory);
  const A = first.spec.action.names.length;
  const episodes = await loadEpisodes(src, { layout: first.layout, actionDim: A, ids: o.ids, status: o.partial ? 'all' : 'complete' });
  if (!episodes.length) throw new Error(`${o.from}: no ${o.partial ? '' : 'complete '}episodes`);
  let spec = first.spec, instructions = first.instructions;
  let image: { height: number; width: number } | undefined;
  if (o.policy === 'vla') {
    const img = episodes.flatMap((e) => e.steps).find((s) => s.obs.image)?.obs.image;
    if (!img) throw new Error(`${o.from}: --policy vla reads camera images; these episodes carry none`);
    image = { height: img.height, width: img.width };
    if (o.robot.startsWith('sim:')) {
      if (image.height !== image.width) throw new Error(`${o.from}: images are ${image.width}x${image.height}; the sim robot renders square images`);
      spec = (await robotOf(o.robot, image.width, o.commandHistory)).spec;
    } else if (!spec.camera || spec.camera.width !== image.width || spec.camera.height !== image.height) {
      throw new Error(`${o.from}: images are ${image.width}x${image.height}; robot ${spec.name} declares ${spec.camera ? `a ${spec.camera.width}x${spec.camera.height} camera` : 'no camera'}`);
    }
    instructions = [...new Set([...instructions, ...episodes.flatMap((e) => [e.meta.instruction, ...e.steps.map((s) => s.obs.instruction)].filter((x): x is string => x !== undefined))])];
    if (!instructions.length) throw new Error(`${o.from}: --policy vla reads the instruction; neither the robot nor the episodes give one`);
  }
  const chunk = o.policy === 'vla' ? o.chunk : 1;
  if (o.policy !== 'vla' && o.chunk !== 1) throw new Error('--chunk: only the VLA acts in chunks');
  const demos = demonstrationsFromEpisodes(episodes, { layout: first.layout, actionDim: A, chunk, image, instructions: o.policy === 'vla', source: o.from });
  const norm = observationStats(demos.obs, demos.obs.length / demos.steps);
  const bounds = { actLow: spec.action.low, actHigh: spec.action.high, obsMean: norm.mean, obsStd: norm.std, seed: o.seed };
  const policy: Policy = o.policy === 'vla'
    ? new VlaPolicy({ layout: first.layout, actDim: A, chunk, image: image!, instructions, ...bounds })
    : new GaussianPolicy({ obsDim: demos.obs.length / demos.steps, actDim: A, ...bounds });
  const bar = progressBar();
  const losses: number[] = [];
  try {
    await behaviourClone(policy, demos, {
      epochs: o.epochs, batchSize: o.batch, optimizer: { lr: o.lr, clipNorm: 1 }, seed: o.seed,
      onEpoch: (e, loss) => {
        losses.push(loss);
        bar(e + 1, o.epochs, `loss ${loss.toFixed(4)}`);
      },
    });
    mkdirSync(dirname(o.out) || '.', { recursive: true });
    exportPolicyArtifact(policy, o.out, { layout: first.layout, action: spec.action, controlHz: spec.controlHz, policyVersion: o.policyVersion, runId: o.runId });
  } finally {
    await policy.release();
  }
  if (o.json) return printJson({ from: o.from, robot: o.robot, out: o.out, policy: policy.kind, episodes: demos.episodes, steps: demos.steps, image: image ?? null, losses });
  printTable(`behaviour cloning from ${o.from}`, [{
    policy: policy.kind, episodes: demos.episodes, steps: demos.steps, images: image ? `${image.width}x${image.height}` : 'none',
    'first loss': losses[0]!, 'last loss': losses.at(-1)!, out: o.out,
  }]);
}
