// Outcome world models: the ensemble regressor learns online from executed results (lower error
// on unseen proposals than the mean, more member disagreement far from its data); hashed n-grams
// put similar code near each other; the LLM judge adapter speaks the OpenAI chat API to a local
// fake server (a real LLM cannot run here), averages its samples and marks bad answers unscored.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LlmJudge, judgeScorer, parseScore } from '../autoresearch/llm-judge.js';
import { EnsembleOutcomeModel, hashedNgrams, structuredDim, structuredFeatures } from '../autoresearch/outcome-model.js';
import type { Field, Proposal } from '../autoresearch/task.js';
import { Rng } from '../nn/rng.js';

const FIELDS: Field[] = [
  { name: 'a', choices: [0, 1, 2, 3, 4, 5, 6, 7] },
  { name: 'b', choices: ['x', 'y', 'z'] },
];
/** A smooth known outcome over the space, with noise. */
const truth = (p: Proposal) => Math.sin(Number(p.a) / 2) + (p.b === 'y' ? 0.5 : 0);

describe('ensemble outcome model', () => {
  it('features: one-hot plus ordinal position; an unknown choice names its field', () => {
    expect(structuredDim(FIELDS)).toBe(8 + 1 + 3);
    const f = structuredFeatures(FIELDS, { a: 7, b: 'z' });
    expect(Array.from(f)).toEqual([0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 1]);
    expect(() => structuredFeatures(FIELDS, { a: 9, b: 'z' })).toThrow(/proposal\.a/);
  });

  it('hashed n-grams: near-identical code is closer than unrelated code', () => {
    const a = hashedNgrams('for (let i = 0; i < n; i++) sum += x[i];');
    const b = hashedNgrams('for (let j = 0; j < n; j++) sum += x[j];');
    const c = hashedNgrams('SELECT name FROM users WHERE age > 30');
    const dot = (u: Float32Array, v: Float32Array) => u.reduce((s, x, i) => s + x * v[i]!, 0);
    expect(dot(a, a)).toBeCloseTo(1, 5);
    expect(dot(a, b)).toBeGreaterThan(dot(a, c) + 0.3);
  });

  it('trained online, it predicts unseen proposals better than the mean and is less sure far from data', async () => {
    const rng = new Rng(1);
    const all: Proposal[] = [];
    for (const a of FIELDS[0]!.choices) for (const b of FIELDS[1]!.choices) all.push({ a, b });
    const seen = all.filter((p) => p.b !== 'z' || Number(p.a) < 4);
    const unseen = all.filter((p) => p.b === 'z' && Number(p.a) >= 5);
    const model = new EnsembleOutcomeModel(structuredDim(FIELDS), { members: 5, hidden: [32, 32], lr: 3e-3, batch: 32, stepsPerFit: 150, bufferCap: 1000, seed: 3 });
    try {
      for (let round = 0; round < 4; round++) {
        const batch = Array.from({ length: 30 }, () => seen[rng.int(seen.length)]!);
        model.observe(batch.map((p) => structuredFeatures(FIELDS, p)), batch.map((p) => truth(p) + 0.05 * rng.normal()));
        await model.fit();
      }
      expect(model.size).toBe(120);
      const test = all.filter((p) => p.b !== 'z');
      const pred = await model.predict(test.map((p) => structuredFeatures(FIELDS, p)));
      const mu = test.reduce((s, p) => s + truth(p), 0) / test.length;
      const mse = pred.reduce((s, q, i) => s + (q.mean - truth(test[i]!)) ** 2, 0) / test.length;
      const base = test.reduce((s, p) => s + (mu - truth(p)) ** 2, 0) / test.length;
      expect(mse).toBeLessThan(0.25 * base);
      const vIn = (await model.predict(seen.map((p) => structuredFeatures(FIELDS, p)))).reduce((s, q) => s + q.variance, 0) / seen.length;
      const vOut = (await model.predict(unseen.map((p) => structuredFeatures(FIELDS, p)))).reduce((s, q) => s + q.variance, 0) / unseen.length;
      expect(vOut).toBeGreaterThan(vIn);
    } finally {
      await model.release();
    }
  }, 60_000);
});

describe('LLM judge over an OpenAI-compatible API (local fake server)', () => {
  let server: Server;
  let base = '';
  const bodies: Array<{ body: Record<string, unknown>; auth: string | undefined; url: string | undefined }> = [];
  let answers: string[] = [];
  let next = 0;
  let status = 200;
  const read = async (req: IncomingMessage) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    return JSON.parse(Buffer.concat(chunks).toString()) as Record<string, unknown>;
  };
  beforeAll(async () => {
    server = createServer(async (req, res) => {
      const body = await read(req);
      bodies.push({ body, auth: req.headers.authorization, url: req.url });
      if (status !== 200) { res.writeHead(status).end('overloaded'); return; }
      const content = answers[next++ % answers.length]!;
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({
        id: 'chatcmpl-1', object: 'chat.completion', model: body.model,
        choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content } }],
      }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('parses numbers out of answers', () => {
    expect(parseScore('{"score": 0.72}')).toBe(0.72);
    expect(parseScore('Expected score: -1.5e-1, roughly')).toBe(-0.15);
    expect(parseScore('no idea')).toBeNull();
  });

  it('several samples → mean and variance, over the chat completions route', async () => {
    answers = ['0.6', 'Score: 0.8', '{"score": 0.7}', 'I think 0.9'];
    next = 0;
    bodies.length = 0;
    const judge = new LlmJudge({ baseUrl: base, model: 'judge-7b', apiKey: 'k1', system: 'You predict experiment outcomes.', samples: 4 });
    const j = await judge.judge('hidden=16 layers=2 lr=0.01');
    expect(j!.mean).toBeCloseTo(0.75, 10);
    expect(j!.variance).toBeCloseTo(((0.15 ** 2) * 2 + (0.05 ** 2) * 2) / 3, 10);
    expect(bodies).toHaveLength(4);
    expect(bodies[0]).toMatchObject({ url: '/v1/chat/completions', auth: 'Bearer k1', body: { model: 'judge-7b', temperature: 0.7 } });
    const msgs = bodies[0]!.body.messages as Array<{ role: string; content: string }>;
    expect(msgs[0]).toEqual({ role: 'system', content: 'You predict experiment outcomes.' });
    expect(msgs[1]!.content).toContain('hidden=16 layers=2 lr=0.01');
  });

  it('as a world-model scorer: a proposal with no usable answer is unscored (null), not 0', async () => {
    answers = ['0.5', 'cannot say'];
    next = 0;
    const judge = new LlmJudge({ baseUrl: base, model: 'm', system: 's', samples: 1 });
    const scorer = judgeScorer<string>(judge, (r) => r);
    const [g] = await scorer.score([['first', 'second']]);
    expect(g!.scores).toEqual([0.5, null]);
  });

  it('the judge being down rejects (an error to handle), it does not invent scores', async () => {
    status = 503;
    try {
      const judge = new LlmJudge({ baseUrl: base, model: 'm', system: 's', samples: 2 });
      await expect(judge.judge('x')).rejects.toThrow(/HTTP 503/);
    } finally {
      status = 200;
    }
  });
});
