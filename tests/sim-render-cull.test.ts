// The renderer's culling changes no byte: renderImage (each geom tested only inside its screen rectangle)
// against the unculled reference, renderImageReference (sim/render-reference.ts: every geom at every pixel),
// compared exactly at the built-in tasks' cameras, a custom robot's own camera and its default view, views from
// inside the scene and a sheared camera, at random states and several image sizes. A rectangle one pixel too
// small (a geom culled where its hit test would hit) changes a pixel's colour and fails these comparisons.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { makeCustomEnv } from '../sim/custom.js';
import { taskCamera, type MjEnv } from '../sim/env.js';
import { heapSize, SimData, SimModel } from '../sim/mujoco.js';
import { makeEnv, TASKS } from '../sim/registry.js';
import { defaultView, renderImage, type CameraView } from '../sim/render.js';
import { renderImageReference } from '../sim/render-reference.js';
import { Rng } from '../sim/rng.js';

const SIZES: Array<[number, number]> = [
  [32, 32],
  [64, 48],
  [23, 37],
];
const dir = mkdtempSync(join(tmpdir(), 'render-cull-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Renders with both and compares bytes; returns the image for the coverage checks. */
function same(model: SimModel, data: SimData, camera: string | CameraView, w: number, h: number, what: string): Uint8Array {
  skyColour(model, data);
  const ref = renderImageReference(model, data, camera, w, h);
  const img = renderImage(model, data, camera, w, h);
  if (!Buffer.from(img).equals(Buffer.from(ref))) {
    let first = -1;
    for (let p = 0; p < ref.length && first < 0; p++) if (img[p] !== ref[p]) first = p;
    const px = Math.floor(first / 3);
    expect.fail(`${what} ${w}x${h}: pixel (${px % w}, ${Math.floor(px / w)}) differs from the unculled reference`);
  }
  return img;
}

/** Random joint positions: hinges and slides within their range, free bodies moved and turned, balls turned. */
function randomPose(model: SimModel, data: SimData, rng: Rng): void {
  const m = model.raw;
  const jtype = m.jnt_type as Int32Array;
  const adr = m.jnt_qposadr as Int32Array;
  const range = m.jnt_range as Float64Array;
  const limited = m.jnt_limited as Uint8Array;
  const q = data.raw.qpos as Float64Array;
  const quat = (a: number) => {
    const v = [rng.normal(), rng.normal(), rng.normal(), rng.normal()];
    const n = Math.hypot(...v);
    v.forEach((x, k) => (q[a + k] = x / n));
  };
  for (let j = 0; j < m.njnt; j++) {
    const a = adr[j]!;
    if (jtype[j] === 0) {
      for (let k = 0; k < 3; k++) q[a + k]! += rng.uniform(-0.15, 0.15);
      quat(a + 3);
    } else if (jtype[j] === 1) quat(a);
    else q[a] = limited[j] ? rng.uniform(range[2 * j]!, range[2 * j + 1]!) : rng.uniform(-Math.PI, Math.PI);
  }
  data.forward();
}

/** A camera anywhere in a box, turned at random (a random unit quaternion), with a random field of view. */
function randomView(rng: Rng, lo: number[], hi: number[]): CameraView {
  const [w, x, y, z] = ((v) => v.map((c) => c / Math.hypot(...v)))([rng.normal(), rng.normal(), rng.normal(), rng.normal()]) as [number, number, number, number];
  return {
    pos: Float64Array.from(lo, (l, k) => rng.uniform(l, hi[k]!)),
    mat: Float64Array.of(
      1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
      2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
      2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
    ),
    fovy: rng.uniform(30, 110),
  };
}

/** A camera at `pos` looking at `at`, turned about its view axis by `roll` (radians). */
function lookAt(pos: number[], at: number[], roll: number, fovy: number): CameraView {
  const b = pos.map((p, k) => p - at[k]!);
  const bl = Math.hypot(...b);
  const back = b.map((x) => x / bl);
  // any axis not along the view, then x = that x back, y = back x x, both turned by roll
  const ref = Math.abs(back[2]!) < 0.9 ? [0, 0, 1] : [1, 0, 0];
  const cross = (a: number[], c: number[]) => [a[1]! * c[2]! - a[2]! * c[1]!, a[2]! * c[0]! - a[0]! * c[2]!, a[0]! * c[1]! - a[1]! * c[0]!];
  const x0 = cross(ref, back);
  const xl = Math.hypot(...x0);
  const x1 = x0.map((v) => v / xl);
  const y1 = cross(back, x1);
  const [c, s] = [Math.cos(roll), Math.sin(roll)];
  const x = x1.map((v, k) => c * v + s * y1[k]!);
  const y = y1.map((v, k) => c * v - s * x1[k]!);
  return { pos: Float64Array.from(pos), mat: Float64Array.of(x[0]!, y[0]!, back[0]!, x[1]!, y[1]!, back[1]!, x[2]!, y[2]!, back[2]!), fovy };
}

/** The sky's colour: the reference's render of a camera high above the scene looking up, at nothing. */
let sky: number[] | undefined;
function skyColour(model: SimModel, data: SimData): number[] {
  const up: CameraView = { pos: Float64Array.of(0, 0, 50), mat: Float64Array.of(1, 0, 0, 0, -1, 0, 0, 0, -1), fovy: 30 };
  sky ??= [...renderImageReference(model, data, up, 1, 1)];
  return sky;
}

/** Share of pixels that are not the sky's colour. */
function notSky(img: Uint8Array): number {
  let n = 0;
  for (let p = 0; p < img.length; p += 3) if (img[p] !== sky![0] || img[p + 1] !== sky![1] || img[p + 2] !== sky![2]) n++;
  return n / (img.length / 3);
}

describe('renderImage culling matches the unculled reference byte for byte', () => {
  for (const task of TASKS.keys()) {
    it(`${task}: task camera, episodes and random poses, three image sizes`, async () => {
      const env = (await makeEnv({ task })) as MjEnv;
      try {
        const camera = taskCamera(env.taskDef, env.model, undefined);
        const rng = new Rng(7);
        const nu = env.actionSpace.shape[0];
        const drawn: number[] = [];
        for (let seed = 0; seed < 4; seed++) {
          env.reset(seed);
          for (let k = 0; k < 3; k++) {
            for (let s = 0; s < 8; s++) env.step(Float32Array.from({ length: nu }, () => rng.uniform(-1, 1)));
            for (const [w, h] of SIZES) drawn.push(notSky(same(env.model, env.data, camera, w, h, `${task} seed ${seed} step ${8 * (k + 1)}`)));
          }
          randomPose(env.model, env.data, rng);
          for (const [w, h] of SIZES) drawn.push(notSky(same(env.model, env.data, camera, w, h, `${task} seed ${seed} random pose`)));
        }
        // the compared frames show the scene (the floor fills most of a top camera's frame)
        expect(Math.min(...drawn)).toBeGreaterThan(0.5);
      } finally {
        env.dispose();
      }
    });
  }

  it('values written into the model after a render are drawn, and views kept across renders survive the WASM heap growing', async () => {
    const env = (await makeEnv({ task: 'push' })) as MjEnv;
    const extra: SimData[] = [];
    try {
      env.reset(2);
      const before = same(env.model, env.data, 'top', 48, 48, 'push before the edits');
      // the cube (the first box) twice as large and recoloured: the renderer's kept views are live
      const type = env.model.raw.geom_type as Int32Array;
      const cube = type.indexOf(6);
      const size = env.model.raw.geom_size as Float64Array;
      const rgba = env.model.raw.geom_rgba as Float32Array;
      for (let k = 0; k < 3; k++) size[3 * cube + k]! *= 2;
      rgba.set([0.1, 0.9, 0.6], 4 * cube);
      const after = same(env.model, env.data, 'top', 48, 48, 'push with a larger cube');
      expect(Buffer.from(after).equals(Buffer.from(before))).toBe(false);
      // allocate until the heap grows (which empties every view taken before), then render again
      const heap = await heapSize();
      while ((await heapSize()) === heap && extra.length < 5000) extra.push(new SimData(env.model));
      expect(await heapSize()).toBeGreaterThan(heap);
      env.step(new Float32Array(env.actionSpace.shape[0]).fill(0.5));
      same(env.model, env.data, 'top', 48, 48, 'push after the heap grew');
    } finally {
      extra.forEach((d) => d.dispose());
      env.dispose();
    }
  });

  it('custom robot: its own camera and the default view framing it, at random poses', async () => {
    const env = (await makeCustomEnv({ robot: 'tests/fixtures/sim/custom/robot.yaml' })) as MjEnv;
    try {
      env.reset(0);
      const view = defaultView(env.model, env.data);
      const rng = new Rng(3);
      for (let k = 0; k < 6; k++) {
        if (k > 0) randomPose(env.model, env.data, rng);
        for (const [w, h] of SIZES) {
          same(env.model, env.data, 'side', w, h, `custom side pose ${k}`);
          expect(notSky(same(env.model, env.data, view, w, h, `custom default view pose ${k}`))).toBeGreaterThan(0.05);
        }
      }
    } finally {
      env.dispose();
    }
  });

  it('every geom type (mesh included) from cameras inside the scene, geoms behind, beside and across the view', async () => {
    // a tetrahedron off its own centre (MuJoCo recentres it on its centre of mass, not its box), a box, an
    // ellipsoid, a cylinder, a capsule and a sphere on hinges, over a finite plane; one geom hidden by alpha 0
    writeFileSync(
      join(dir, 'shapes.xml'),
      `<mujoco model="shapes">
  <asset><mesh name="tet" vertex="0 0 0  0.12 0 0  0 0.08 0  0 0 0.2"/></asset>
  <worldbody>
    <light pos="0 0 2" dir="0.3 0.2 -1" directional="true"/>
    <geom type="plane" size="0.5 0.5 0.05" rgba="0.5 0.5 0.5 1"/>
    <body pos="0.15 0 0.15"><joint type="hinge" axis="0 1 1"/><geom type="mesh" mesh="tet" rgba="0.9 0.2 0.2 1"/></body>
    <body pos="-0.15 0.1 0.1"><joint type="hinge" axis="1 0 0"/><geom type="box" size="0.06 0.02 0.1" rgba="0.2 0.9 0.2 1"/></body>
    <body pos="0 -0.2 0.12"><joint type="hinge" axis="0 1 0"/><geom type="ellipsoid" size="0.03 0.1 0.05" rgba="0.2 0.2 0.9 1"/></body>
    <body pos="0.2 0.2 0.1"><joint type="hinge" axis="1 1 0"/><geom type="cylinder" size="0.04 0.08" rgba="0.9 0.9 0.2 1"/></body>
    <body pos="-0.2 -0.2 0.15"><joint type="hinge" axis="0 0 1"/><geom type="capsule" fromto="0 0 0 0.2 0.1 0.05" size="0.02" rgba="0.2 0.9 0.9 1"/></body>
    <body pos="0 0.05 0.3"><joint type="slide" axis="0 0 1" range="-0.2 0.1" limited="true"/><geom type="sphere" size="0.05" rgba="0.9 0.2 0.9 1"/></body>
    <geom type="sphere" pos="0 0 0.5" size="0.1" rgba="1 1 1 0"/>
  </worldbody>
</mujoco>`,
    );
    const model = await SimModel.load(join(dir, 'shapes.xml'));
    const data = new SimData(model);
    try {
      expect(model.raw.nmesh).toBe(1);
      const rng = new Rng(11);
      let inside = 0;
      for (let k = 0; k < 60; k++) {
        randomPose(model, data, rng);
        const view = randomView(rng, [-0.35, -0.35, 0.02], [0.35, 0.35, 0.45]);
        // the small sizes, and a large one whose finer pixels land closer to the geoms' edges
        const [w, h] = k % 4 === 3 ? [160, 120] : SIZES[k % 4]!;
        if (notSky(same(model, data, view, w, h, `shapes view ${k}`)) > 0.2) inside++;
      }
      // close-ups: a camera 0.12-0.4 m from a geom, looking at it, so its edges cross many pixels
      const gx = data.raw.geom_xpos as Float64Array;
      const alpha = model.raw.geom_rgba as Float32Array;
      const shown = Array.from({ length: model.raw.ngeom }, (_, g) => g).filter((g) => (model.raw.geom_type as Int32Array)[g] !== 0 && alpha[4 * g + 3]! > 0);
      expect(shown).toHaveLength(6);
      for (let k = 0; k < 30; k++) {
        randomPose(model, data, rng);
        const g = shown[k % shown.length]!;
        const at = [gx[3 * g]!, gx[3 * g + 1]!, gx[3 * g + 2]!];
        const dir = [rng.normal(), rng.normal(), Math.abs(rng.normal())];
        const dist = rng.uniform(0.12, 0.4) / Math.hypot(...dir);
        const view = lookAt(at.map((a, i) => a + dist * dir[i]!), at, rng.uniform(-Math.PI, Math.PI), rng.uniform(30, 90));
        const [w, h] = k % 2 ? [160, 120] : SIZES[(k >> 1) % SIZES.length]!;
        expect(notSky(same(model, data, view, w, h, `shapes close-up ${k} of geom ${g}`))).toBeGreaterThan(0.05);
      }
      // from above, looking down, every geom in the frame
      const top: CameraView = { pos: Float64Array.of(0, 0, 1.2), mat: Float64Array.of(1, 0, 0, 0, 1, 0, 0, 0, 1), fovy: 45 };
      for (const [w, h] of [...SIZES, [160, 120] as [number, number]]) same(model, data, top, w, h, 'shapes top');
      // a sheared, scaled camera matrix (a CameraView need not be a rotation): rays still cast along mat · (u, v, -1)
      // (a camera at (0, -0.6, 0.4) looking at the origin: right (1, 0, 0), up (0, 0.4, 0.6)/|.|, back (0, -0.6, 0.4)/|.|;
      // the right column sheared by 0.3 up, the up column scaled by 0.7)
      const [uy, uz] = [0.4 / Math.hypot(0.4, 0.6), 0.6 / Math.hypot(0.4, 0.6)];
      const skew: CameraView = { pos: Float64Array.of(0, -0.6, 0.4), mat: Float64Array.of(1, 0, 0, 0.3 * uy, 0.7 * uy, -uz, 0.3 * uz, 0.7 * uz, uy), fovy: 60 };
      for (const [w, h] of SIZES) expect(notSky(same(model, data, skew, w, h, 'shapes sheared camera'))).toBeGreaterThan(0.05);
      expect(inside).toBeGreaterThan(10);
    } finally {
      data.dispose();
      model.dispose();
    }
  });
});
