// What the Foxglove endpoint derives from a robot's scene (sim/scene.ts): its body poses as tf2 transforms, each body
// in its parent body's frame as a URDF's links are, and the imagined rollouts' body poses as a foxglove.SceneUpdate
// of translucent primitives (the viewer's ghost), in Foxglove's JSON encoding.
import type { SceneGeom, SceneStatic } from '../sim/index.js';

/** builtin_interfaces/Time. */
export interface RosTime {
  sec: number;
  nanosec: number;
}

interface Vec3 {
  x: number;
  y: number;
  z: number;
}
interface Quat extends Vec3 {
  w: number;
}

/** geometry_msgs/msg/TransformStamped, as @foxglove/rosmsg2-serialization writes it. */
export interface TransformStamped {
  header: { stamp: RosTime; frame_id: string };
  child_frame_id: string;
  transform: { translation: Vec3; rotation: Quat };
}

type Wxyz = [number, number, number, number];
type Xyz = [number, number, number];

const mul = (a: Wxyz, b: Wxyz): Wxyz => [
  a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3],
  a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2],
  a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1],
  a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0],
];
const conj = (q: Wxyz): Wxyz => [q[0], -q[1], -q[2], -q[3]];
function rotate(q: Wxyz, v: Xyz): Xyz {
  const r = mul(mul(q, [0, v[0], v[1], v[2]]), conj(q));
  return [r[1], r[2], r[3]];
}

/** Body `b`'s world pose from a poses array (nbody x 7: x y z qw qx qy qz); identity past its end. */
function bodyPose(poses: ArrayLike<number>, b: number): { p: Xyz; q: Wxyz } {
  const o = 7 * b;
  if (o + 6 >= poses.length) return { p: [0, 0, 0], q: [1, 0, 0, 0] };
  return { p: [poses[o]!, poses[o + 1]!, poses[o + 2]!], q: [poses[o + 3]!, poses[o + 4]!, poses[o + 5]!, poses[o + 6]!] };
}

/**
 * The tf frame of each body: its MuJoCo name (a URDF the robot declares names its links the same), `body_<i>` for an
 * unnamed one; `prefix` (`<robot id>/` when the service hosts several robots) keeps robots' trees apart.
 */
export function frameNames(scene: SceneStatic, prefix = ''): string[] {
  return scene.bodies.map((b, i) => prefix + (b.name || (i === 0 ? 'world' : `body_${i}`)));
}

/** Every body but the world as a transform from its parent body's frame, at `stamp`. */
export function tfTransforms(scene: SceneStatic, frames: string[], poses: ArrayLike<number>, stamp: RosTime): TransformStamped[] {
  const out: TransformStamped[] = [];
  for (let i = 1; i < scene.bodies.length; i++) {
    const parent = scene.bodies[i]!.parent;
    const c = bodyPose(poses, i);
    const p = bodyPose(poses, parent);
    const inv = conj(p.q);
    const t = rotate(inv, [c.p[0] - p.p[0], c.p[1] - p.p[1], c.p[2] - p.p[2]]);
    const q = mul(inv, c.q);
    out.push({
      header: { stamp, frame_id: frames[parent]! },
      child_frame_id: frames[i]!,
      transform: { translation: { x: t[0], y: t[1], z: t[2] }, rotation: { x: q[1], y: q[2], z: q[3], w: q[0] } },
    });
  }
  return out;
}

// ── foxglove.SceneUpdate (JSON encoding) ────────────────────────────────────────────────────────────────────────

/** Foxglove's JSON time and duration. */
interface FoxTime {
  sec: number;
  nsec: number;
}
interface Pose {
  position: Vec3;
  orientation: Quat;
}
interface Color {
  r: number;
  g: number;
  b: number;
  a: number;
}
interface Primitive {
  pose: Pose;
  size: Vec3;
  color: Color;
}
interface CylinderPrimitive extends Primitive {
  bottom_scale: number;
  top_scale: number;
}
export interface SceneEntity {
  timestamp: FoxTime;
  frame_id: string;
  id: string;
  lifetime: FoxTime;
  frame_locked: boolean;
  metadata: Array<{ key: string; value: string }>;
  arrows: never[];
  cubes: Primitive[];
  spheres: Primitive[];
  cylinders: CylinderPrimitive[];
  lines: never[];
  triangles: never[];
  texts: never[];
  models: never[];
}
export interface SceneUpdate {
  deletions: Array<{ timestamp: FoxTime; type: number; id: string }>;
  entities: SceneEntity[];
}

/** SceneEntityDeletionType.ALL: every entity of the topic older than the deletion's timestamp. */
const DELETE_ALL = 1;
/** The viewer's ghost colour. */
const GHOST: Color = { r: 0.3, g: 0.79, b: 0.94, a: 0.45 };

/** A geom the ghost draws: a dynamic body's visible sphere, ellipsoid, box, cylinder or capsule (meshes and planes are not drawn). */
interface GhostGeom {
  body: number;
  kind: 'sphere' | 'cube' | 'cylinder';
  pos: Xyz;
  quat: Wxyz;
  size: Xyz;
}

/** The primitives of the ghost, from the scene's geoms: MuJoCo's half-sizes become Foxglove's full sizes. */
export function ghostGeoms(scene: SceneStatic): GhostGeom[] {
  const dynamic = new Set(scene.dynamicBodies);
  const out: GhostGeom[] = [];
  const add = (g: SceneGeom, kind: GhostGeom['kind'], size: Xyz, pos: Xyz = g.pos) => out.push({ body: g.body, kind, pos, quat: g.quat, size });
  for (const g of scene.geoms) {
    if (g.group > 2 || !dynamic.has(g.body)) continue;
    const [a, b, c] = g.size;
    if (g.type === 'sphere') add(g, 'sphere', [2 * a, 2 * a, 2 * a]);
    else if (g.type === 'ellipsoid') add(g, 'sphere', [2 * a, 2 * b, 2 * c]);
    else if (g.type === 'box') add(g, 'cube', [2 * a, 2 * b, 2 * c]);
    else if (g.type === 'cylinder') add(g, 'cylinder', [2 * a, 2 * a, 2 * b]);
    else if (g.type === 'capsule') {
      // A capsule is a cylinder along its z axis capped by two spheres.
      add(g, 'cylinder', [2 * a, 2 * a, 2 * b]);
      for (const s of [-1, 1]) {
        const end = rotate(g.quat, [0, 0, s * b]);
        add(g, 'sphere', [2 * a, 2 * a, 2 * a], [g.pos[0] + end[0], g.pos[1] + end[1], g.pos[2] + end[2]]);
      }
    }
  }
  return out;
}

const foxTime = (t: RosTime): FoxTime => ({ sec: t.sec, nsec: t.nanosec });

/**
 * One imagined step as a SceneUpdate: the previous ghosts deleted, then one entity per ensemble member (`member-<m>`)
 * whose primitives sit at that member's body poses, in the world frame.
 */
export function ghostSceneUpdate(geoms: GhostGeom[], worldFrame: string, members: ReadonlyArray<ArrayLike<number>>, stamp: RosTime, metadata: Record<string, string>): SceneUpdate {
  const ts = foxTime(stamp);
  const entities = members.map((poses, m): SceneEntity => {
    const e: SceneEntity = {
      timestamp: ts,
      frame_id: worldFrame,
      id: `member-${m}`,
      lifetime: { sec: 0, nsec: 0 },
      frame_locked: false,
      metadata: Object.entries({ ...metadata, member: String(m) }).map(([key, value]) => ({ key, value })),
      arrows: [],
      cubes: [],
      spheres: [],
      cylinders: [],
      lines: [],
      triangles: [],
      texts: [],
      models: [],
    };
    for (const g of geoms) {
      const b = bodyPose(poses, g.body);
      const off = rotate(b.q, g.pos);
      const q = mul(b.q, g.quat);
      const prim: Primitive = {
        pose: { position: { x: b.p[0] + off[0], y: b.p[1] + off[1], z: b.p[2] + off[2] }, orientation: { x: q[1], y: q[2], z: q[3], w: q[0] } },
        size: { x: g.size[0], y: g.size[1], z: g.size[2] },
        color: GHOST,
      };
      if (g.kind === 'sphere') e.spheres.push(prim);
      else if (g.kind === 'cube') e.cubes.push(prim);
      else e.cylinders.push({ ...prim, bottom_scale: 1, top_scale: 1 });
    }
    return e;
  });
  return { deletions: [{ timestamp: ts, type: DELETE_ALL, id: '' }], entities };
}

// The JSON Schema of the fields sent (Foxglove picks its SceneUpdate reader by the schema name).
const num = { type: 'number' };
const obj = (properties: Record<string, unknown>) => ({ type: 'object', properties, required: Object.keys(properties) });
const vec3 = obj({ x: num, y: num, z: num });
const time = obj({ sec: { type: 'integer', minimum: 0 }, nsec: { type: 'integer', minimum: 0, maximum: 999_999_999 } });
const pose = obj({ position: vec3, orientation: obj({ x: num, y: num, z: num, w: num }) });
const color = obj({ r: num, g: num, b: num, a: num });
const primitive = obj({ pose, size: vec3, color });
const cylinder = obj({ pose, size: vec3, bottom_scale: num, top_scale: num, color });
const anyList = { type: 'array', items: { type: 'object' } };

export const SCENE_UPDATE_SCHEMA = JSON.stringify({
  title: 'foxglove.SceneUpdate',
  ...obj({
    deletions: { type: 'array', items: obj({ timestamp: time, type: { type: 'integer', enum: [0, 1] }, id: { type: 'string' } }) },
    entities: {
      type: 'array',
      items: obj({
        timestamp: time,
        frame_id: { type: 'string' },
        id: { type: 'string' },
        lifetime: time,
        frame_locked: { type: 'boolean' },
        metadata: { type: 'array', items: obj({ key: { type: 'string' }, value: { type: 'string' } }) },
        arrows: anyList,
        cubes: { type: 'array', items: primitive },
        spheres: { type: 'array', items: primitive },
        cylinders: { type: 'array', items: cylinder },
        lines: anyList,
        triangles: anyList,
        texts: anyList,
        models: anyList,
      }),
    },
  }),
});
