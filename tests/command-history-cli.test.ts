// `--command-history K` on the command line: episodes recorded on a sim robot that reports its last K commands,
// a policy cloned from them whose artifact declares those features, and that policy driven on the same robot;
// a robot without the history refuses the artifact by naming the missing feature, and a robot YAML keeps its own
// `command_history` key.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { SimRobot } from '../hardware/robots/sim.js';
import { OnnxPolicy } from '../policies/onnx-policy.js';
import { onnxCheck } from './helpers/onnx-check.js';

const dir = mkdtempSync(join(tmpdir(), 'command-history-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const wmrl = (...args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', 'bin/wmrl.ts', ...args], { encoding: 'utf8', timeout: 120_000 });

it('drive records, bc clones and drive runs a policy over the last 3 commands; a robot without them is refused by name', async () => {
  const db = join(dir, 'episodes.db'), out = join(dir, 'policy.onnx');
  const rec = wmrl('drive', '--robot', 'sim:reach:gap', '--policy', 'demonstrator', '--episodes', '2', '--fast', '--command-history', '3', '--store', db);
  expect(rec.stderr + rec.stdout).toMatch(/2 episode\(s\) recorded/);
  expect(rec.status).toBe(0);

  // the episodes carry the commands: cloning them for the robot without the history fails on the layout
  const bad = wmrl('bc', '--from', `store:${db}`, '--robot', 'sim:reach:gap', '--command-history', '0', '--out', join(dir, 'x.onnx'), '--epochs', '1');
  expect(bad.status).not.toBe(0);
  expect(bad.stderr).toMatch(/observation has \d+ features, the layout declares \d+/);

  const bc = wmrl('bc', '--from', `store:${db}`, '--robot', 'sim:reach:gap', '--command-history', '3', '--out', out, '--epochs', '2');
  expect(bc.stderr + bc.stdout).toMatch(/behaviour cloning from store:/);
  expect(bc.status).toBe(0);
  onnxCheck(out);
  await using withHistory = await SimRobot.create({ task: 'reach', profile: 'gap', commandHistory: 3 });
  await using without = await SimRobot.create({ task: 'reach', profile: 'gap' });
  const policy = await OnnxPolicy.load(out, withHistory.spec);
  expect((await policy.act(await withHistory.reset({ seed: 3 }))).length).toBe(2);
  await expect(OnnxPolicy.load(out, without.spec)).rejects.toThrow(/policy has 'shoulder command t-1' \(1\), robot has nothing/);

  // the same episodes through a LeRobot dataset whose state entries the history names, and back
  const ds = join(dir, 'lerobot');
  const ex = wmrl('episodes', 'export-lerobot', db, ds, '--robot', 'sim:reach:gap', '--command-history', '3');
  expect(ex.status).toBe(0);
  const info = JSON.parse(readFileSync(join(ds, 'meta', 'info.json'), 'utf8')) as { features: Record<string, { names?: unknown }> };
  expect(JSON.stringify(info.features['observation.state']!.names)).toMatch(/elbow command t-3/);
  const im = wmrl('episodes', 'import-lerobot', ds, join(dir, 'back.db'), '--robot', 'sim:reach:gap', '--command-history', '3');
  expect(im.stderr + im.stdout).toMatch(/imported 2 episode\(s\)/);
  const noHistory = wmrl('episodes', 'import-lerobot', ds, join(dir, 'never.db'), '--robot', 'sim:reach:gap', '--command-history', '0');
  expect(noHistory.status).not.toBe(0);

  const run = wmrl('drive', '--robot', 'sim:reach:gap', '--policy', out, '--episodes', '1', '--fast', '--command-history', '3', '--store', join(dir, 'run.db'));
  expect(run.stderr + run.stdout).toMatch(/1 episode\(s\) recorded/);
  expect(run.status).toBe(0);
  const refused = wmrl('drive', '--robot', 'sim:reach:gap', '--policy', out, '--episodes', '1', '--fast', '--command-history', '0', '--store', join(dir, 'run.db'));
  expect(refused.status).not.toBe(0);
  expect(refused.stderr).toMatch(/shoulder command t-1/);
  // Without the flag the sim robot reports its last SIM_COMMAND_HISTORY (4) commands: one more than the policy reads.
  const byDefault = wmrl('drive', '--robot', 'sim:reach:gap', '--policy', out, '--episodes', '1', '--fast', '--store', join(dir, 'run.db'));
  expect(byDefault.status).not.toBe(0);
  expect(byDefault.stderr).toMatch(/command t-4/);
}, 240_000);

it('train post-trains a policy over the last 3 commands (world model, prompts, robot and held-out evaluation alike) and resumes with them', async () => {
  const out = join(dir, 'run');
  const r = wmrl('train', '--quick', '--robot', 'sim:reach:gap', '--command-history', '3', '--calibrate', '0', '--updates', '2', '--prompts', '2', '--group', '2', '--imagine', '1', '--anchor-groups', '1', '--out', out);
  expect(r.stderr + r.stdout).toMatch(/policy: /);
  expect(r.status).toBe(0);
  expect(JSON.parse(readFileSync(join(out, 'config.json'), 'utf8')).commandHistory).toBe(3);
  await using robot = await SimRobot.create({ task: 'reach', profile: 'gap', commandHistory: 3 });
  expect((await OnnxPolicy.load(join(out, 'policy.onnx'), robot.spec)).obsDim).toBe(robot.env.observationSpace.state.shape[0]);
  const more = wmrl('train', '--resume', '--updates', '3', '--out', out);
  expect(more.stderr + more.stdout).toMatch(/\| wmrl \| 3 \|/);
  expect(more.status).toBe(0);
}, 240_000);

it('bad values and a robot YAML are refused, naming the option', () => {
  const neg = wmrl('drive', '--robot', 'sim:reach', '--command-history', '-1');
  expect(neg.status).not.toBe(0);
  expect(neg.stderr).toMatch(/--command-history must be a whole number of steps in \[0, 64\], got '-1'/);
  const yaml = wmrl('drive', '--robot', 'launch/robots/mqtt-arm.yaml', '--command-history', '3', '--policy', 'hold');
  expect(yaml.status).not.toBe(0);
  expect(yaml.stderr).toMatch(/--command-history is the sim robot's; robot launch\/robots\/mqtt-arm.yaml sets command_history in its YAML/);
  const train = wmrl('train', '--robot', 'launch/robots/mqtt-arm.yaml', '--task', 'reach', '--command-history', '3', '--out', join(dir, 'never'));
  expect(train.status).not.toBe(0);
  expect(train.stderr).toMatch(/--command-history is the sim robot's/);
  const noRobot = wmrl('episodes', 'export-lerobot', join(dir, 'none.db'), join(dir, 'none'), '--command-history', '3');
  expect(noRobot.stderr).toMatch(/--command-history names the layout of --robot sim:TASK\[:PROFILE\]; give --robot too/);
  const big = wmrl('train', '--robot', 'sim:reach:gap', '--command-history', '65', '--out', join(dir, 'never'));
  expect(big.stderr).toMatch(/--command-history must be a whole number of steps in \[0, 64\], got '65'/);
}, 120_000);
