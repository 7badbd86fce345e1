// CPU image observations: deterministic, matching stored reference PNGs, and showing what the state says.
//
// Regenerate the references (after an intended change to the renderer or the scenes), then look at them:
//   UPDATE_REFS=1 npx vitest run tests/sim-render.test.ts
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { makeCustomEnv } from '../sim/custom.js';
import { decodePng, encodePng } from '../common/png.js';
import { makeEnv } from '../sim/registry.js';
import type { Env } from '../sim/types.js';

const REFS = join(process.cwd(), 'tests/fixtures/sim');
const SIZE = 64;

/** Fraction of pixels that differ at all; the renderer is exact on one machine, 1% slack covers libm ulps. */
function pixelDiff(a: Uint8Array, b: Uint8Array): number {
  let n = 0;
  for (let p = 0; p < a.length; p += 3) if (a[p] !== b[p] || a[p + 1] !== b[p + 1] || a[p + 2] !== b[p + 2]) n++;
  return n / (a.length / 3);
}

function checkRef(name: string, img: Uint8Array, w = SIZE, h = SIZE): void {
  const file = join(REFS, `${name}.png`);
  if (process.env.UPDATE_REFS === '1' || !existsSync(file)) {
    if (process.env.UPDATE_REFS !== '1') throw new Error(`missing reference ${file}; run UPDATE_REFS=1 npx vitest run tests/sim-render.test.ts`);
    mkdirSync(REFS, { recursive: true });
    writeFileSync(file, encodePng(img, w, h));
  }
  const ref = decodePng(readFileSync(file));
  expect([ref.width, ref.height]).toEqual([w, h]);
  expect(pixelDiff(img, ref.rgb), `${name} differs from ${file}`).toBeLessThanOrEqual(0.01);
}

async function episodeFrames(env: Env, seed: number, steps: number): Promise<Uint8Array[]> {
  let obs = env.reset(seed);
  const frames = [obs.image!];
  const expert = env.expert();
  for (let k = 0; k < steps; k++) obs = env.step(expert.act(obs)).obs;
  frames.push(obs.image!);
  return frames;
}

describe('CPU renderer', () => {
  for (const task of ['reach', 'push', 'pick']) {
    it(`${task}: frames match the stored references and are deterministic`, async () => {
      const env = await makeEnv({ task, image: SIZE });
      try {
        const [first, later] = await episodeFrames(env, 3, 25);
        checkRef(`${task}_seed3_t0`, first!);
        checkRef(`${task}_seed3_t25`, later!);
        const again = await episodeFrames(env, 3, 25);
        expect(Buffer.compare(Buffer.from(again[1]!), Buffer.from(later!))).toBe(0);
        expect(pixelDiff(first!, later!)).toBeGreaterThan(0.003); // the arm moved
      } finally {
        env.dispose();
      }
    });
  }

  it('the named reach target appears where the camera projects it, in its colour', async () => {
    const env = await makeEnv({ task: 'reach', image: SIZE });
    try {
      const obs = env.reset(3);
      const goal = ['red', 'green', 'blue'].findIndex((c) => obs.instruction.includes(c));
      const [x, y] = [obs.state[6 + 2 * goal]!, obs.state[7 + 2 * goal]!];
      // `top` camera: at z = 1.1 looking down, fovy 45 deg; image x = world x, image up = world y
      const t = Math.tan((22.5 * Math.PI) / 180) * (1.1 - 0.005);
      const i = Math.floor(((x / t + 1) / 2) * SIZE);
      const j = Math.floor(((1 - y / t) / 2) * SIZE);
      const p = 3 * (j * SIZE + i);
      const rgb = [obs.image![p]!, obs.image![p + 1]!, obs.image![p + 2]!];
      expect(rgb.indexOf(Math.max(...rgb))).toBe(goal);
    } finally {
      env.dispose();
    }
  });

  it('custom robot renders from its own camera (side view of a vertical arm)', async () => {
    const env = await makeCustomEnv({ robot: 'tests/fixtures/sim/custom/robot.yaml', image: SIZE });
    try {
      checkRef('custom_side_t0', env.reset(0).image!);
    } finally {
      env.dispose();
    }
  });

  it('PNG encoder round-trips', () => {
    const img = Uint8Array.from({ length: 5 * 3 * 3 }, (_, k) => (k * 37) % 256);
    expect(decodePng(encodePng(img, 5, 3))).toEqual({ width: 5, height: 3, rgb: img });
  });
});
