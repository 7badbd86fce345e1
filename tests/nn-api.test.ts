// Build-time shape errors, parameter files, and the error paths a user meets.
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import * as nn from '../nn/index.js';

const dir = mkdtempSync(join(tmpdir(), 'nn-api-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('shape errors are caught when the graph is built, naming the op and the shapes', () => {
  const g = new nn.Graph();
  const a = g.input('a', ['batch', 3]);
  const b = g.input('b', [4, 5]);
  it.each([
    ['matmul', () => nn.matmul(a, b), /matmul: inner dimensions differ \(3 vs 4\) \(shapes \[batch, 3\], \[4, 5\]\)/],
    ['add', () => nn.add(a, g.input('c', [4])), /add: cannot broadcast dimension 3 with 4 .*\[batch, 3\], \[4\]/],
    ['reshape', () => nn.reshape(b, [3, 7]), /reshape: cannot reshape \[4, 5\] to \[3, 7\]/],
    ['conv2d', () => nn.conv2d(g.input('img', [1, 3, 8, 8]), g.input('w', [4, 2, 3, 3])), /conv2d: .*matching C \(shapes \[1, 3, 8, 8\], \[4, 2, 3, 3\]\)/],
    ['slice', () => nn.slice(b, 1, 2, 9), /slice: range \[2, 9\) out of bounds for axis 1 of size 5/],
    ['gather', () => nn.gather(b, a), /gather: indices must be int64, got float32/],
    ['grad', () => nn.grad(a, [a]), /grad: loss must be a scalar, got \[batch, 3\]/],
    ['Linear', () => new nn.Linear(new nn.ParamStore(), 'fc', 7, 2).forward(a), /fc \(Linear\): expects last dim 7 \(shapes \[batch, 3\]\)/],
  ])('%s', (_n, f, msg) => {
    let err: unknown;
    try {
      f();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(nn.ShapeError);
    expect((err as Error).message).toMatch(msg);
  });

  it('a symbolic batch broadcasts only against itself or 1', () => {
    expect(nn.add(a, g.input('row', [1, 3])).shape).toEqual(['batch', 3]);
    expect(() => nn.add(a, g.input('fixed', [8, 3]))).toThrow(/cannot broadcast dimension batch with 8/);
  });
});

describe('sessions', () => {
  it('let idle pool threads sleep rather than spin, and a two-thread program computes what a one-thread one does', async () => {
    expect(nn.sessionOptions({ threads: 2 })).toMatchObject({ intraOpNumThreads: 2, extra: { session: { intra_op: { allow_spinning: '0' } } } });
    const g = new nn.Graph();
    const x = g.input('x', ['n', 64]);
    const w = g.constant(Array.from({ length: 64 * 64 }, (_, i) => Math.sin(i)), [64, 64]);
    const y = nn.tanh(nn.matmul(nn.tanh(nn.matmul(x, w)), w));
    const rng = new nn.Rng(3);
    const feed = { x: nn.tensor(Float32Array.from({ length: 512 * 64 }, () => rng.normal()), [512, 64]) };
    const run = async (threads: number) => {
      const p = await nn.Program.fromSpec({ inputs: [{ name: 'x', tensor: x }], outputs: [{ name: 'y', tensor: y }] }, { threads });
      try {
        return Float32Array.from(nn.f32((await p.run(feed)).y));
      } finally {
        await p.release();
      }
    };
    expect(await run(2)).toEqual(await run(1));
  });
});

describe('parameter files', () => {
  const makeStore = () => {
    const s = new nn.ParamStore(4);
    new nn.MLP(s, 'pi', { sizes: [3, 5, 2] });
    return s;
  };

  it('round-trips values and metadata through one safetensors file, leaving no temp file', () => {
    const s = makeStore();
    const path = join(dir, 'p.safetensors');
    s.save(path, { policy_version: '3' });
    const t = new nn.ParamStore(99);
    new nn.MLP(t, 'pi', { sizes: [3, 5, 2] });
    expect(t.get('pi.l0.weight').data).not.toEqual(s.get('pi.l0.weight').data);
    expect(t.load(path)).toEqual({ policy_version: '3' });
    for (const n of s.names()) expect(t.get(n).data).toEqual(s.get(n).data);
    expect(readdirSync(dir).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  });

  it('refuses a file for another model, naming what differs, and changes nothing', () => {
    const s = makeStore();
    const path = join(dir, 'q.safetensors');
    s.save(path);
    const t = new nn.ParamStore(1);
    new nn.MLP(t, 'pi', { sizes: [3, 6, 2] });
    const before = Array.from(t.get('pi.l0.bias').data);
    expect(() => t.load(path)).toThrow(/'pi\.l0\.weight' has shape \[3,5\], model expects \[3,6\]/);
    expect(Array.from(t.get('pi.l0.bias').data)).toEqual(before);
    const u = new nn.ParamStore(1);
    new nn.MLP(u, 'other', { sizes: [3, 5, 2] });
    expect(() => u.load(path)).toThrow(/missing: \[other\.l0\.weight.*unexpected: \[pi\.l0\.weight/);
  });

  it('rejects truncated or garbage files with a clear error (property test over random corruptions)', () => {
    const s = makeStore();
    const path = join(dir, 'r.safetensors');
    s.save(path);
    const good = readFileSync(path);
    fc.assert(
      fc.property(fc.integer({ min: 0, max: good.length - 1 }), fc.uint8Array({ maxLength: 64 }), (cut, junk) => {
        const bad = join(dir, 'bad.safetensors');
        writeFileSync(bad, Buffer.concat([good.subarray(0, cut), Buffer.from(junk)]));
        const t = makeStore();
        try {
          t.load(bad);
          return true; // junk can, rarely, re-complete a valid file
        } catch (e) {
          return /bad\.safetensors/.test((e as Error).message);
        }
      }),
      { numRuns: 300, seed: 17 },
    );
  });

  it('a failed save leaves the previous file intact', () => {
    const s = makeStore();
    const path = join(dir, 's.safetensors');
    s.save(path);
    const before = readFileSync(path);
    expect(() => s.save(join(dir, 'no-such-dir', 's.safetensors'))).toThrow(/ENOENT/);
    s.get('pi.l0.bias').data.fill(7);
    expect(() => nn.writeFileAtomic(path, [new Uint8Array(4), null as unknown as Uint8Array])).toThrow();
    expect(readFileSync(path)).toEqual(before);
  });
});
