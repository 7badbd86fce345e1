// MuJoCo (mujoco-js WebAssembly) behind disposable wrappers.
//
// Views vs copies: every typed-array getter of mujoco-js (`raw.qpos`, `raw.ctrl`, `model.raw.body_mass`, ...)
// returns a *live view* into WASM memory. Writing into it changes the simulation; but a view taken before the
// heap grows (any new MjModel/MjData) reads length 0 afterwards, so take views just before use and never keep
// them across allocations. Everything this module returns as a plain `Float64Array`/`number[]` is a *copy*
// (`SimData.getState`, `SimModel.jointInfo`, `warnings()`), safe to keep.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import loadMujoco from 'mujoco-js';
import type { MainModule, MjData, MjModel } from 'mujoco-js';

let modulePromise: Promise<MainModule> | undefined;
/** MuJoCo's own printed lines (parse errors, warnings); kept bounded. */
const printed: string[] = [];
const onPrint = (s: string) => {
  if (s.trim() === '') return;
  printed.push(s);
  if (printed.length > 200) printed.shift();
};

/** The one module instance of this process (one 2 GiB heap shared by every model and data). */
export function mujoco(): Promise<MainModule> {
  modulePromise ??= (async () => {
    const mj = await (loadMujoco as unknown as (o: object) => Promise<MainModule>)({ print: onPrint, printErr: onPrint });
    // A tiny model that lives as long as the module: its views give access to the heap bytes (error texts).
    mj.FS.writeFile('/probe.xml', '<mujoco><worldbody/></mujoco>');
    heapProbe = mj.MjModel.loadFromXML('/probe.xml');
    return mj;
  })();
  return modulePromise;
}

/** Lines MuJoCo printed since the last call (and clears them). */
export function takeMujocoLog(): string[] {
  return printed.splice(0, printed.length);
}

export class MujocoLoadError extends Error {
  constructor(
    readonly file: string,
    readonly detail: string,
    readonly line?: number,
  ) {
    super(`${file}${line ? `:${line}` : ''}: ${detail}`);
    this.name = 'MujocoLoadError';
  }
}

let memfsCounter = 0;
let heapProbe: MjModel | undefined;

function heapBytes(m: MjModel): Uint8Array {
  return new Uint8Array((m.qpos0 as Float64Array).buffer);
}

/** Current WASM heap size in bytes (grows, never shrinks: the measure for leak tests). */
export async function heapSize(): Promise<number> {
  await mujoco();
  return heapBytes(heapProbe!).byteLength;
}

/** mujoco-js throws a CppException whose message is lost; the mjCError/mjXError text sits at excPtr. */
function cppMessage(e: unknown): string | undefined {
  const ptr = (e as { excPtr?: number }).excPtr;
  if (typeof ptr !== 'number' || !heapProbe) return undefined;
  const h = heapBytes(heapProbe);
  let end = ptr;
  while (end < h.length && h[end] !== 0 && end - ptr < 2000) end++;
  return new TextDecoder().decode(h.subarray(ptr, end)).trim();
}

/** Copies the model files (MJCF, meshes, textures) of a folder tree, at most 3 levels deep and 64 MiB. */
function copyDirToMemfs(mj: MainModule, hostDir: string, memDir: string, budget = { bytes: 64 << 20 }, depth = 0): void {
  mj.FS.mkdirTree(memDir, 0o777);
  for (const name of readdirSync(hostDir)) {
    const p = join(hostDir, name);
    const st = statSync(p);
    if (st.isDirectory()) {
      if (depth < 3 && !name.startsWith('.') && name !== 'node_modules') copyDirToMemfs(mj, p, `${memDir}/${name}`, budget, depth + 1);
    }
    else if (st.isFile() && /\.(xml|stl|obj|msh|png)$/i.test(name)) {
      budget.bytes -= st.size;
      if (budget.bytes < 0) throw new Error(`${hostDir}: asset folder larger than 64 MiB`);
      mj.FS.writeFile(`${memDir}/${name}`, readFileSync(p));
    }
  }
}

/** A compiled MjModel; `dispose()` frees it (and must come after disposing its datas). */
export class SimModel implements Disposable {
  private constructor(
    readonly mj: MainModule,
    readonly raw: MjModel,
    /** Host path of the MJCF file it was loaded from. */
    readonly file: string,
  ) {}

  /**
   * Loads an MJCF file from the host file system; its folder (includes, meshes) is copied into the WASM file
   * system first. `worldbody`: MJCF elements added to the world body (the file is included into a wrapper
   * scene). Errors name the file and, where MuJoCo reports one, the line.
   */
  static async load(file: string, opts: { worldbody?: string } = {}): Promise<SimModel> {
    const mj = await mujoco();
    const host = resolve(file);
    let text: string;
    try {
      text = readFileSync(host, 'utf8');
    } catch (e) {
      throw new MujocoLoadError(host, `cannot read MJCF file (${(e as Error).message})`);
    }
    if (!text.includes('<mujoco')) throw new MujocoLoadError(host, 'not an MJCF file: no <mujoco> element');
    const memDir = `/sim${++memfsCounter}`;
    let raw: MjModel | null = null;
    try {
      try {
        copyDirToMemfs(mj, dirname(host), memDir);
      } catch (e) {
        throw new MujocoLoadError(host, `cannot copy the model folder (${(e as Error).message})`);
      }
      takeMujocoLog();
      try {
        let main = `${memDir}/${basename(host)}`;
        if (opts.worldbody) {
          // the file as a menagerie scene.xml would include it, plus elements the caller adds to the world
          main = `${memDir}/__wmrl_scene.xml`;
          mj.FS.writeFile(main, `<mujoco><include file="${basename(host)}"/><worldbody>${opts.worldbody}</worldbody></mujoco>`);
        }
        raw = mj.MjModel.loadFromXML(main);
      } catch (e) {
        // (the C++ exception object, ~1 KB, is not freed: decrementing its refcount aborts in this build)
        throw SimModel.loadError(host, cppMessage(e) ?? (e as Error).message ?? String(e));
      }
    } finally {
      removeMemfsTree(mj, memDir);
    }
    if (!raw) throw SimModel.loadError(host, takeMujocoLog().join('\n') || 'MuJoCo returned no model');
    return new SimModel(mj, raw, host);
  }

  private static loadError(file: string, msg: string): MujocoLoadError {
    const m = /[Ll]ine(?: number=| )(\d+)/.exec(msg);
    const line = m && Number(m[1]) > 0 ? Number(m[1]) : undefined;
    const detail = msg.replace(/\s+/g, ' ').replace(/\/sim\d+\//g, '');
    return new MujocoLoadError(file, line === undefined && /line 0\b/.test(msg) ? `${detail} (in an included file)` : detail, line);
  }

  id(type: keyof MainModule['mjtObj'], name: string): number {
    const t = (this.mj.mjtObj[type] as { value: number }).value;
    const id = this.mj.mj_name2id(this.raw, t, name);
    if (id < 0) throw new Error(`${this.file}: no ${String(type).replace('mjOBJ_', '').toLowerCase()} named '${name}'`);
    return id;
  }

  name(type: keyof MainModule['mjtObj'], id: number): string {
    return this.mj.mj_id2name(this.raw, (this.mj.mjtObj[type] as { value: number }).value, id) ?? '';
  }

  get timestep(): number {
    return this.raw.opt.timestep;
  }

  /** Recompute derived constants after editing masses/inertias (body_subtreemass, invweight0, ...). */
  setConst(): void {
    const d = new this.mj.MjData(this.raw);
    try {
      this.mj.mj_setConst(this.raw, d);
    } finally {
      d.delete();
    }
  }

  dispose(): void {
    if (!this.raw.isDeleted()) this.raw.delete();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

function removeMemfsTree(mj: MainModule, dir: string): void {
  let names: string[];
  try {
    names = mj.FS.readdir(dir) as string[];
  } catch {
    return; // never created
  }
  for (const name of names) {
    if (name === '.' || name === '..') continue;
    const p = `${dir}/${name}`;
    if (mj.FS.isDir(mj.FS.stat(p, false).mode)) removeMemfsTree(mj, p);
    else mj.FS.unlink(p);
  }
  mj.FS.rmdir(dir);
}

export const WARNING_NAMES = ['inertia', 'contactfull', 'cnstrfull', 'vgeomfull', 'badqpos', 'badqvel', 'badqacc', 'badctrl'];

/** One MjData. Its arena is sized by `<size memory>` of the MJCF; keep it small for vectorized envs. */
export class SimData implements Disposable {
  readonly raw: MjData;
  constructor(readonly model: SimModel) {
    this.raw = new model.mj.MjData(model.raw);
  }

  step(n = 1): void {
    const { mj } = this.model;
    for (let i = 0; i < n; i++) mj.mj_step(this.model.raw, this.raw);
  }

  forward(): void {
    this.model.mj.mj_forward(this.model.raw, this.raw);
  }

  /** Body, geom and site poses from qpos only (no cameras, lights, velocities-derived or force quantities). */
  kinematics(): void {
    this.model.mj.mj_kinematics(this.model.raw, this.raw);
  }

  /** Reset to the model defaults, or to the named keyframe. */
  reset(key?: string): void {
    const { mj } = this.model;
    if (key === undefined) mj.mj_resetData(this.model.raw, this.raw);
    else mj.mj_resetDataKeyframe(this.model.raw, this.raw, this.model.id('mjOBJ_KEY', key));
  }

  /** Counts of each MuJoCo warning since the last reset (copy); empty object when none. */
  warnings(): Record<string, number> {
    const vec = this.raw.warning;
    const out: Record<string, number> = {};
    try {
      for (let i = 0; i < vec.size(); i++) {
        const s = vec.get(i)!;
        if (s.number > 0) out[WARNING_NAMES[i] ?? `w${i}`] = s.number;
        s.delete();
      }
    } finally {
      vec.delete(); // the getter returns a copy of the vector: not deleting it leaks ~200 B per call
    }
    return out;
  }

  /** Full physics state as one copy: [time, qpos, qvel, act, ctrl, qacc_warmstart, mocap_pos, mocap_quat]. */
  getState(): Float64Array {
    const d = this.raw;
    const parts = [d.qpos, d.qvel, d.act, d.ctrl, d.qacc_warmstart, d.mocap_pos, d.mocap_quat] as Float64Array[];
    const out = new Float64Array(1 + parts.reduce((s, p) => s + p.length, 0));
    out[0] = d.time;
    let o = 1;
    for (const p of parts) {
      out.set(p, o);
      o += p.length;
    }
    return out;
  }

  setState(state: Float64Array): void {
    const d = this.raw;
    const parts = [d.qpos, d.qvel, d.act, d.ctrl, d.qacc_warmstart, d.mocap_pos, d.mocap_quat] as Float64Array[];
    const n = 1 + parts.reduce((s, p) => s + p.length, 0);
    if (state.length !== n) throw new Error(`setState: expected ${n} numbers, got ${state.length}`);
    d.time = state[0]!;
    let o = 1;
    for (const p of parts) {
      p.set(state.subarray(o, o + p.length));
      o += p.length;
    }
    this.forward();
  }

  dispose(): void {
    if (!this.raw.isDeleted()) this.raw.delete();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}
