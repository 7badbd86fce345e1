// The unculled reference of the CPU ray caster (render.ts): every pixel's ray tested against every visible geom,
// exactly as renderImage did before it culled by screen-space bounds. Kept, unchanged, for two users only:
// tests/sim-render-cull.test.ts (renderImage must give the same bytes) and bench/sim.ts (the speedup over it).
// Not for production use: renderImage is the renderer.
import type { SimData, SimModel } from './mujoco.js';
import type { CameraView } from './render.js';

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

function hitCylinder(ox: number, oy: number, oz: number, dx: number, dy: number, dz: number, r: number, hl: number, h: Hit): boolean {
  let hit = hitCylSide(ox, oy, oz, dx, dy, dz, r, hl, h);
  if (Math.abs(dz) > EPS) {
    for (const s of [hl, -hl]) {
      const t = (s - oz) / dz;
      if (t <= 0 || t >= h.t) continue;
      const x = ox + t * dx;
      const y = oy + t * dy;
      if (x * x + y * y > r * r) continue;
      h.t = t;
      h.nx = 0;
      h.ny = 0;
      h.nz = s > 0 ? 1 : -1;
      hit = true;
    }
  }
  return hit;
}

function hitBox(ox: number, oy: number, oz: number, dx: number, dy: number, dz: number, sx: number, sy: number, sz: number, h: Hit): boolean {
  let tmin = -Infinity;
  let tmax = Infinity;
  let axis = -1;
  let sign = 1;
  const o = [ox, oy, oz];
  const d = [dx, dy, dz];
  const s = [sx, sy, sz];
  for (let k = 0; k < 3; k++) {
    if (Math.abs(d[k]!) < EPS) {
      if (Math.abs(o[k]!) > s[k]!) return false;
      continue;
    }
    let t1 = (-s[k]! - o[k]!) / d[k]!;
    let t2 = (s[k]! - o[k]!) / d[k]!;
    let sg = -1;
    if (t1 > t2) {
      const tmp = t1;
      t1 = t2;
      t2 = tmp;
      sg = 1;
    }
    if (t1 > tmin) {
      tmin = t1;
      axis = k;
      sign = sg;
    }
    if (t2 < tmax) tmax = t2;
    if (tmin > tmax) return false;
  }
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

/** renderImage's contract, by brute force: every visible geom tested for every pixel. */
export function renderImageReference(model: SimModel, data: SimData, camera: string | CameraView, width: number, height: number, out?: Uint8Array): Uint8Array {
  const m = model.raw;
  const d = data.raw;
  let cpos: Float64Array, cmat: Float64Array, fovy: number;
  if (typeof camera === 'string') {
    if (m.ncam === 0) throw new Error(`${model.file}: no camera to render from (add a <camera> to the MJCF)`);
    const cam = camera === '' ? 0 : model.id('mjOBJ_CAMERA', camera);
    cpos = (d.cam_xpos as Float64Array).slice(3 * cam, 3 * cam + 3);
    cmat = (d.cam_xmat as Float64Array).slice(9 * cam, 9 * cam + 9);
    fovy = (m.cam_fovy as Float64Array)[cam]!;
  } else ({ pos: cpos, mat: cmat, fovy } = camera);
  const tanY = Math.tan((fovy * Math.PI) / 360);
  const tanX = (tanY * width) / height;
  // light direction (towards the light), from the first light or straight down
  let lx = 0.3, ly = 0.2, lz = 1;
  if (m.nlight > 0) {
    const ld = d.light_xdir as Float64Array;
    lx = -ld[0]!;
    ly = -ld[1]!;
    lz = -ld[2]!;
  }
  const ll = Math.sqrt(lx * lx + ly * ly + lz * lz) || 1;
  lx /= ll;
  ly /= ll;
  lz /= ll;

  const ng = m.ngeom;
  const type = m.geom_type as Int32Array;
  const size = m.geom_size as Float64Array;
  const rgba = m.geom_rgba as Float32Array;
  const group = m.geom_group as Int32Array;
  const dataid = m.geom_dataid as Int32Array;
  const gxpos = (d.geom_xpos as Float64Array).slice();
  const gxmat = (d.geom_xmat as Float64Array).slice();
  const vert = m.nmesh > 0 ? (m.mesh_vert as Float32Array).slice() : new Float32Array(0);
  const face = m.nmesh > 0 ? (m.mesh_face as Int32Array).slice() : new Int32Array(0);
  const vadr = m.mesh_vertadr as Int32Array;
  const fadr = m.mesh_faceadr as Int32Array;
  const fnum = m.mesh_facenum as Int32Array;
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
  for (let j = 0; j < height; j++) {
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
      for (const g of visible) {
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
