// Scene export for the Three.js viewer: static geometry once, then compact per-step frames of body poses.
import type { SimData, SimModel } from './mujoco.js';

export const GEOM_TYPES = ['plane', 'hfield', 'sphere', 'capsule', 'ellipsoid', 'cylinder', 'box', 'mesh', 'sdf'] as const;
export type GeomType = (typeof GEOM_TYPES)[number];

export interface SceneGeom {
  name: string;
  type: GeomType;
  /** MuJoCo size triple (radius / half-lengths; see MJCF docs per type). */
  size: [number, number, number];
  rgba: [number, number, number, number];
  /** Body the geom is fixed to; its pose comes from the frames. */
  body: number;
  /** Pose in the body frame: x y z, qw qx qy qz. */
  pos: [number, number, number];
  quat: [number, number, number, number];
  /** Index into `meshes` for mesh geoms, else -1. */
  mesh: number;
  /** MuJoCo visibility group (0-2 shown by default). */
  group: number;
}

export interface SceneStatic {
  format: 'wmrl-scene/1';
  bodies: Array<{ name: string; parent: number }>;
  geoms: SceneGeom[];
  meshes: Array<{ vertices: number[]; faces: number[] }>;
  /** Bodies whose poses appear in each frame, in this order (bodies welded to the world never move). */
  dynamicBodies: number[];
  /** Pose of every body at export time (nbody x 7), so static bodies need no frames. */
  initialPoses: number[];
  timestep: number;
}

const round = (x: number) => Math.round(x * 1e6) / 1e6;

export function sceneStatic(model: SimModel, data?: SimData): SceneStatic {
  const m = model.raw;
  const parent = m.body_parentid as Int32Array;
  const weld = m.body_weldid as Int32Array;
  const mocap = m.body_mocapid as Int32Array;
  const bodies = Array.from({ length: m.nbody }, (_, i) => ({ name: model.name('mjOBJ_BODY', i), parent: parent[i]! }));
  const type = m.geom_type as Int32Array;
  const size = m.geom_size as Float64Array;
  const rgba = m.geom_rgba as Float32Array;
  const gbody = m.geom_bodyid as Int32Array;
  const gpos = m.geom_pos as Float64Array;
  const gquat = m.geom_quat as Float64Array;
  const gdata = m.geom_dataid as Int32Array;
  const group = m.geom_group as Int32Array;
  const geoms: SceneGeom[] = [];
  for (let g = 0; g < m.ngeom; g++) {
    geoms.push({
      name: model.name('mjOBJ_GEOM', g),
      type: GEOM_TYPES[type[g]!] ?? 'sdf',
      size: [round(size[3 * g]!), round(size[3 * g + 1]!), round(size[3 * g + 2]!)],
      rgba: [round(rgba[4 * g]!), round(rgba[4 * g + 1]!), round(rgba[4 * g + 2]!), round(rgba[4 * g + 3]!)],
      body: gbody[g]!,
      pos: [round(gpos[3 * g]!), round(gpos[3 * g + 1]!), round(gpos[3 * g + 2]!)],
      quat: [round(gquat[4 * g]!), round(gquat[4 * g + 1]!), round(gquat[4 * g + 2]!), round(gquat[4 * g + 3]!)],
      mesh: type[g] === 7 ? gdata[g]! : -1,
      group: group[g]!,
    });
  }
  const meshes: SceneStatic['meshes'] = [];
  const vadr = m.mesh_vertadr as Int32Array;
  const vnum = m.mesh_vertnum as Int32Array;
  const fadr = m.mesh_faceadr as Int32Array;
  const fnum = m.mesh_facenum as Int32Array;
  const vert = m.mesh_vert as Float32Array;
  const face = m.mesh_face as Int32Array;
  for (let k = 0; k < m.nmesh; k++) {
    meshes.push({
      vertices: Array.from(vert.subarray(3 * vadr[k]!, 3 * (vadr[k]! + vnum[k]!)), round),
      faces: Array.from(face.subarray(3 * fadr[k]!, 3 * (fadr[k]! + fnum[k]!))),
    });
  }
  const dynamicBodies = bodies.map((_, i) => i).filter((i) => i > 0 && (weld[i] !== 0 || mocap[i]! >= 0));
  return {
    format: 'wmrl-scene/1',
    bodies,
    geoms,
    meshes,
    dynamicBodies,
    initialPoses: data ? Array.from(bodyPoses(data), round) : [],
    timestep: model.timestep,
  };
}

/** Every body's world pose, nbody x 7 (x y z qw qx qy qz); a copy. Needs kinematics (mj_forward) current. */
export function bodyPoses(data: SimData): Float32Array {
  const xpos = data.raw.xpos as Float64Array;
  const xquat = data.raw.xquat as Float64Array;
  const n = xpos.length / 3;
  const out = new Float32Array(7 * n);
  for (let b = 0; b < n; b++) {
    out[7 * b] = xpos[3 * b]!;
    out[7 * b + 1] = xpos[3 * b + 1]!;
    out[7 * b + 2] = xpos[3 * b + 2]!;
    for (let k = 0; k < 4; k++) out[7 * b + 3 + k] = xquat[4 * b + k]!;
  }
  return out;
}

/**
 * One frame of the stream: Float32Array [step, time, then x y z qw qx qy qz per dynamic body].
 * 7 floats per moving body (a 2-link arm with 3 targets: 2 + 5*7 floats = 148 bytes a frame).
 */
export function encodeFrame(st: SceneStatic, data: SimData, step: number): Float32Array {
  const xpos = data.raw.xpos as Float64Array;
  const xquat = data.raw.xquat as Float64Array;
  const out = new Float32Array(2 + 7 * st.dynamicBodies.length);
  out[0] = step;
  out[1] = data.raw.time;
  st.dynamicBodies.forEach((b, i) => {
    const o = 2 + 7 * i;
    out[o] = xpos[3 * b]!;
    out[o + 1] = xpos[3 * b + 1]!;
    out[o + 2] = xpos[3 * b + 2]!;
    for (let k = 0; k < 4; k++) out[o + 3 + k] = xquat[4 * b + k]!;
  });
  return out;
}

/** Inverse of encodeFrame: full nbody x 7 poses, static bodies from `initialPoses`. */
export function decodeFrame(st: SceneStatic, frame: Float32Array): { step: number; time: number; poses: Float32Array } {
  const poses = Float32Array.from(st.initialPoses);
  st.dynamicBodies.forEach((b, i) => poses.set(frame.subarray(2 + 7 * i, 9 + 7 * i), 7 * b));
  return { step: frame[0]!, time: frame[1]!, poses };
}
