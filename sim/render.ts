// A deterministic CPU ray caster over MuJoCo's primitive geoms (and meshes, by brute force), Lambert-shaded.
// No GPU, no randomness, only + - * / and sqrt per pixel, so the same state gives the same bytes.
// Culled conservatively: each geom is tested only at the pixels of its screen rectangle (its box projected,
// widened by a pixel), in the same order as without culling, so the bytes equal the unculled reference's
// (render-reference.ts; tests/sim-render-cull.test.ts checks it, bench/sim.ts measures the speedup).
import type { SimData, SimModel } from './mujoco.js';

const SKY = [0.82, 0.86, 0.9];
const AMBIENT = 0.3;
const DIFFUSE = 0.5;
const HEADLIGHT = 0.2;
const EPS = 1e-9;

/** Scratch for one hit, reused across pixels. */
interface Hit {
  t: number;
  nx: number;
  ny: number;
  nz: number;
}

function hitPlane(ox: number, oy: number, oz: number, dx: number, dy: number, dz: number, sx: number, sy: number, h: Hit): boolean {
  if (Math.abs(dz) < EPS) return false;
  const t = -oz / dz;
  if (t <= 0 || t >= h.t) return false;
  const x = ox + t * dx;
  const y = oy + t * dy;
  if (sx > 0 && (Math.abs(x) > sx || Math.abs(y) > sy)) return false;
  h.t = t;
  h.nx = 0;
  h.ny = 0;
  h.nz = oz >= 0 ? 1 : -1;
  return true;
}

function hitSphere(ox: number, oy: number, oz: number, dx: number, dy: number, dz: number, r: number, cz: number, h: Hit): boolean {
  const pz = oz - cz;
  const b = ox * dx + oy * dy + pz * dz;
  const c = ox * ox + oy * oy + pz * pz - r * r;
  const disc = b * b - c;
  if (disc < 0) return false;
  const t = -b - Math.sqrt(disc);
  if (t <= 0 || t >= h.t) return false;
  h.t = t;
  h.nx = (ox + t * dx) / r;
  h.ny = (oy + t * dy) / r;
  h.nz = (pz + t * dz) / r;
  return true;
}

/** Open cylinder side along z, |z| <= hl; returns the hit z through h (caller checks caps). */
function hitCylSide(ox: number, oy: number, oz: number, dx: number, dy: number, dz: number, r: number, hl: number, h: Hit): boolean {
  const a = dx * dx + dy * dy;
  if (a < EPS) return false;
  const b = ox * dx + oy * dy;
  const c = ox * ox + oy * oy - r * r;
  const disc = b * b - a * c;
  if (disc < 0) return false;
  const t = (-b - Math.sqrt(disc)) / a;
  if (t <= 0 || t >= h.t) return false;
  const z = oz + t * dz;
  if (Math.abs(z) > hl) return false;
  h.t = t;
  h.nx = (ox + t * dx) / r;
  h.ny = (oy + t * dy) / r;
  h.nz = 0;
  return true;
}

/** One cap of a cylinder (the disc |(x, y)| <= r at z = s). */
function hitCap(ox: number, oy: number, oz: number, dx: number, dy: number, dz: number, r: number, s: number, h: Hit): boolean {
  const t = (s - oz) / dz;
  if (t <= 0 || t >= h.t) return false;
  const x = ox + t * dx;
  const y = oy + t * dy;
  if (x * x + y * y > r * r) return false;
  h.t = t;
  h.nx = 0;
  h.ny = 0;
  h.nz = s > 0 ? 1 : -1;
  return true;
}

function hitCylinder(ox: number, oy: number, oz: number, dx: number, dy: number, dz: number, r: number, hl: number, h: Hit): boolean {
  let hit = hitCylSide(ox, oy, oz, dx, dy, dz, r, hl, h);
  if (Math.abs(dz) > EPS) {
    hit = hitCap(ox, oy, oz, dx, dy, dz, r, hl, h) || hit;
    hit = hitCap(ox, oy, oz, dx, dy, dz, r, -hl, h) || hit;
  }
  return hit;
}

/** The slab test's running state (no allocation per ray). */
const slab = { tmin: 0, tmax: 0, axis: -1, sign: 1 };

/** Clips the ray to the slab |o + t d| <= s along axis k; false when the ray misses it. */
function clipSlab(o: number, d: number, s: number, k: number): boolean {
  if (Math.abs(d) < EPS) return !(Math.abs(o) > s);
  let t1 = (-s - o) / d;
  let t2 = (s - o) / d;
  let sg = -1;
  if (t1 > t2) {
    const tmp = t1;
    t1 = t2;
    t2 = tmp;
    sg = 1;
  }
  if (t1 > slab.tmin) {
    slab.tmin = t1;
    slab.axis = k;
    slab.sign = sg;
  }
  if (t2 < slab.tmax) slab.tmax = t2;
  return !(slab.tmin > slab.tmax);
}

function hitBox(ox: number, oy: number, oz: number, dx: number, dy: number, dz: number, sx: number, sy: number, sz: number, h: Hit): boolean {
  slab.tmin = -Infinity;
  slab.tmax = Infinity;
  slab.axis = -1;
  slab.sign = 1;
  if (!clipSlab(ox, dx, sx, 0) || !clipSlab(oy, dy, sy, 1) || !clipSlab(oz, dz, sz, 2)) return false;
  const { tmin, axis, sign } = slab;
  if (axis < 0 || tmin <= 0 || tmin >= h.t) return false;
  h.t = tmin;
  h.nx = axis === 0 ? sign : 0;
  h.ny = axis === 1 ? sign : 0;
  h.nz = axis === 2 ? sign : 0;
  return true;
}

function hitMesh(ox: number, oy: number, oz: number, dx: number, dy: number, dz: number, vert: Float32Array, face: Int32Array, vadr: number, fadr: number, fnum: number, h: Hit): boolean {
  let hit = false;
  for (let f = fadr; f < fadr + fnum; f++) {
    const a = 3 * (vadr + face[3 * f]!);
    const b = 3 * (vadr + face[3 * f + 1]!);
    const c = 3 * (vadr + face[3 * f + 2]!);
    const e1x = vert[b]! - vert[a]!, e1y = vert[b + 1]! - vert[a + 1]!, e1z = vert[b + 2]! - vert[a + 2]!;
    const e2x = vert[c]! - vert[a]!, e2y = vert[c + 1]! - vert[a + 1]!, e2z = vert[c + 2]! - vert[a + 2]!;
    const px = dy * e2z - dz * e2y, py = dz * e2x - dx * e2z, pz = dx * e2y - dy * e2x;
    const det = e1x * px + e1y * py + e1z * pz;
    if (Math.abs(det) < 1e-12) continue;
    const inv = 1 / det;
    const tx = ox - vert[a]!, ty = oy - vert[a + 1]!, tz = oz - vert[a + 2]!;
    const u = (tx * px + ty * py + tz * pz) * inv;
    if (u < 0 || u > 1) continue;
    const qx = ty * e1z - tz * e1y, qy = tz * e1x - tx * e1z, qz = tx * e1y - ty * e1x;
    const v = (dx * qx + dy * qy + dz * qz) * inv;
    if (v < 0 || u + v > 1) continue;
    const t = (e2x * qx + e2y * qy + e2z * qz) * inv;
    if (t <= 0 || t >= h.t) continue;
    let nx = e1y * e2z - e1z * e2y, ny = e1z * e2x - e1x * e2z, nz = e1x * e2y - e1y * e2x;
    const nl = Math.sqrt(nx * nx + ny * ny + nz * nz) || 1;
    nx /= nl;
    ny /= nl;
    nz /= nl;
    h.t = t;
    h.nx = nx;
    h.ny = ny;
    h.nz = nz;
    hit = true;
  }
  return hit;
}

/** A camera pose not in the model: position, orientation (row-major 3x3, columns x right, y up, z back), vertical fov in degrees. */
export interface CameraView {
  pos: Float64Array;
  mat: Float64Array;
  fovy: number;
}

/**
 * A view that frames the robot, for a scene without a camera: a sphere around the robot's base (the bodies
 * attached to the world) holding every geom of the moving bodies (all non-plane geoms when none move), so the
 * arm stays in view wherever it reaches; seen from the side and above (azimuth 90°, elevation -30°, MuJoCo's
 * free-camera convention), far enough that the sphere fits the field of view. Kinematics must be current.
 */
export function defaultView(model: SimModel, data: SimData, fovy = 45): CameraView {
  const m = model.raw;
  const type = m.geom_type as Int32Array;
  const body = m.geom_bodyid as Int32Array;
  const rb = m.geom_rbound as Float64Array;
  const gx = data.raw.geom_xpos as Float64Array;
  const pick = (moving: boolean) => Array.from({ length: m.ngeom }, (_, g) => g).filter((g) => type[g] !== 0 && (!moving || body[g]! > 0));
  let geoms = pick(true);
  if (geoms.length === 0) geoms = pick(false);
  if (geoms.length === 0) throw new Error(`${model.file}: nothing to frame (no geoms besides planes) and no camera in the MJCF`);
  // the base: centre of the bodies hanging from the world that carry these geoms (or of the geoms themselves)
  const parent = m.body_parentid as Int32Array;
  const bx = data.raw.xpos as Float64Array;
  const roots = new Set(geoms.map((g) => body[g]!).filter((b) => b > 0).map((b) => {
    while (parent[b]! > 0) b = parent[b]!;
    return b;
  }));
  const pts = roots.size ? [...roots].map((b) => [bx[3 * b]!, bx[3 * b + 1]!, bx[3 * b + 2]!]) : geoms.map((g) => [gx[3 * g]!, gx[3 * g + 1]!, gx[3 * g + 2]!]);
  const c = [0, 1, 2].map((k) => pts.reduce((s, p) => s + p[k]!, 0) / pts.length);
  const r = Math.max(0.05, ...geoms.map((g) => Math.hypot(gx[3 * g]! - c[0]!, gx[3 * g + 1]! - c[1]!, gx[3 * g + 2]! - c[2]!) + rb[g]!));
  const dist = (1.05 * r) / Math.sin((fovy * Math.PI) / 360);
  const az = Math.PI / 2, el = -Math.PI / 6;
  const f = [Math.cos(el) * Math.cos(az), Math.cos(el) * Math.sin(az), Math.sin(el)];
  const right = [f[1]!, -f[0]!, 0]; // f x (0, 0, 1)
  const rl = Math.hypot(right[0]!, right[1]!);
  right[0]! /= rl;
  right[1]! /= rl;
  const up = [right[1]! * f[2]! - right[2]! * f[1]!, right[2]! * f[0]! - right[0]! * f[2]!, right[0]! * f[1]! - right[1]! * f[0]!];
  return {
    pos: Float64Array.from(c, (v, k) => v - dist * f[k]!),
    mat: Float64Array.of(right[0]!, up[0]!, -f[0]!, right[1]!, up[1]!, -f[1]!, right[2]!, up[2]!, -f[2]!),
    fovy,
  };
}

/** The model arrays the renderer reads (live views into the WASM heap) and its camera ids by name. */
interface ModelViews {
  type: Int32Array;
  size: Float64Array;
  rgba: Float32Array;
  group: Int32Array;
  dataid: Int32Array;
  fovy: Float64Array;
  vert: Float32Array;
  face: Int32Array;
  vadr: Int32Array;
  fadr: Int32Array;
  fnum: Int32Array;
  cameras: Map<string, number>;
}

/** The data arrays the renderer reads (live views). */
interface DataViews {
  xpos: Float64Array;
  xmat: Float64Array;
  camPos: Float64Array;
  camMat: Float64Array;
  lightDir: Float64Array;
}

// mujoco-js builds a new view on every property read (about a microsecond each; a camera's name lookup about ten),
// a fixed cost on every image. The views of each model and data are kept, and taken again once the WASM heap has
// grown (growth empties every view taken before: length 0). Live views: values written into them are seen.
const modelCache = new WeakMap<SimModel, ModelViews>();
const dataCache = new WeakMap<SimData, DataViews>();

function modelViews(model: SimModel): ModelViews {
  const m = model.raw;
  const cached = modelCache.get(model);
  if (cached && cached.type.length === m.ngeom && m.ngeom > 0) return cached;
  const mesh = m.nmesh > 0;
  const views: ModelViews = {
    type: m.geom_type as Int32Array,
    size: m.geom_size as Float64Array,
    rgba: m.geom_rgba as Float32Array,
    group: m.geom_group as Int32Array,
    dataid: m.geom_dataid as Int32Array,
    fovy: m.cam_fovy as Float64Array,
    vert: mesh ? (m.mesh_vert as Float32Array) : new Float32Array(0),
    face: mesh ? (m.mesh_face as Int32Array) : new Int32Array(0),
    vadr: m.mesh_vertadr as Int32Array,
    fadr: m.mesh_faceadr as Int32Array,
    fnum: m.mesh_facenum as Int32Array,
    cameras: cached?.cameras ?? new Map(),
  };
  modelCache.set(model, views);
  return views;
}

function dataViews(model: SimModel, data: SimData): DataViews {
  const d = data.raw;
  const cached = dataCache.get(data);
  if (cached && cached.xpos.length === 3 * model.raw.ngeom && model.raw.ngeom > 0) return cached;
  const views: DataViews = {
    xpos: d.geom_xpos as Float64Array,
    xmat: d.geom_xmat as Float64Array,
    camPos: d.cam_xpos as Float64Array,
    camMat: d.cam_xmat as Float64Array,
    lightDir: d.light_xdir as Float64Array,
  };
  dataCache.set(data, views);
  return views;
}

/** Per model: each mesh's vertex box in its geom frame (centre xyz, half extents xyz), computed once. */
const meshBoxes = new WeakMap<SimModel, Float64Array>();

function meshBoxesOf(model: SimModel): Float64Array {
  let boxes = meshBoxes.get(model);
  if (boxes) return boxes;
  const m = model.raw;
  boxes = new Float64Array(6 * m.nmesh);
  if (m.nmesh > 0) {
    const vert = m.mesh_vert as Float32Array;
    const vadr = m.mesh_vertadr as Int32Array;
    const vnum = m.mesh_vertnum as Int32Array;
    for (let k = 0; k < m.nmesh; k++) {
      for (let c = 0; c < 3; c++) {
        let lo = Infinity, hi = -Infinity;
        for (let v = vadr[k]!; v < vadr[k]! + vnum[k]!; v++) {
          lo = Math.min(lo, vert[3 * v + c]!);
          hi = Math.max(hi, vert[3 * v + c]!);
        }
        boxes[6 * k + c] = (lo + hi) / 2;
        boxes[6 * k + 3 + c] = (hi - lo) / 2;
      }
    }
  }
  meshBoxes.set(model, boxes);
  return boxes;
}

/**
 * The box, in its own frame, holding everything geom g's hit test can reach (centre xyz, half extents xyz, into
 * `box`): false when there is none to cull by (a plane, an unknown type) and the geom is tested everywhere.
 * A mesh geom without mesh data draws nothing: its box is empty (negative extents).
 */
function geomBox(type: number, s0: number, s1: number, s2: number, mesh: number, meshes: Float64Array, box: Float64Array): boolean {
  box.fill(0);
  switch (type) {
    case 2: box[3] = box[4] = box[5] = s0; return true; // sphere
    case 3: box[3] = box[4] = s0; box[5] = s1 + s0; return true; // capsule
    case 4: case 6: box[3] = s0; box[4] = s1; box[5] = s2; return true; // ellipsoid, box
    case 5: box[3] = box[4] = s0; box[5] = s1; return true; // cylinder
    case 7:
      if (mesh < 0) box[3] = -1;
      else box.set(meshes.subarray(6 * mesh, 6 * mesh + 6));
      return true;
    default: return false;
  }
}

/**
 * Screen rectangles: for each geom the pixels [i0, i1] x [j0, j1] (rect[4g..4g+3]) whose rays may hit it, the
 * rest provably miss. Pixel (i, j)'s ray runs along cmat · (u_i, v_j, -1); a point q lies on it where
 * a = cmat⁻¹ (q - cpos) is a positive multiple of (u, v, -1). The geom lies inside its box (geomBox), a convex
 * hull of 8 corners, so where every corner is in front (a_z < 0) the rays that reach it have (u, v) inside the
 * corners' projected rectangle; widened by one pixel each way (a margin far above rounding in the hit tests).
 * A geom whose box reaches the camera's plane, a projection that is not finite, or a camera matrix that is not
 * invertible leaves the whole image to test.
 */
function screenRects(model: SimModel, mv: ModelViews, visible: number[], gxpos: Float64Array, gxmat: Float64Array, cpos: Float64Array, cmat: Float64Array, tanX: number, tanY: number, width: number, height: number): Int32Array {
  const m = model.raw;
  const { type, size, dataid } = mv;
  const rect = new Int32Array(4 * m.ngeom);
  // inverse of the camera matrix (adjugate / determinant)
  const c = cmat;
  const a0 = c[4]! * c[8]! - c[5]! * c[7]!, a1 = c[2]! * c[7]! - c[1]! * c[8]!, a2 = c[1]! * c[5]! - c[2]! * c[4]!;
  const a3 = c[5]! * c[6]! - c[3]! * c[8]!, a4 = c[0]! * c[8]! - c[2]! * c[6]!, a5 = c[2]! * c[3]! - c[0]! * c[5]!;
  const a6 = c[3]! * c[7]! - c[4]! * c[6]!, a7 = c[1]! * c[6]! - c[0]! * c[7]!, a8 = c[0]! * c[4]! - c[1]! * c[3]!;
  const det = c[0]! * a0 + c[1]! * a3 + c[2]! * a6;
  const cullable = Number.isFinite(det) && Math.abs(det) > 1e-12 && tanX > 0 && tanY > 0 && Number.isFinite(tanX) && Number.isFinite(tanY);
  const inv = [a0 / det, a1 / det, a2 / det, a3 / det, a4 / det, a5 / det, a6 / det, a7 / det, a8 / det];
  const meshes = m.nmesh > 0 ? meshBoxesOf(model) : new Float64Array(0);
  const box = new Float64Array(6);
  const corner = new Float64Array(3);
  for (const g of visible) {
    rect.set([0, width - 1, 0, height - 1], 4 * g);
    if (!cullable || !geomBox(type[g]!, size[3 * g]!, size[3 * g + 1]!, size[3 * g + 2]!, dataid[g]!, meshes, box)) continue;
    if (box[3]! < 0) {
      rect.set([1, 0, 1, 0], 4 * g); // nothing to draw: empty
      continue;
    }
    let umin = Infinity, umax = -Infinity, vmin = Infinity, vmax = -Infinity;
    let front = true;
    for (let k = 0; k < 8 && front; k++) {
      const lx = box[0]! + (k & 1 ? box[3]! : -box[3]!);
      const ly = box[1]! + (k & 2 ? box[4]! : -box[4]!);
      const lz = box[2]! + (k & 4 ? box[5]! : -box[5]!);
      const R = 9 * g;
      // corner in the world, relative to the camera, then in camera coordinates
      for (let r = 0; r < 3; r++) corner[r] = gxpos[3 * g + r]! + gxmat[R + 3 * r]! * lx + gxmat[R + 3 * r + 1]! * ly + gxmat[R + 3 * r + 2]! * lz - cpos[r]!;
      const ax = inv[0]! * corner[0]! + inv[1]! * corner[1]! + inv[2]! * corner[2]!;
      const ay = inv[3]! * corner[0]! + inv[4]! * corner[1]! + inv[5]! * corner[2]!;
      const depth = -(inv[6]! * corner[0]! + inv[7]! * corner[1]! + inv[8]! * corner[2]!);
      if (!(depth > 0)) front = false;
      const u = ax / depth, v = ay / depth;
      umin = Math.min(umin, u);
      umax = Math.max(umax, u);
      vmin = Math.min(vmin, v);
      vmax = Math.max(vmax, v);
    }
    if (!front) continue;
    // pixel centres: u_i = ((2 (i + 0.5)) / width - 1) tanX, v_j = (1 - (2 (j + 0.5)) / height) tanY
    const i0 = Math.floor(((umin / tanX + 1) * width) / 2 - 0.5) - 1;
    const i1 = Math.ceil(((umax / tanX + 1) * width) / 2 - 0.5) + 1;
    const j0 = Math.floor(((1 - vmax / tanY) * height) / 2 - 0.5) - 1;
    const j1 = Math.ceil(((1 - vmin / tanY) * height) / 2 - 0.5) + 1;
    if (![i0, i1, j0, j1].every(Number.isFinite)) continue;
    rect.set([Math.max(0, i0), Math.min(width - 1, i1), Math.max(0, j0), Math.min(height - 1, j1)], 4 * g);
  }
  return rect;
}

/**
 * Renders `width` x `height` RGB (row-major, top row first) from the named camera ('' = the model's first) or a given view.
 * Kinematics must be current (mj_forward or the env's post-step forward).
 * Draws geoms of groups 0-2 with alpha > 0; light: the model's first light as a directional light.
 */
export function renderImage(model: SimModel, data: SimData, camera: string | CameraView, width: number, height: number, out?: Uint8Array): Uint8Array {
  const m = model.raw;
  const mv = modelViews(model);
  const dv = dataViews(model, data);
  let cpos: Float64Array, cmat: Float64Array, fovy: number;
  if (typeof camera === 'string') {
    if (m.ncam === 0) throw new Error(`${model.file}: no camera to render from (add a <camera> to the MJCF)`);
    let cam = camera === '' ? 0 : mv.cameras.get(camera);
    if (cam === undefined) mv.cameras.set(camera, (cam = model.id('mjOBJ_CAMERA', camera)));
    cpos = dv.camPos.slice(3 * cam, 3 * cam + 3);
    cmat = dv.camMat.slice(9 * cam, 9 * cam + 9);
    fovy = mv.fovy[cam]!;
  } else ({ pos: cpos, mat: cmat, fovy } = camera);
  const tanY = Math.tan((fovy * Math.PI) / 360);
  const tanX = (tanY * width) / height;
  // light direction (towards the light), from the first light or straight down
  let lx = 0.3, ly = 0.2, lz = 1;
  if (m.nlight > 0) {
    const ld = dv.lightDir;
    lx = -ld[0]!;
    ly = -ld[1]!;
    lz = -ld[2]!;
  }
  const ll = Math.sqrt(lx * lx + ly * ly + lz * lz) || 1;
  lx /= ll;
  ly /= ll;
  lz /= ll;

  const ng = m.ngeom;
  const { type, size, rgba, group, dataid, vert, face, vadr, fadr, fnum } = mv;
  const gxpos = dv.xpos;
  const gxmat = dv.xmat;
  const visible: number[] = [];
  for (let g = 0; g < ng; g++) if (group[g]! <= 2 && rgba[4 * g + 3]! > 0 && type[g] !== 1 && type[g] !== 8) visible.push(g);
  // camera origin in each geom frame, computed once
  const oLocal = new Float64Array(3 * ng);
  for (const g of visible) {
    const px = cpos[0]! - gxpos[3 * g]!, py = cpos[1]! - gxpos[3 * g + 1]!, pz = cpos[2]! - gxpos[3 * g + 2]!;
    const R = 9 * g;
    oLocal[3 * g] = gxmat[R]! * px + gxmat[R + 3]! * py + gxmat[R + 6]! * pz;
    oLocal[3 * g + 1] = gxmat[R + 1]! * px + gxmat[R + 4]! * py + gxmat[R + 7]! * pz;
    oLocal[3 * g + 2] = gxmat[R + 2]! * px + gxmat[R + 5]! * py + gxmat[R + 8]! * pz;
  }
  const img = out ?? new Uint8Array(width * height * 3);
  const h: Hit = { t: Infinity, nx: 0, ny: 0, nz: 0 };
  const rect = screenRects(model, mv, visible, gxpos, gxmat, cpos, cmat, tanX, tanY, width, height);
  const row = new Int32Array(visible.length);
  for (let j = 0; j < height; j++) {
    // the geoms this row's pixels may hit, in the unculled order
    let nrow = 0;
    for (const g of visible) if (j >= rect[4 * g + 2]! && j <= rect[4 * g + 3]!) row[nrow++] = g;
    const v = (1 - (2 * (j + 0.5)) / height) * tanY;
    for (let i = 0; i < width; i++) {
      const u = ((2 * (i + 0.5)) / width - 1) * tanX;
      // camera looks along -z; x right, y up (columns of cam_xmat)
      let wx = cmat[0]! * u + cmat[1]! * v - cmat[2]!;
      let wy = cmat[3]! * u + cmat[4]! * v - cmat[5]!;
      let wz = cmat[6]! * u + cmat[7]! * v - cmat[8]!;
      const wl = Math.sqrt(wx * wx + wy * wy + wz * wz);
      wx /= wl;
      wy /= wl;
      wz /= wl;
      h.t = Infinity;
      let best = -1;
      let bnx = 0, bny = 0, bnz = 0;
      for (let n = 0; n < nrow; n++) {
        const g = row[n]!;
        if (i < rect[4 * g]! || i > rect[4 * g + 1]!) continue;
        const R = 9 * g;
        const dx = gxmat[R]! * wx + gxmat[R + 3]! * wy + gxmat[R + 6]! * wz;
        const dy = gxmat[R + 1]! * wx + gxmat[R + 4]! * wy + gxmat[R + 7]! * wz;
        const dz = gxmat[R + 2]! * wx + gxmat[R + 5]! * wy + gxmat[R + 8]! * wz;
        const ox = oLocal[3 * g]!, oy = oLocal[3 * g + 1]!, oz = oLocal[3 * g + 2]!;
        const s0 = size[3 * g]!, s1 = size[3 * g + 1]!, s2 = size[3 * g + 2]!;
        let hit = false;
        switch (type[g]) {
          case 0: hit = hitPlane(ox, oy, oz, dx, dy, dz, s0, s1, h); break;
          case 2: hit = hitSphere(ox, oy, oz, dx, dy, dz, s0, 0, h); break;
          case 3:
            hit = hitCylSide(ox, oy, oz, dx, dy, dz, s0, s1, h);
            hit = hitSphere(ox, oy, oz, dx, dy, dz, s0, s1, h) || hit;
            hit = hitSphere(ox, oy, oz, dx, dy, dz, s0, -s1, h) || hit;
            break;
          case 4: {
            // ellipsoid: scale space to the unit sphere, then map the normal back
            const t0 = h.t;
            const sx = ox / s0, sy = oy / s1, sz = oz / s2;
            const ex = dx / s0, ey = dy / s1, ez = dz / s2;
            const el = Math.sqrt(ex * ex + ey * ey + ez * ez);
            h.t = t0 * el;
            if (hitSphere(sx, sy, sz, ex / el, ey / el, ez / el, 1, 0, h)) {
              h.t /= el;
              const nx = h.nx / s0, ny = h.ny / s1, nz = h.nz / s2;
              const nl = Math.sqrt(nx * nx + ny * ny + nz * nz);
              h.nx = nx / nl;
              h.ny = ny / nl;
              h.nz = nz / nl;
              hit = true;
            } else h.t = t0;
            break;
          }
          case 5: hit = hitCylinder(ox, oy, oz, dx, dy, dz, s0, s1, h); break;
          case 6: hit = hitBox(ox, oy, oz, dx, dy, dz, s0, s1, s2, h); break;
          case 7: {
            const k = dataid[g]!;
            if (k >= 0) hit = hitMesh(ox, oy, oz, dx, dy, dz, vert, face, vadr[k]!, fadr[k]!, fnum[k]!, h);
            break;
          }
        }
        if (hit) {
          best = g;
          // normal back to world frame
          bnx = gxmat[R]! * h.nx + gxmat[R + 1]! * h.ny + gxmat[R + 2]! * h.nz;
          bny = gxmat[R + 3]! * h.nx + gxmat[R + 4]! * h.ny + gxmat[R + 5]! * h.nz;
          bnz = gxmat[R + 6]! * h.nx + gxmat[R + 7]! * h.ny + gxmat[R + 8]! * h.nz;
        }
      }
      const p = 3 * (j * width + i);
      if (best < 0) {
        img[p] = Math.round(SKY[0]! * 255);
        img[p + 1] = Math.round(SKY[1]! * 255);
        img[p + 2] = Math.round(SKY[2]! * 255);
        continue;
      }
      // two-sided Lambert: flip normals facing away from the camera
      if (bnx * wx + bny * wy + bnz * wz > 0) {
        bnx = -bnx;
        bny = -bny;
        bnz = -bnz;
      }
      const lambert = Math.max(0, bnx * lx + bny * ly + bnz * lz);
      // plus a weak headlight (as MuJoCo's viewer has), so faces lit edge-on by the scene light stay readable
      const head = -(bnx * wx + bny * wy + bnz * wz);
      const shade = AMBIENT + DIFFUSE * lambert + HEADLIGHT * head;
      for (let c = 0; c < 3; c++) img[p + c] = Math.min(255, Math.round(rgba[4 * best + c]! * shade * 255));
    }
  }
  return img;
}
