// Bad MJCF files and bad robot mappings give errors that name the file and the line or key; nothing crashes.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../common/config.js';
import { makeCustomEnv, parseRobotMapping } from '../sim/custom.js';
import { MujocoLoadError, SimModel } from '../sim/mujoco.js';
import { makeEnv } from '../sim/registry.js';

const dir = mkdtempSync(join(tmpdir(), 'sim-errors-'));
const write = (name: string, text: string) => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};

describe('bad inputs', () => {
  it('MJCF schema error: file and line', async () => {
    const f = write('schema.xml', '<mujoco>\n<worldbody>\n<geom type="box" sizze="1 1 1"/>\n</worldbody>\n</mujoco>\n');
    await expect(SimModel.load(f)).rejects.toThrowError(new RegExp(`^${f}:3: XML Error: Schema violation: unrecognized attribute: 'sizze'`));
  });

  it('MJCF compile error: file, line and MuJoCo message', async () => {
    const f = write('compile.xml', '<mujoco>\n<worldbody>\n<body>\n<geom type="box" size="1 1"/>\n</body>\n</worldbody>\n</mujoco>\n');
    const err = await SimModel.load(f).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MujocoLoadError);
    expect((err as MujocoLoadError).file).toBe(f);
    expect((err as MujocoLoadError).line).toBe(4);
    expect((err as Error).message).toMatch(/size 2 must be positive in geom/);
  });

  it('malformed XML, unknown reference, missing include and missing file', async () => {
    const bad = write('malformed.xml', '<mujoco>\n<worldbody>\n<geom type="box" size="1 1 1"\n</worldbody>\n</mujoco>\n');
    await expect(SimModel.load(bad)).rejects.toThrowError(new RegExp(`^${bad}:\\d+: .*XML`));
    const ref = write('ref.xml', '<mujoco>\n<worldbody/>\n<actuator>\n<motor joint="nope"/>\n</actuator>\n</mujoco>\n');
    await expect(SimModel.load(ref)).rejects.toThrowError(/unknown transmission target 'nope'/);
    const inc = write('inc.xml', '<mujoco>\n<include file="missing_robot.xml"/>\n</mujoco>\n');
    await expect(SimModel.load(inc)).rejects.toThrowError(new RegExp(`^${inc}:2: .*missing_robot\\.xml`));
    await expect(SimModel.load(join(dir, 'absent.xml'))).rejects.toThrowError(/absent\.xml: cannot read MJCF file/);
    await expect(SimModel.load(write('notmjcf.xml', '<robot/>'))).rejects.toThrowError(/not an MJCF file/);
    // the module still works afterwards
    const env = await makeEnv({ task: 'reach' });
    env.reset(0);
    env.step([0, 0]);
    env.dispose();
  });

  it('robot mapping: unknown key, wrong type and unknown names are named with the file', async () => {
    const arm = join(process.cwd(), 'tests/fixtures/sim/custom/arm.xml');
    const base = `mjcf: ${arm}\nactuators: [a, b]\njoints: [a, b]\nend_effector_site: ee\ngoal: [0.2, 0, 0.35]\n`;
    const unk = write('unk.yaml', base + 'rewards:\n  distance_weight: 1\n');
    await expect(makeCustomEnv({ robot: unk })).rejects.toThrowError(new RegExp(`${unk}:6: key 'rewards': unknown key`));
    const sub = write('sub.yaml', base + 'success:\n  radius: 0.1\n  radios: 2\n');
    await expect(makeCustomEnv({ robot: sub })).rejects.toThrowError(new RegExp(`${sub}:8: key 'success.radios': unknown key`));
    const typ = write('typ.yaml', base.replace('goal: [0.2, 0, 0.35]', 'goal: [0.2, 0]'));
    await expect(makeCustomEnv({ robot: typ })).rejects.toThrowError(new RegExp(`${typ}:5: key 'goal': must be \\[x, y, z\\]`));
    const name = write('name.yaml', base.replace('end_effector_site: ee', 'end_effector_site: hand'));
    await expect(makeCustomEnv({ robot: name })).rejects.toThrowError(/arm\.xml: no site named 'hand'/);
  });

  it('robot mapping errors are ConfigErrors about a robot mapping (never a profile), with file, line and key', async () => {
    const base = 'mjcf: arm.xml\nactuators: [a, b]\njoints: [a, b]\nend_effector_site: ee\ngoal: [0.2, 0, 0.35]\n';
    const thrown = (text: string): ConfigError => {
      try {
        parseRobotMapping(text, 'robot.yaml');
      } catch (e) {
        expect(e).toBeInstanceOf(ConfigError);
        expect((e as Error).message).not.toMatch(/profile/i);
        return e as ConfigError;
      }
      throw new Error(`no error for:\n${text}`);
    };
    expect(thrown('- a\n- b\n')).toMatchObject({ message: 'robot.yaml:1: a robot mapping is a mapping of key: value', key: undefined });
    expect(thrown(base.replace('end_effector_site: ee\n', ''))).toMatchObject({ message: "robot.yaml:1: key 'end_effector_site': missing", line: 1, key: 'end_effector_site' });
    expect(thrown(base.replace('actuators: [a, b]', 'actuators: [a, 5]'))).toMatchObject({ line: 2, key: 'actuators', detail: 'must be a non-empty list of names' });
    expect(thrown(base + 'reward:\n  action_weight: 0.1\n  distance_weight: -1\n')).toMatchObject({ line: 8, key: 'reward.distance_weight', detail: 'must be a number >= 0, got -1' });
    expect(thrown(base + 'horizon: 0\n')).toMatchObject({ line: 6, key: 'horizon', detail: 'must be a positive integer, got 0' });
    expect(thrown(base + 'goal: [1, 2, 3]\n')).toMatchObject({ line: 6, detail: expect.stringMatching(/YAML syntax: .*unique/) });
    const absent = join(dir, 'absent.yaml');
    await expect(makeCustomEnv({ robot: absent })).rejects.toThrowError(new RegExp(`^${absent}: cannot read robot mapping`));
    await expect(makeCustomEnv({ robot: absent })).rejects.toBeInstanceOf(ConfigError);
    // defaults fill what the file leaves out
    expect(parseRobotMapping(base + 'success: {radius: 0.1}\n', 'robot.yaml')).toMatchObject({ substeps: 10, horizon: 200, reward: { distance_weight: 1, action_weight: 0 }, success: { radius: 0.1 } });
  });
});
