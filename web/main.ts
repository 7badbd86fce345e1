// The viewer: the robot's scene in 3D from the sim's scene export (and the robot from its URDF when it declares one), real (opaque) and imagined (ghost)
// rollouts overlaid live or played back, the tip's trajectories, joint plots, training curves, and an
// e-stop that is always visible. It speaks only the service's HTTP API and its /api/stream WebSocket.
import * as THREE from 'three';
import URDFLoader, { type URDFRobot, type URDFVisual } from 'urdf-loader';
import type { SceneStatic } from '../sim/scene.js';
import type { ImaginedFrame, MetricsPoint, RealFrame, RobotStatus, RunStatus, StreamEvent } from '../server/schemas.js';

// ── Access token: given once in the URL fragment (never sent to the server in a URL), kept for the tab.
const fromHash = /token=([0-9a-f]+)/.exec(location.hash)?.[1];
/** The robot shown: #robot=ID in the URL, else the service's first. */
const wantedRobot = /robot=([A-Za-z0-9._-]+)/.exec(location.hash)?.[1];
if (fromHash) {
  sessionStorage.setItem('wmrl-token', fromHash);
  history.replaceState(null, '', `${location.pathname}${wantedRobot ? `#robot=${wantedRobot}` : ''}`);
}
/** A scene with nothing in it, for a robot that has none (over a transport, no sim task): its URDF draws it, if it has one. */
const EMPTY_SCENE: SceneStatic = { format: 'wmrl-scene/1', bodies: [], geoms: [], meshes: [], dynamicBodies: [], initialPoses: [], timestep: 0 };
/** The robot each run drives, so the frames and episodes of other robots' runs stay off this robot's view. */
const runRobots = new Map<string, string | null>();
const ours = (run: string) => (runRobots.get(run) ?? state.robot?.id) === state.robot?.id;
const token = () => sessionStorage.getItem('wmrl-token') ?? '';

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const statusEl = $('status');
const notes = $('notes');

// ── State the page shows (and tests read through window.__wmrl).
const state = {
  robot: null as RobotStatus | null,
  run: null as RunStatus | null,
  episode: null as string | null,
  real: [] as RealFrame[],
  imagined: [] as ImaginedFrame[],
  metrics: [] as MetricsPoint[],
  renders: 0,
  /** The real frame the scene shows now (live view draws at most every 30 ms). */
  shown: null as RealFrame | null,
  estopReply: null as null | { status: number; body: unknown },
  /** What the 3D scene draws now, counted in the scene graph (for tests): trajectory lines with at least two points, by role. */
  sceneStats: () => {
    const lines: Record<string, number> = {};
    scene.traverseVisible((o) => {
      const n = (o as THREE.Line).isLine ? (o as THREE.Line).geometry.getAttribute('position')?.count ?? 0 : 0;
      if (n >= 2 && o.userData.role) lines[o.userData.role as string] = (lines[o.userData.role as string] ?? 0) + 1;
    });
    let urdfMeshes = 0;
    if (urdf.real?.visible) urdf.real.traverseVisible((o) => void ((o as THREE.Mesh).isMesh && urdfMeshes++));
    return { realPaths: lines['real-path'] ?? 0, memberPaths: lines['member-path'] ?? 0, urdfMeshes };
  },
  /** The URDF robot as drawn (for tests): its joint values and the world position of a link; null without a URDF. */
  urdf: () => {
    const r = urdf.real;
    if (!r) return null;
    r.updateMatrixWorld(true);
    const joints = Object.fromEntries(Object.entries(r.joints).filter(([, j]) => j.jointType !== 'fixed').map(([k, j]) => [k, j.angle]));
    const links = Object.fromEntries(Object.entries(r.links).map(([k, l]) => [k, l.getWorldPosition(new THREE.Vector3()).toArray()]));
    return { joints, links };
  },
  /** Shows or hides the URDF robot (the real one), drawn at the next frame. */
  showUrdf: (visible: boolean) => {
    if (urdf.real) urdf.real.visible = visible;
    redraw();
  },
};
(window as unknown as { __wmrl: typeof state }).__wmrl = state;

// ── 3D scene ────────────────────────────────────────────────────────────────────────────────────
const canvas = $<HTMLCanvasElement>('scene');
const renderer = new THREE.WebGLRenderer({ canvas, antialias: true, preserveDrawingBuffer: true });
renderer.setPixelRatio(Math.min(2, window.devicePixelRatio));
const scene = new THREE.Scene();
scene.background = new THREE.Color(0x1a1f26);
const camera = new THREE.PerspectiveCamera(45, 1, 0.01, 20);
camera.up.set(0, 0, 1); // MuJoCo is z-up
camera.position.set(0.55, -0.75, 0.75);
camera.lookAt(0, 0, 0.05);
scene.add(new THREE.HemisphereLight(0xffffff, 0x223344, 1.6));
const sun = new THREE.DirectionalLight(0xffffff, 1.8);
sun.position.set(0.5, -0.4, 2);
scene.add(sun);

function resize(): void {
  const w = canvas.clientWidth || 800;
  const h = canvas.clientHeight || 600;
  renderer.setSize(w, h, false);
  camera.aspect = w / h;
  camera.updateProjectionMatrix();
}
window.addEventListener('resize', resize);

/** One copy of the robot's bodies; the imagined one is a translucent ghost. */
interface BodySet {
  groups: THREE.Group[];
  setPoses(poses: ArrayLike<number>): void;
}

function geometryOf(g: SceneStatic['geoms'][number], st: SceneStatic): THREE.BufferGeometry | null {
  const [a, b, c] = g.size;
  switch (g.type) {
    case 'plane':
      return new THREE.PlaneGeometry(2 * (a || 1), 2 * (b || 1));
    case 'sphere':
      return new THREE.SphereGeometry(a, 20, 14);
    case 'ellipsoid':
      return new THREE.SphereGeometry(1, 20, 14).scale(a, b, c);
    case 'capsule':
      return new THREE.CapsuleGeometry(a, 2 * b, 6, 14).rotateX(Math.PI / 2); // MuJoCo's axis is z, three's y
    case 'cylinder':
      return new THREE.CylinderGeometry(a, a, 2 * b, 24).rotateX(Math.PI / 2);
    case 'box':
      return new THREE.BoxGeometry(2 * a, 2 * b, 2 * c);
    case 'mesh': {
      const m = st.meshes[g.mesh];
      if (!m) return null;
      const geo = new THREE.BufferGeometry();
      geo.setAttribute('position', new THREE.Float32BufferAttribute(m.vertices, 3));
      geo.setIndex(m.faces);
      geo.computeVertexNormals();
      return geo;
    }
    default:
      return null; // hfield, sdf: not drawn
  }
}

/** `drawnElsewhere`: bodies the robot's URDF draws (MuJoCo names a compiled URDF's bodies after its links). */
function buildBodies(st: SceneStatic, ghost: boolean, drawnElsewhere: ReadonlySet<string> = new Set()): BodySet {
  const groups = st.bodies.map(() => new THREE.Group());
  for (const g of st.geoms) {
    if (g.group > 2 || (ghost && (g.body === 0 || !st.dynamicBodies.includes(g.body)))) continue;
    if (drawnElsewhere.has(st.bodies[g.body]!.name)) continue;
    const geo = geometryOf(g, st);
    if (!geo) continue;
    const mat = ghost
      ? new THREE.MeshStandardMaterial({ color: 0x4cc9f0, transparent: true, opacity: 0.45, depthWrite: false })
      : new THREE.MeshStandardMaterial({ color: new THREE.Color(g.rgba[0], g.rgba[1], g.rgba[2]), transparent: g.rgba[3] < 1, opacity: g.rgba[3] });
    const mesh = new THREE.Mesh(geo, mat);
    mesh.position.set(...g.pos);
    mesh.quaternion.set(g.quat[1], g.quat[2], g.quat[3], g.quat[0]);
    groups[g.body]!.add(mesh);
  }
  for (const grp of groups) scene.add(grp);
  const setPoses = (p: ArrayLike<number>) => {
    groups.forEach((grp, b) => {
      if (7 * b + 6 >= p.length) return;
      grp.position.set(p[7 * b]!, p[7 * b + 1]!, p[7 * b + 2]!);
      grp.quaternion.set(p[7 * b + 4]!, p[7 * b + 5]!, p[7 * b + 6]!, p[7 * b + 3]!);
    });
  };
  setPoses(st.initialPoses);
  return { groups, setPoses };
}

/** The arm's tip: the last geom of the deepest body, traced for the trajectories. */
function tipOf(st: SceneStatic): { body: number; offset: THREE.Vector3 } {
  const depth = (b: number): number => (b === 0 ? 0 : 1 + depth(st.bodies[b]!.parent));
  let body = 0;
  for (let b = 1; b < st.bodies.length; b++) if (depth(b) > depth(body)) body = b;
  const last = [...st.geoms].reverse().find((g) => g.body === body);
  return { body, offset: new THREE.Vector3(...(last?.pos ?? [0, 0, 0])) };
}

const _q = new THREE.Quaternion();
const _v = new THREE.Vector3();
function tipPosition(poses: ArrayLike<number>, tip: { body: number; offset: THREE.Vector3 }): THREE.Vector3 | null {
  const b = tip.body;
  if (7 * b + 6 >= poses.length) return null;
  _q.set(poses[7 * b + 4]!, poses[7 * b + 5]!, poses[7 * b + 6]!, poses[7 * b + 3]!);
  return _v.copy(tip.offset).applyQuaternion(_q).add(new THREE.Vector3(poses[7 * b]!, poses[7 * b + 1]!, poses[7 * b + 2]!)).clone();
}

/** A polyline that grows as frames arrive. */
/** A trajectory: a line through the points, each point a dot of a few pixels (unlit, so its colour is exact). */
function trail(color: number, role: 'real-path' | 'member-path', opacity = 1): { line: THREE.Line; set(points: THREE.Vector3[]): void } {
  const line = new THREE.Line(new THREE.BufferGeometry(), new THREE.LineBasicMaterial({ color, transparent: opacity < 1, opacity }));
  line.userData.role = role;
  const dots = new THREE.Points(new THREE.BufferGeometry(), new THREE.PointsMaterial({ color, size: 4, sizeAttenuation: false, transparent: opacity < 1, opacity }));
  line.frustumCulled = dots.frustumCulled = false;
  scene.add(line, dots);
  // A geometry's buffers cannot grow: each update gets a fresh one.
  return {
    line,
    set: (pts) => {
      line.geometry.dispose();
      dots.geometry.dispose();
      line.geometry = new THREE.BufferGeometry().setFromPoints(pts);
      dots.geometry = new THREE.BufferGeometry().setFromPoints(pts);
    },
  };
}

// ── The robot from its URDF (urdf-loader), when it declares one: joints driven by the frames' joint positions.
const urdf = { real: null as URDFRobot | null, ghost: null as URDFRobot | null, missing: [] as string[] };
const ghostMaterial = new THREE.MeshStandardMaterial({ color: 0x4cc9f0, transparent: true, opacity: 0.45, depthWrite: false });

async function loadUrdf(url: string, ghost: boolean): Promise<URDFRobot> {
  const loader = new URDFLoader();
  // package://PKG/... is served under the URDF's own prefix (server/routes/robots.ts).
  const base = url.slice(0, url.lastIndexOf('/') + 1);
  loader.packages = (pkg: string) => `${base}package/${pkg}`;
  const robot = await loader.loadAsync(url);
  // Drawn where the robot reports its joints, even a little past the URDF's limits (MuJoCo's are soft).
  for (const j of Object.values(robot.joints)) j.ignoreLimits = true;
  if (ghost) robot.traverse((o) => void ((o as THREE.Mesh).isMesh && ((o as THREE.Mesh).material = ghostMaterial)));
  scene.add(robot);
  return robot;
}

/** Sets the URDF's joints named as the robot's joints to `q` (in the robot's joint order). */
function setUrdfJoints(robot: URDFRobot, q: ArrayLike<number>): void {
  state.robot?.joints.forEach((name, j) => {
    if (!robot.joints[name]) {
      if (!urdf.missing.includes(name)) urdf.missing.push(name);
      return;
    }
    robot.setJointValue(name, q[j]!);
  });
}

let real: BodySet | null = null;
let ghost: BodySet | null = null;
let tip: { body: number; offset: THREE.Vector3 } | null = null;
const realTrail = trail(0xff9a3c, 'real-path');
const imaginedTrails: Array<ReturnType<typeof trail>> = [];

function drawTrails(realFrames: RealFrame[], imaginedFrames: ImaginedFrame[]): void {
  if (!tip) return;
  realTrail.set(realFrames.map((f) => tipPosition(f.poses, tip!)).filter((p): p is THREE.Vector3 => !!p));
  const members = Math.max(0, ...imaginedFrames.map((f) => f.poses.length));
  while (imaginedTrails.length < members) imaginedTrails.push(trail(0x4cc9f0, 'member-path', imaginedTrails.length === 0 ? 1 : 0.35));
  // Each ensemble member's path is drawn; their spread is the uncertainty.
  imaginedTrails.forEach((t, m) => t.set(imaginedFrames.map((f) => (f.poses[m] ? tipPosition(f.poses[m]!, tip!) : null)).filter((p): p is THREE.Vector3 => !!p)));
}

// Drawn on demand (a new frame, a resize), not 60 times a second: an idle viewer costs nothing.
let dirty = true;
const redraw = () => (dirty = true);
window.addEventListener('resize', redraw);
function animate(): void {
  requestAnimationFrame(animate);
  if (!dirty) return;
  dirty = false;
  resize();
  renderer.render(scene, camera);
  state.renders++;
}

// ── 2D plots ────────────────────────────────────────────────────────────────────────────────────
type Series = { points: Array<[number, number]>; color: string; dash?: boolean; band?: Array<[number, number, number]> };
function plot(el: HTMLCanvasElement, series: Series[], opts: { yMin?: number; yMax?: number; xLabel: string; empty?: string }): void {
  const c = el.getContext('2d')!;
  const W = el.width, H = el.height, L = 34, B = 18;
  c.clearRect(0, 0, W, H);
  c.fillStyle = '#778';
  c.font = '10px sans-serif';
  const all = series.flatMap((s) => s.points);
  if (!all.length) {
    c.fillText(opts.empty ?? 'no data yet', L + 8, H / 2);
    return;
  }
  const xs = all.map((p) => p[0]);
  const ys = [...all.map((p) => p[1]), ...series.flatMap((s) => s.band?.flatMap((b) => [b[1], b[2]]) ?? [])];
  const x0 = Math.min(...xs), x1 = Math.max(...xs, x0 + 1e-9);
  const y0 = opts.yMin ?? Math.min(...ys), y1 = Math.max(opts.yMax ?? Math.max(...ys), y0 + 1e-9);
  const X = (x: number) => L + ((x - x0) / (x1 - x0)) * (W - L - 6);
  const Y = (y: number) => H - B - ((y - y0) / (y1 - y0)) * (H - B - 6);
  c.strokeStyle = '#334';
  c.strokeRect(L, 6, W - L - 6, H - B - 6);
  c.fillText(y1.toFixed(2), 2, 12);
  c.fillText(y0.toFixed(2), 2, H - B);
  c.fillText(`${opts.xLabel}: ${x0.toPrecision(3)} … ${x1.toPrecision(3)}`, L + 4, H - 4);
  for (const s of series) {
    if (s.band?.length) {
      c.fillStyle = s.color + '33';
      c.beginPath();
      s.band.forEach(([x, lo], i) => (i ? c.lineTo(X(x), Y(lo)) : c.moveTo(X(x), Y(lo))));
      [...s.band].reverse().forEach(([x, , hi]) => c.lineTo(X(x), Y(hi)));
      c.closePath();
      c.fill();
    }
    c.strokeStyle = s.color;
    c.setLineDash(s.dash ? [4, 3] : []);
    c.beginPath();
    s.points.forEach(([x, y], i) => (i ? c.lineTo(X(x), Y(y)) : c.moveTo(X(x), Y(y))));
    c.stroke();
  }
  c.setLineDash([]);
}

const JOINT_COLORS = ['#ff9a3c', '#e9c46a', '#f4a261', '#e76f51'];
function drawJoints(realFrames: RealFrame[], imaginedFrames: ImaginedFrame[]): void {
  const n = realFrames[0]?.q.length ?? imaginedFrames[0]?.members[0]?.length ?? 0;
  const series: Series[] = [];
  for (let j = 0; j < n; j++) {
    series.push({ points: realFrames.map((f) => [f.t, f.q[j]!]), color: JOINT_COLORS[j % 4]! });
    const members = Math.max(0, ...imaginedFrames.map((f) => f.members.length));
    for (let m = 0; m < members; m++) series.push({ points: imaginedFrames.filter((f) => f.members[m]).map((f) => [f.t, f.members[m]![j]!]), color: '#4cc9f0', dash: true });
  }
  plot($<HTMLCanvasElement>('joints'), series, { xLabel: 'step' });
}

function drawMetrics(): void {
  const m = state.metrics;
  const hours = (p: MetricsPoint) => p.robotSeconds / 3600;
  const succ = m.filter((p) => p.trueSuccess !== null);
  plot($<HTMLCanvasElement>('success'), [{ points: succ.map((p) => [hours(p), p.trueSuccess!]), color: '#90be6d', band: m.filter((p) => p.ppi).map((p) => [hours(p), p.ppi![0], p.ppi![1]]) }], { yMin: 0, yMax: 1, xLabel: 'robot-hours' });
  const wm = [
    { key: 'anchorFraction' as const, color: '#f9c74f' },
    { key: 'biasReduction' as const, color: '#f94144' },
    { key: 'anchorWeight' as const, color: '#577590' },
  ];
  const series = wm.map((s) => ({ points: m.filter((p) => p[s.key] !== null).map((p) => [p.step, p[s.key]!] as [number, number]), color: s.color }));
  const missing = wm.filter((_s, i) => m.length && !series[i]!.points.length).map((s) => s.key);
  plot($<HTMLCanvasElement>('wmrl'), series, { yMin: 0, xLabel: 'step', empty: 'no metrics yet' });
  const score = m.filter((p) => p.trueScore);
  plot($<HTMLCanvasElement>('score'), [{ points: score.map((p) => [p.step, (p.trueScore![0] + p.trueScore![1]) / 2]), color: '#c77dff', band: score.map((p) => [p.step, p.trueScore![0], p.trueScore![1]]) }], { xLabel: 'step', empty: 'no interval yet (WMRL runs report it)' });
  const kind = state.run?.kind ?? '?';
  notes.textContent = !missing.length ? '' : kind === 'wmrl-train' ? `${missing.join(', ')}: not measured yet (each starts after its warm-up of anchor episodes).` : `${missing.join(', ')}: not measured by this run's job (${kind}); the WMRL trainer (wmrl-train) reports them.`;
}

// ── Live data and playback ──────────────────────────────────────────────────────────────────────
let playback: { real: RealFrame[]; imagined: ImaginedFrame[] } | null = null;
let lastDraw = 0;

function showFrames(realFrames: RealFrame[], imaginedFrames: ImaginedFrame[], upto = Infinity): void {
  const r = realFrames.filter((f) => f.t <= upto);
  const im = imaginedFrames.filter((f) => f.t <= upto);
  const lastReal = r.at(-1);
  // The ghost keeps pace with the real robot: a world model's rollout arrives whole, before the episode's real steps.
  const lastIm = (lastReal && im.find((f) => f.t === lastReal.t)) || im.at(-1);
  // The real frame the scene shows: a new episode's imagined rollout arrives before its first real step, and the robot stays where it was drawn last.
  if (lastReal) state.shown = lastReal;
  if (lastReal) real?.setPoses(lastReal.poses);
  if (lastIm?.poses[0]) ghost?.setPoses(lastIm.poses[0]);
  for (const g of ghost?.groups ?? []) g.visible = !!lastIm;
  if (urdf.real && lastReal) setUrdfJoints(urdf.real, lastReal.q);
  if (urdf.ghost) {
    urdf.ghost.visible = !!lastIm;
    if (lastIm?.members[0]) setUrdfJoints(urdf.ghost, lastIm.members[0]);
  }
  drawTrails(r, im);
  drawJoints(r, im);
  redraw();
  $('real-count').textContent = String(r.length);
  $('imagined-count').textContent = String(im.length);
  $('imagined-source').textContent = lastIm ? `(${lastIm.source})` : '';
}

/** The run whose curves are drawn; another run's curves start from what the service has of them. */
function showRun(run: RunStatus): void {
  const other = run.id !== state.run?.id;
  state.run = run;
  if (!other) return;
  state.metrics = [];
  void loadMetrics(run.id);
}

/** A run's metrics so far, merged with those the stream delivered meanwhile (newer steps kept). */
async function loadMetrics(run: string): Promise<void> {
  const res = await fetch(`api/runs/${run}/metrics`);
  if (!res.ok || state.run?.id !== run) return;
  const stored = (await res.json()) as MetricsPoint[];
  const last = stored.at(-1)?.step ?? -1;
  state.metrics = [...stored, ...state.metrics.filter((m) => m.step > last)];
  drawMetrics();
}

function onEvent(ev: StreamEvent): void {
  if (ev.type === 'robot') {
    if (!state.robot || ev.status.id === state.robot.id) state.robot = ev.status;
  } else if (ev.type === 'run') {
    runRobots.set(ev.status.id, ev.status.robot);
    if (!state.run || ev.status.id === state.run.id || ev.status.state === 'running') showRun(ev.status);
  } else if (ev.type === 'metrics') {
    if (ev.run === state.run?.id) {
      state.metrics.push(ev.metrics);
      state.run.progress.done = ev.metrics.step;
      drawMetrics();
    }
  } else if (ev.type === 'episode') {
    if (!ours(ev.run)) return;
    if (ev.phase === 'start') {
      state.episode = ev.episode;
      state.real = [];
      state.imagined = [];
    } else addEpisodeOption(ev.run, ev.episode, ev.success);
  } else if (ev.type === 'real') {
    if (ev.robot !== state.robot?.id) return;
    if (ev.episode !== state.episode) {
      state.episode = ev.episode;
      state.real = [];
      state.imagined = [];
    }
    state.real.push(ev);
  } else if (ev.type === 'imagined') {
    if (ev.robot === state.robot?.id && ev.episode === state.episode) state.imagined.push(ev);
  }
  renderStatus();
  if (!playback && (ev.type === 'real' || ev.type === 'imagined') && performance.now() - lastDraw > 30) {
    lastDraw = performance.now();
    showFrames(state.real, state.imagined);
  }
}

function renderStatus(): void {
  const r = state.robot;
  const run = state.run;
  statusEl.textContent = `${r ? `robot ${r.id} (${r.task ?? r.kind}, ${r.profile}): ${r.state}${r.connected ? '' : ', DISCONNECTED'}` : 'no robot'} · ${run ? `run ${run.kind} ${run.state} ${run.progress.phase} ${run.progress.done}/${run.progress.total}` : 'no run'}`;
  $('estop').classList.toggle('latched', !!r?.estopped);
}

const select = $<HTMLSelectElement>('episode');
const scrub = $<HTMLInputElement>('scrub');
const play = $<HTMLButtonElement>('play');
function addEpisodeOption(run: string, episode: string, success: boolean | null): void {
  const o = document.createElement('option');
  o.value = `${run}/${episode}`;
  o.textContent = `${episode.slice(0, 8)} ${success === null ? '' : success ? '✓' : '✗'}`;
  select.append(o);
}
select.addEventListener('change', async () => {
  if (select.value === 'live') {
    playback = null;
    scrub.disabled = play.disabled = true;
    showFrames(state.real, state.imagined);
    return;
  }
  const [run, episode] = select.value.split('/');
  const res = await fetch(`api/runs/${run}/rollouts/${episode}`);
  playback = res.ok ? ((await res.json()) as { real: RealFrame[]; imagined: ImaginedFrame[] }) : null;
  if (!playback) return;
  scrub.max = String(Math.max(0, playback.real.length - 1));
  scrub.value = scrub.max;
  scrub.disabled = play.disabled = false;
  showFrames(playback.real, playback.imagined);
});
scrub.addEventListener('input', () => playback && showFrames(playback.real, playback.imagined, Number(scrub.value)));
play.addEventListener('click', () => {
  if (!playback) return;
  let t = 0;
  const hz = state.robot?.controlHz ?? 50;
  const timer = setInterval(() => {
    if (!playback || t > Number(scrub.max)) return clearInterval(timer);
    scrub.value = String(t);
    showFrames(playback.real, playback.imagined, t++);
  }, 1000 / hz);
});

// ── E-stop and reset: need the access token ──────────────────────────────────────────────────────
async function robotAction(what: 'estop' | 'reset'): Promise<void> {
  const id = state.robot?.id;
  if (!id) return;
  let t = token();
  if (!t) {
    t = prompt('access token (data/token on the service machine)') ?? '';
    sessionStorage.setItem('wmrl-token', t);
  }
  const res = await fetch(`api/robots/${id}/${what}`, { method: 'POST', headers: { authorization: `Bearer ${t}`, 'content-type': 'application/json' }, body: '{}' });
  const body = (await res.json()) as unknown;
  if (what === 'estop') state.estopReply = { status: res.status, body };
  if (res.ok) state.robot = body as RobotStatus;
  else statusEl.textContent = `${what} failed: ${(body as { message?: string }).message ?? res.status}`;
  renderStatus();
}
$('estop').addEventListener('click', () => void robotAction('estop'));
$('reset').addEventListener('click', () => void robotAction('reset'));

// ── Start ───────────────────────────────────────────────────────────────────────────────────────
async function start(): Promise<void> {
  const robots = (await (await fetch('api/robots')).json()) as RobotStatus[];
  state.robot = robots.find((r) => r.id === wantedRobot) ?? robots[0] ?? null;
  if (state.robot) {
    const res = await fetch(`api/robots/${state.robot.id}/scene`);
    const st = res.ok ? ((await res.json()) as SceneStatic) : EMPTY_SCENE;
    let links = new Set<string>();
    if (state.robot.urdf) {
      const url = state.robot.urdf.replace(/^\//, '');
      [urdf.real, urdf.ghost] = await Promise.all([loadUrdf(url, false), loadUrdf(url, true)]);
      urdf.ghost.visible = false;
      // The links the URDF draws (with visuals; not an empty root link such as 'world').
      links = new Set(Object.entries(urdf.real.links).filter(([, l]) => l.children.some((c) => (c as URDFVisual).isURDFVisual)).map(([name]) => name));
      setUrdfJoints(urdf.real, state.robot.position);
      if (urdf.missing.length) notes.textContent = `the URDF has no joint ${urdf.missing.map((n) => `'${n}'`).join(', ')} of robot ${state.robot.id}: those stay at 0`;
    }
    real = buildBodies(st, false, links);
    ghost = buildBodies(st, true, links);
    for (const g of ghost.groups) g.visible = false;
    tip = tipOf(st);
  }
  const runs = (await (await fetch('api/runs')).json()) as RunStatus[];
  for (const r of runs) runRobots.set(r.id, r.robot);
  const current = runs.find((r) => r.state === 'running') ?? runs.at(-1);
  if (current) showRun(current);
  renderStatus();
  animate();
  const connect = () => {
    const ws = new WebSocket(`${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}${location.pathname.replace(/[^/]*$/, '')}api/stream`);
    // Metrics emitted before the stream connected (or while it was down) come from the service's record.
    ws.onopen = () => void (state.run && loadMetrics(state.run.id));
    ws.onmessage = (m) => onEvent(JSON.parse(m.data as string) as StreamEvent);
    ws.onclose = () => {
      statusEl.textContent = 'disconnected; retrying…';
      setTimeout(connect, 1000);
    };
  };
  connect();
}
start().catch((e: Error) => {
  statusEl.textContent = `viewer failed to start: ${e.message}`;
  throw e;
});
