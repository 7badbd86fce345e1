// Episode layouts shared by the tasks: the colour names and seeded spreading of objects on the table.
import type { Rng } from '../rng.js';

export const COLOURS = ['red', 'green', 'blue'] as const;

/** Places n points in the annulus rMin..rMax, at least `sep` apart (rejection sampling, seeded). */
export function spreadPoints(rng: Rng, n: number, rMin: number, rMax: number, sep: number, avoid: Array<[number, number]> = []): Array<[number, number]> {
  const pts: Array<[number, number]> = [];
  for (let tries = 0; pts.length < n; tries++) {
    if (tries > 10_000) throw new Error('spreadPoints: no room');
    const r = Math.sqrt(rng.uniform(rMin * rMin, rMax * rMax));
    const a = rng.uniform(-Math.PI, Math.PI);
    const p: [number, number] = [r * Math.cos(a), r * Math.sin(a)];
    if ([...pts, ...avoid].every((o) => Math.hypot(o[0] - p[0], o[1] - p[1]) >= sep)) pts.push(p);
  }
  return pts;
}
