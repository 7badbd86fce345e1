// Every task from the CLI, as a new user runs it: `drive --robot sim:TASK[:PROFILE]` for the built-in
// tasks and a user's robot mapping, and `sim-robot --task …` served over rosbridge in its own process,
// with a seeded reset reproducing its start state across the process boundary.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { buildObservation } from '../common/layout.js';
import { RosRobot } from '../hardware/robots/ros.js';
import { SimRobot } from '../hardware/robots/sim.js';
import { standInConfig } from '../hardware/standin.js';
import { spawnStandIn } from './helpers/standin-process.js';

const CUSTOM = 'tests/fixtures/sim/custom/robot.yaml';
const dir = mkdtempSync(join(tmpdir(), 'wmrl-cli-tasks-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const wmrl = (...args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', 'bin/wmrl.ts', ...args], { encoding: 'utf8', timeout: 120_000 });

describe('drive runs every task', () => {
  it('drive --robot sim:pick records an expert episode', () => {
    const d = wmrl('drive', '--robot', 'sim:pick', '--episodes', '1', '--fast', '--store', join(dir, 'pick.db'));
    expect(d.status, d.stderr).toBe(0);
    expect(d.stdout).toMatch(/1 episode\(s\) recorded .*; success 1\/1/);
  });

  it('drive --robot sim:path/robot.yaml:PROFILE drives a user robot with its IK expert', () => {
    const d = wmrl('drive', '--robot', `sim:${CUSTOM}:gap`, '--episodes', '2', '--fast', '--store', join(dir, 'custom.db'));
    expect(d.status, d.stderr).toBe(0);
    expect(d.stdout).toMatch(/2 episode\(s\) recorded .*; success 2\/2/);
    const l = wmrl('episodes', 'list', '--store', join(dir, 'custom.db'));
    expect(l.stdout).toMatch(/sim-custom:robot-gap \(gap\)/);
  });
});

describe.each(['pick', CUSTOM])('sim-robot --task %s over rosbridge (own process)', (task) => {
  it('serves the task in the layout of the in-process sim robot; the same seed gives the same start observation', async () => {
    const local = await SimRobot.create({ task });
    const standIn = await spawnStandIn(['--task', task]);
    const robot = await RosRobot.connect(standInConfig(local.spec, `ws://127.0.0.1:${standIn.port}`), { timeoutMs: 10_000 });
    try {
      const v = async (seed: number) => Array.from(buildObservation(robot.layout, await robot.reset({ seed })));
      const a = await v(21);
      expect(a).toHaveLength(local.env.observationSpace.state.shape[0]);
      await robot.act(new Float32Array(local.spec.action.low.length).fill(0.4));
      expect(await v(21)).toEqual(a);
      expect(await v(22)).not.toEqual(a);
    } finally {
      await robot[Symbol.asyncDispose]();
      await standIn.stop();
      await local[Symbol.asyncDispose]();
    }
  }, 90_000);
});
