// The viewer in real headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core) during live
// runs: the 3D canvas draws, real and imagined trajectories both appear (a WMRL run's world-model rollouts
// with one path per ensemble member), and the e-stop button stops the robot — checked on the robot's side.
// Screenshots are kept in test-artifacts/.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { ensureViewer } from '../bin/viewer.js';
import { startService, type Service } from '../server/service.js';

const CHROMIUM = '/usr/bin/chromium';
const ARTIFACTS = 'test-artifacts';
const dir = mkdtempSync(join(tmpdir(), 'wmrl-viewer-'));
let svc: Service;
let browser: BrowserContext;

beforeAll(async () => {
  const viewerDir = await ensureViewer(() => undefined);
  svc = await startService({ dataDir: dir, port: 0, foxglovePort: null, mqttPort: null, viewerDir });
  // A fresh profile each run (playwright passes it as --user-data-dir).
  browser = await chromium.launchPersistentContext(mkdtempSync(join(tmpdir(), 'wmrl-chromium-')), {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1200, height: 700 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--enable-unsafe-swiftshader'],
  });
});
afterAll(async () => {
  await browser?.close();
  await svc?.close();
  rmSync(dir, { recursive: true, force: true });
});

type Shot = { total: number; nonBackground: number; orange: number; cyan: number; real: number; imagined: number; source: string };
/** Pixels of the WebGL canvas (preserveDrawingBuffer): not background, the real trajectory's orange, the imagined one's cyan; and the legend's counts. */
const shot = (page: Page) =>
  page.evaluate((): Shot => {
    const src = document.getElementById('scene') as HTMLCanvasElement;
    const c = document.createElement('canvas');
    c.width = src.width;
    c.height = src.height;
    const g = c.getContext('2d')!;
    g.drawImage(src, 0, 0);
    const d = g.getImageData(0, 0, c.width, c.height).data;
    let nonBackground = 0, orange = 0, cyan = 0;
    const near = (i: number, r: number, gg: number, b: number) => Math.abs(d[i]! - r) + Math.abs(d[i + 1]! - gg) + Math.abs(d[i + 2]! - b) < 60;
    for (let i = 0; i < d.length; i += 4) {
      if (!near(i, 0x1a, 0x1f, 0x26)) nonBackground++;
      if (near(i, 0xff, 0x9a, 0x3c)) orange++;
      if (near(i, 0x4c, 0xc9, 0xf0)) cyan++;
    }
    const text = (id: string) => document.getElementById(id)!.textContent ?? '';
    return { total: d.length / 4, nonBackground, orange, cyan, real: Number(text('real-count')), imagined: Number(text('imagined-count')), source: text('imagined-source') };
  });
const enoughFrames = (page: Page, timeout = 30_000) =>
  page.waitForFunction(() => {
    const s = (window as unknown as { __wmrl?: { real: unknown[]; imagined: unknown[]; renders: number } }).__wmrl;
    return !!s && s.real.length > 25 && s.imagined.length > 25 && s.renders > 5;
  }, undefined, { timeout });
/** A shot with both trajectories well under way: a new episode clears the trails, so a shot taken just as one begins is taken again. */
async function liveShot(page: Page, timeout?: number): Promise<Shot> {
  let live: Shot | undefined;
  for (let attempt = 0; attempt < 5 && !(live && live.real > 25); attempt++) {
    await enoughFrames(page, timeout);
    await page.waitForTimeout(100);
    live = await shot(page);
  }
  return live!;
}
/** The viewer's own count of what the scene draws (its test hook). */
const sceneStats = (page: Page) => page.evaluate(() => (window as unknown as { __wmrl: { sceneStats(): { realPaths: number; memberPaths: number } } }).__wmrl.sceneStats());

describe('viewer in headless Chromium', () => {
  it('during a live WMRL run draws the real trajectory and the world model\'s imagined one, a path per ensemble member', async () => {
    // Tiny pretraining: the run is at its first anchor episode within seconds.
    const run = svc.ctx.runs.start('wmrl-train', { robot: 'sim', updates: 50, prompts: 2, group: 2, imagine: 1, anchorGroups: 1, evalEpisodes: 5, calibrate: 0, pretrain: { bcEpisodes: 3, bcEpochs: 5, daggerRounds: 0, wmEpisodes: 4, wmEpochs: 2, wmMembers: 3, wmHidden: [32] } });
    // Stopped whatever happens, so that the next test finds the robot free.
    onTestFinished(async () => void (await svc.ctx.runs.stop(run.id)));
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${svc.url}/#token=${svc.token}`);
    const live = await liveShot(page, 60_000);
    const drawn = await sceneStats(page);
    expect(live.source).toBe('(world-model)');
    expect(live.real).toBeGreaterThan(25);
    expect(live.imagined).toBeGreaterThan(25);
    expect(live.nonBackground / live.total).toBeGreaterThan(0.05);
    // Which paths the scene draws is counted in the scene graph, not in pixels: this barely trained policy may hardly
    // move the tip and a tiny world model may predict success at once, so the paths can sit under the arm's tip
    // (the expert-session test below checks both trajectories' pixels).
    // The ensemble's spread: one drawn path per member (3), beside the one real path.
    expect(drawn).toEqual({ realPaths: 1, memberPaths: 3, urdfMeshes: 0 });
    // The run's status line and its first metrics point (the pretrained policy) reached the page.
    expect(await page.textContent('#status')).toMatch(/run wmrl-train running updates \d+\/50/);
    expect(await page.evaluate(() => (window as unknown as { __wmrl: { metrics: Array<{ step: number }> } }).__wmrl.metrics[0]?.step)).toBe(0);
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'viewer-wmrl.png') });
    expect((await svc.ctx.runs.stop(run.id)).state).toBe('stopped');
    await page.close();
    expect(errors).toEqual([]);
  });

  it('draws the scene with real and imagined trajectories during a live run, and its e-stop stops the robot', async () => {
    svc.ctx.runs.start('expert-session', { robot: 'sim', episodes: 50, imagined: true, seed: 0 });
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${svc.url}/#token=${svc.token}`);
    // Live: both trajectories' dot colours present.
    const live = await liveShot(page);
    expect(live.total).toBeGreaterThan(100_000);
    expect(live.nonBackground / live.total).toBeGreaterThan(0.05);
    expect(live.real).toBeGreaterThan(25);
    expect(live.imagined).toBeGreaterThan(25);
    expect(live.source).toBe('(sim-replay)');
    expect(live.orange).toBeGreaterThan(20); // the real trajectory's dots
    expect(live.cyan).toBeGreaterThan(20); // the imagined trajectory's dots

    // Playback of a finished episode: every frame of both rollouts drawn.
    await page.waitForFunction(() => (document.getElementById('episode') as HTMLSelectElement).options.length > 1, undefined, { timeout: 30_000 });
    const value = await page.evaluate(() => (document.getElementById('episode') as HTMLSelectElement).options[1]!.value);
    await page.selectOption('#episode', value);
    await page.waitForFunction(() => !(document.getElementById('scrub') as HTMLInputElement).disabled);
    await page.waitForTimeout(100);
    const [run, episode] = value.split('/');
    const frames = (await (await fetch(`${svc.url}/api/runs/${run}/rollouts/${episode}`)).json()) as { real: unknown[]; imagined: unknown[] };
    const played = await shot(page);
    expect(played.real).toBe(frames.real.length);
    expect(played.imagined).toBe(frames.imagined.length);
    expect(played.orange).toBeGreaterThan(20);
    expect(played.cyan).toBeGreaterThan(20);

    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'viewer.png') });

    // E-stop from the page; then, on the robot's side: latched, the robot refuses effort, no command applied.
    const host = svc.ctx.robots.get('sim')!;
    expect(host.sim.isStopped).toBe(false);
    await page.click('#estop');
    await page.waitForFunction(() => (window as unknown as { __wmrl: { estopReply: unknown } }).__wmrl.estopReply !== null);
    expect(await page.evaluate(() => (window as unknown as { __wmrl: { estopReply: { status: number } } }).__wmrl.estopReply.status)).toBe(200);
    expect(host.safety.isEstopped).toBe(true);
    expect(host.sim.isStopped).toBe(true);
    const applied = host.stepsApplied;
    await new Promise((r) => setTimeout(r, 500));
    expect(host.stepsApplied).toBe(applied);
    expect(svc.ctx.store.list({ status: 'recording' })).toHaveLength(0);
    await page.screenshot({ path: join(ARTIFACTS, 'viewer-estopped.png') });
    expect(errors).toEqual([]);
  });
  it("draws a robot that declares a URDF from it (urdf-loader), its joints driven by the robot's joint states", async () => {
    const urdfSvc = await startService({ dataDir: mkdtempSync(join(tmpdir(), 'wmrl-urdf-')), port: 0, foxglovePort: null, mqttPort: null, viewerDir: await ensureViewer(() => undefined), robots: [{ id: 'arm', task: 'reach', profile: 'nominal', urdf: 'sim/assets/reach/robot.urdf' }] });
    try {
      const run = urdfSvc.ctx.runs.start('expert-session', { robot: 'arm', episodes: 50, imagined: true, clone: false });
      const page = await browser.newPage();
      const errors: string[] = [];
      page.on('pageerror', (e) => errors.push(e.message));
      await page.goto(`${urdfSvc.url}/#token=${urdfSvc.token}`);
      type Urdf = { joints: Record<string, number>; links: Record<string, [number, number, number]> };
      type View = { urdf: Urdf | null; q: number[]; poses: number[]; stats: { urdfMeshes: number } };
      await enoughFrames(page);
      // One look at the page: the URDF as drawn and the real frame it was driven from.
      const view = await page.evaluate((): View => {
        const w = (window as unknown as { __wmrl: { urdf(): Urdf | null; shown: { q: number[]; poses: number[] }; sceneStats(): { urdfMeshes: number } } }).__wmrl;
        return { urdf: w.urdf(), q: w.shown.q, poses: w.shown.poses, stats: w.sceneStats() };
      });
      expect(view.urdf).not.toBeNull();
      // Every visual of the URDF drawn: base 1, upper 2, fore 3.
      expect(view.stats.urdfMeshes).toBe(6);
      // Joints driven by the frame's joint positions (the robot's joint order: shoulder, elbow)...
      expect(view.urdf!.joints.shoulder).toBeCloseTo(view.q[0]!, 6);
      expect(view.urdf!.joints.elbow).toBeCloseTo(view.q[1]!, 6);
      expect(Math.abs(view.q[0]!) + Math.abs(view.q[1]!)).toBeGreaterThan(0.05);
      // ... and its links where the sim's bodies of the same names are (a nominal robot: no observation noise on the joints).
      const scene = (await (await fetch(`${urdfSvc.url}/api/robots/arm/scene`)).json()) as { bodies: Array<{ name: string }> };
      for (const link of ['upper', 'fore']) {
        const b = scene.bodies.findIndex((x) => x.name === link);
        const at = view.poses.slice(7 * b, 7 * b + 3);
        view.urdf!.links[link]!.forEach((v, k) => expect(v, `${link} ${'xyz'[k]}`).toBeCloseTo(at[k]!, 4));
      }
      // Pixels: the robot is the URDF's (the sim's own arm is not drawn), so hiding the URDF robot changes the picture.
      expect((await urdfSvc.ctx.runs.stop(run.id)).state).toBe('stopped');
      const changed = await page.evaluate(async () => {
        const w = (window as unknown as { __wmrl: { showUrdf(v: boolean): void } }).__wmrl;
        const canvas = document.getElementById('scene') as HTMLCanvasElement;
        const frame = () => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
        const pixels = () => {
          const c = document.createElement('canvas');
          c.width = canvas.width;
          c.height = canvas.height;
          const g = c.getContext('2d')!;
          g.drawImage(canvas, 0, 0);
          return g.getImageData(0, 0, c.width, c.height).data;
        };
        await frame();
        const shown = pixels();
        w.showUrdf(false);
        await frame();
        const hidden = pixels();
        w.showUrdf(true);
        await frame();
        let n = 0;
        for (let i = 0; i < shown.length; i += 4) if (Math.abs(shown[i]! - hidden[i]!) + Math.abs(shown[i + 1]! - hidden[i + 1]!) + Math.abs(shown[i + 2]! - hidden[i + 2]!) > 30) n++;
        return n;
      });
      expect(changed).toBeGreaterThan(500);
      mkdirSync(ARTIFACTS, { recursive: true });
      await page.screenshot({ path: join(ARTIFACTS, 'viewer-urdf.png') });
      const live = await shot(page);
      expect(live.nonBackground / live.total).toBeGreaterThan(0.05);
      await page.close();
      expect(errors).toEqual([]);
    } finally {
      await urdfSvc.close();
    }
  });
});
