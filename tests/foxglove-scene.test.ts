// The Foxglove endpoint's views of a scene, checked against MuJoCo itself on the reach arm at random joint angles:
// the tf transforms, composed from the world down each body's parents, give MuJoCo's body poses; the ghost's
// primitives sit where MuJoCo puts the geoms (centres and axes, to the float32 precision of body poses), with
// Foxglove's full sizes.
import { describe, expect, it } from 'vitest';
import { MjEnv, makeEnv } from '../sim/index.js';
import { frameNames, ghostGeoms, ghostSceneUpdate, tfTransforms } from '../server/foxglove-scene.js';

type Q = [number, number, number, number]; // w x y z
const mul = (a: Q, b: Q): Q => [
  a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3],
  a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2],
  a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1],
  a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0],
];
const rot = (q: Q, v: number[]) => {
  const r = mul(mul(q, [0, v[0]!, v[1]!, v[2]!]), [q[0], -q[1], -q[2], -q[3]]);
  return [r[1], r[2], r[3]];
};
/** q and -q are the same rotation (poses are float32). */
const sameRotation = (a: Q, b: Q) => Math.abs(Math.abs(a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3]) - 1) < 1e-6;

async function reachAt(seed: number) {
  const env = await makeEnv({ task: 'reach' });
  if (!(env instanceof MjEnv)) throw new Error('reach has a MuJoCo model');
  env.reset(seed);
  const qpos = env.data.raw.qpos as Float64Array;
  qpos[0] = Math.sin(seed) * 3;
  qpos[1] = Math.cos(seed * 1.7) * 2.5;
  env.data.kinematics();
  return env;
}

describe('tf transforms from body poses', () => {
  it('compose back to every body world pose, each in its parent body frame, named as the URDF links', async () => {
    for (const seed of [1, 2, 3]) {
      const env = await reachAt(seed);
      try {
        const scene = env.sceneStatic();
        const poses = Array.from(env.poses());
        const frames = frameNames(scene);
        expect(frames.slice(0, 4)).toEqual(['world', 'base', 'upper', 'fore']);
        const tfs = tfTransforms(scene, frames, poses, { sec: 5, nanosec: 7 });
        expect(tfs).toHaveLength(scene.bodies.length - 1);
        expect(tfs.find((t) => t.child_frame_id === 'fore')?.header).toEqual({ stamp: { sec: 5, nanosec: 7 }, frame_id: 'upper' });
        // World pose of each frame, composed from the transforms alone.
        const world = new Map<string, { p: number[]; q: Q }>([['world', { p: [0, 0, 0], q: [1, 0, 0, 0] }]]);
        for (const t of tfs) {
          const parent = world.get(t.header.frame_id)!; // parents come first in MuJoCo's body order
          const r = t.transform.rotation;
          const off = rot(parent.q, [t.transform.translation.x, t.transform.translation.y, t.transform.translation.z]);
          world.set(t.child_frame_id, { p: parent.p.map((x, k) => x + off[k]!), q: mul(parent.q, [r.w, r.x, r.y, r.z]) });
        }
        scene.bodies.forEach((_, i) => {
          const w = world.get(frames[i]!)!;
          for (let k = 0; k < 3; k++) expect(w.p[k]).toBeCloseTo(poses[7 * i + k]!, 6);
          expect(sameRotation(w.q, poses.slice(7 * i + 3, 7 * i + 7) as Q)).toBe(true);
        });
        // The elbow is 0.2 m along the upper arm, whatever the angles.
        const fore = tfs.find((t) => t.child_frame_id === 'fore')!.transform.translation;
        expect(Math.hypot(fore.x, fore.y, fore.z)).toBeCloseTo(0.2, 6);
      } finally {
        env.dispose();
      }
    }
  });

  it('several robots: frames prefixed with the robot id', async () => {
    const env = await reachAt(4);
    try {
      const frames = frameNames(env.sceneStatic(), 'arm2/');
      expect(tfTransforms(env.sceneStatic(), frames, env.poses(), { sec: 0, nanosec: 0 }).find((t) => t.child_frame_id === 'arm2/upper')?.header.frame_id).toBe('arm2/base');
    } finally {
      env.dispose();
    }
  });
});

describe('imagined rollouts as a foxglove.SceneUpdate ghost', () => {
  it("puts each primitive where MuJoCo puts the geom, with its axis and full size, one entity per member", async () => {
    const a = await reachAt(5);
    const b = await reachAt(6);
    try {
      const scene = a.sceneStatic();
      const geoms = ghostGeoms(scene);
      const update = ghostSceneUpdate(geoms, 'world', [a.poses(), b.poses()], { sec: 3, nanosec: 400 }, { source: 'sim-replay' });
      expect(update.deletions).toEqual([{ timestamp: { sec: 3, nsec: 400 }, type: 1, id: '' }]);
      expect(update.entities.map((e) => [e.id, e.frame_id])).toEqual([['member-0', 'world'], ['member-1', 'world']]);
      expect(update.entities[1]!.metadata).toEqual([{ key: 'source', value: 'sim-replay' }, { key: 'member', value: '1' }]);
      for (const [m, env] of [a, b].entries()) {
        const e = update.entities[m]!;
        const xpos = env.data.raw.geom_xpos as Float64Array;
        const xmat = env.data.raw.geom_xmat as Float64Array;
        const dynamic = new Set(scene.dynamicBodies);
        const drawn = scene.geoms.map((g, i) => ({ g, i })).filter(({ g }) => g.group <= 2 && dynamic.has(g.body));
        // The arm's links (capsules), its tip (a sphere) and the targets (discs: cylinders), in geom order.
        const capsules = drawn.filter(({ g }) => g.type === 'capsule');
        const spheres = drawn.filter(({ g }) => g.type === 'sphere');
        const cylinders = drawn.filter(({ g }) => g.type === 'capsule' || g.type === 'cylinder');
        expect(capsules.length).toBeGreaterThan(0);
        expect(spheres.length).toBeGreaterThan(0);
        expect(e.cylinders).toHaveLength(cylinders.length);
        expect(e.spheres).toHaveLength(spheres.length + 2 * capsules.length);
        cylinders.forEach(({ g, i }, k) => {
          const c = e.cylinders[k]!;
          expect([c.pose.position.x, c.pose.position.y, c.pose.position.z].map((x, j) => x - xpos[3 * i + j]!).every((d) => Math.abs(d) < 1e-5)).toBe(true);
          // The cylinder's z axis is the geom's (the third column of MuJoCo's row-major xmat).
          const o = c.pose.orientation;
          const axis = rot([o.w, o.x, o.y, o.z], [0, 0, 1]);
          for (let j = 0; j < 3; j++) expect(axis[j]).toBeCloseTo(xmat[9 * i + 3 * j + 2]!, 5);
          expect(c.size).toEqual({ x: 2 * g.size[0], y: 2 * g.size[0], z: 2 * g.size[1] });
        });
        // A capsule's caps: spheres of its radius at its ends, along its axis.
        for (const { g, i } of capsules) {
          const end = [0, 1, 2].map((j) => xpos[3 * i + j]! + g.size[1] * xmat[9 * i + 3 * j + 2]!);
          expect(e.spheres.some((s) => Math.hypot(s.pose.position.x - end[0]!, s.pose.position.y - end[1]!, s.pose.position.z - end[2]!) < 1e-5 && s.size.x === 2 * g.size[0])).toBe(true);
        }
        // (The tip sits on the forearm's end cap: matched by centre and size.)
        for (const { g, i } of spheres) {
          const at = (s: (typeof e.spheres)[number]) => Math.hypot(s.pose.position.x - xpos[3 * i]!, s.pose.position.y - xpos[3 * i + 1]!, s.pose.position.z - xpos[3 * i + 2]!) < 1e-5;
          expect(e.spheres.some((s) => at(s) && s.size.x === 2 * g.size[0] && s.size.y === s.size.x && s.size.z === s.size.x), g.name).toBe(true);
        }
        expect(e.spheres.every((s) => s.color.a < 1)).toBe(true);
      }
      // Two members at different angles: different ghosts.
      expect(update.entities[0]!.cylinders[0]!.pose).not.toEqual(update.entities[1]!.cylinders[0]!.pose);
    } finally {
      a.dispose();
      b.dispose();
    }
  });
});
