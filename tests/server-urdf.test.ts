// URDF robots: the reach arm's URDF (sim/assets/reach/robot.urdf) mirrors its MJCF (MuJoCo compiles both; same
// body poses for the same joint angles), and the service serves a robot's URDF and the meshes it names —
// relative to it or through package:// — and nothing else.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MjEnv, makeEnv, mujoco } from '../sim/index.js';
import { startService, type Service } from '../server/service.js';
import type { RobotStatus } from '../server/schemas.js';

const URDF = 'sim/assets/reach/robot.urdf';
const dir = mkdtempSync(join(tmpdir(), 'wmrl-urdf-'));

describe('the reach arm as a URDF', () => {
  it('compiles in MuJoCo and puts every link where robot.xml puts the body of the same name, at any joint angles', async () => {
    const mj = await mujoco();
    // SimModel.load copies only MJCF assets into MuJoCo's file system: the URDF is written there directly.
    mj.FS.mkdirTree('/urdf-test', 0o777);
    mj.FS.writeFile('/urdf-test/robot.urdf', readFileSync(URDF));
    const model = mj.MjModel.loadFromXML('/urdf-test/robot.urdf');
    const data = new mj.MjData(model);
    const env = await makeEnv({ task: 'reach' });
    try {
      expect(env).toBeInstanceOf(MjEnv);
      const mjcf = env as MjEnv;
      const body = (n: string) => mj.mj_name2id(model, (mj.mjtObj.mjOBJ_BODY as { value: number }).value, n);
      expect(model.njnt).toBe(2);
      for (const q of [[0, 0], [0.7, -1.3], [2.5, 2.0], [-3, -2.6]]) {
        (data.qpos as Float64Array).set(q);
        mj.mj_kinematics(model, data);
        (mjcf.data.raw.qpos as Float64Array).set(q, 0);
        mjcf.data.kinematics();
        for (const n of ['base', 'upper', 'fore']) {
          const i = body(n), j = mjcf.model.id('mjOBJ_BODY', n);
          const a = [...(data.xpos as Float64Array).slice(3 * i, 3 * i + 3), ...(data.xquat as Float64Array).slice(4 * i, 4 * i + 4)];
          const b = [...(mjcf.data.raw.xpos as Float64Array).slice(3 * j, 3 * j + 3), ...(mjcf.data.raw.xquat as Float64Array).slice(4 * j, 4 * j + 4)];
          a.forEach((v, k) => expect(v, `${n} at q = ${q}, entry ${k}`).toBeCloseTo(b[k]!, 6));
        }
      }
      // Same masses as the compiled MJCF (its capsules' densities).
      for (const n of ['upper', 'fore']) expect((model.body_mass as Float64Array)[body(n)]).toBeCloseTo((mjcf.model.raw.body_mass as Float64Array)[mjcf.model.id('mjOBJ_BODY', n)]!, 4);
    } finally {
      data.delete();
      model.delete();
      env.dispose();
    }
  });
});

describe('the service serves a robot URDF', () => {
  let svc: Service;
  // A robot description laid out as a ROS package: arm_description/urdf/arm.urdf naming meshes both ways.
  const pkg = join(dir, 'arm_description');
  const stl = 'solid tip\nfacet normal 0 0 1\nouter loop\nvertex 0 0 0\nvertex 1 0 0\nvertex 0 1 0\nendloop\nendfacet\nendsolid tip\n';
  beforeAll(async () => {
    mkdirSync(join(pkg, 'urdf', 'meshes'), { recursive: true });
    mkdirSync(join(pkg, 'meshes'), { recursive: true });
    const urdf = readFileSync(URDF, 'utf8').replace('<sphere radius="0.016"/>', '<mesh filename="package://arm_description/meshes/tip.stl" scale="0.01 0.01 0.01"/>');
    writeFileSync(join(pkg, 'urdf', 'arm.urdf'), urdf);
    writeFileSync(join(pkg, 'urdf', 'meshes', 'base.stl'), stl);
    writeFileSync(join(pkg, 'meshes', 'tip.stl'), stl);
    writeFileSync(join(pkg, 'urdf', 'notes.txt'), 'not a model file');
    writeFileSync(join(dir, 'secret.urdf'), '<robot/>');
    svc = await startService({ dataDir: join(dir, 'data'), port: 0, foxglovePort: null, mqttPort: null, robots: [{ id: 'arm', task: 'reach', profile: 'nominal', urdf: join(pkg, 'urdf', 'arm.urdf') }, { id: 'plain', task: 'reach', profile: 'nominal' }] });
  });
  afterAll(async () => {
    await svc?.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const get = (url: string) => svc.app.inject({ method: 'GET', url });

  it("the robot's status says where its URDF is; the URDF and its meshes are served, by relative path and package://", async () => {
    const arm = (await get('/api/robots/arm')).json<RobotStatus>();
    expect(arm.urdf).toBe('/api/robots/arm/urdf/arm.urdf');
    expect((await get('/api/robots/plain')).json<RobotStatus>().urdf).toBeNull();
    const file = await get(arm.urdf!);
    expect(file.statusCode).toBe(200);
    expect(file.headers['content-type']).toMatch(/^application\/xml/);
    expect(file.body).toContain('package://arm_description/meshes/tip.stl');
    const rel = await get('/api/robots/arm/urdf/meshes/base.stl');
    expect(rel.statusCode).toBe(200);
    expect(rel.headers['content-type']).toBe('model/stl');
    expect(rel.body).toBe(stl);
    const viaPackage = await get('/api/robots/arm/urdf/package/arm_description/meshes/tip.stl');
    expect(viaPackage.statusCode).toBe(200);
    expect(viaPackage.body).toBe(stl);
  });

  it('refuses what is not the URDF folder\'s model files: 400 outside the folder, 404 missing, not a model file, unknown package, no URDF, unknown robot', async () => {
    const outside = await get('/api/robots/arm/urdf/..%2F..%2Fsecret.urdf');
    expect(outside.statusCode).toBe(400);
    expect(outside.json()).toMatchObject({ code: 'WMRL_VALIDATION', message: expect.stringMatching(/^params\.\*: '\.\.\/\.\.\/secret\.urdf' is outside the folder of robot 'arm'/) });
    const outsidePackage = await get('/api/robots/arm/urdf/package/arm_description/..%2F..%2Fsecret.urdf');
    expect(outsidePackage.statusCode).toBe(400);
    const missing = await get('/api/robots/arm/urdf/meshes/nope.stl');
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toMatchObject({ code: 'WMRL_NOT_FOUND', message: "robot 'arm' has no URDF file 'meshes/nope.stl'" });
    expect((await get('/api/robots/arm/urdf/notes.txt')).json().message).toMatch(/'notes\.txt' is not a model file/);
    expect((await get('/api/robots/arm/urdf/package/other_pkg/meshes/tip.stl')).json().message).toBe("robot 'arm': package://other_pkg/ is neither declared for it (none declared) nor its URDF's own package (the URDF's folder or the one above it, named 'other_pkg')");
    expect((await get('/api/robots/plain/urdf/robot.urdf')).json()).toMatchObject({ code: 'WMRL_NOT_FOUND', message: "robot 'plain' declares no URDF" });
    expect((await get('/api/robots/r2d2/urdf/robot.urdf')).json().code).toBe('WMRL_ROBOT_NOT_FOUND');
  });

  it('a robot whose URDF file is missing does not start', async () => {
    await expect(startService({ dataDir: join(dir, 'data2'), port: 0, foxglovePort: null, mqttPort: null, robots: [{ id: 'x', task: 'reach', profile: 'nominal', urdf: join(dir, 'nope.urdf') }] })).rejects.toThrow(/robot 'x': its URDF .*nope\.urdf is not a file/);
  });
});
