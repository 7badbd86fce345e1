// Outcome world models: the ensemble regressor learns online from executed results (lower error
// on unseen proposals than the mean, more member disagreement far from its data); hashed n-grams
// put similar code near each other; the LLM judge adapter speaks the OpenAI chat API to a local
// fake server (a real LLM cannot run here), averages its samples and marks bad answers unscored.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LlmJudge, judgeScorer, parseScore } from '../autoresearch/llm-judge.js';
import { EnsembleOutcomeModel, GpOutcomeModel, DEFAULT_GP_CONFIG, cholesky, hashedNgrams, ordinalDim, ordinalFeatures, structuredDim, structuredFeatures } from '../autoresearch/outcome-model.js';
import { OutcomeScorer } from '../autoresearch/scorers.js';
import type { ResearchRollout } from '../autoresearch/agent.js';
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

describe('gaussian-process outcome model', () => {
  const all: Proposal[] = [];
  for (const a of FIELDS[0]!.choices) for (const b of FIELDS[1]!.choices) all.push({ a, b });
  /** An additive part plus a pairwise interaction (a high a helps only with b = 'z'). */
  const interacting = (p: Proposal) => 0.3 * Math.sin(Number(p.a) / 2) + (p.b === 'y' ? 0.3 : 0) + (p.b === 'z' && Number(p.a) >= 5 ? 0.8 : 0);
  const fitOn = async (ps: Proposal[], f: (p: Proposal) => number, cfg = DEFAULT_GP_CONFIG, noise = 0.02, seed = 5) => {
    const rng = new Rng(seed);
    const m = new GpOutcomeModel(ordinalDim(FIELDS), cfg);
    m.observe(ps.map((p) => ordinalFeatures(FIELDS, p)), ps.map((p) => f(p) + noise * rng.normal()));
    await m.fit();
    return m;
  };
  const mseOn = async (m: GpOutcomeModel, ps: Proposal[], f: (p: Proposal) => number) =>
    (await m.predict(ps.map((p) => ordinalFeatures(FIELDS, p)))).reduce((s, q, i) => s + (q.mean - f(ps[i]!)) ** 2, 0) / ps.length;

  it('cholesky factors a positive-definite matrix and rejects one that is not', () => {
    const a = Float64Array.from([4, 2, 2, 3]);
    expect(cholesky(a, 2)).toBe(true);
    expect(Array.from(a).map((x) => +x.toFixed(6))).toEqual([2, 0, 1, +Math.sqrt(2).toFixed(6)]);
    expect(cholesky(Float64Array.from([1, 2, 2, 1]), 2)).toBe(false);
  });

  it('ordinal features: one-hot plus a thermometer, so neighbouring choices are closer than far ones', () => {
    expect(ordinalDim(FIELDS)).toBe(8 + 7 + 3);
    const f = ordinalFeatures(FIELDS, { a: 2, b: 'z' });
    const s = 1 / Math.sqrt(7);
    expect(Array.from(f).map((x) => +x.toFixed(6))).toEqual([0, 0, 1, 0, 0, 0, 0, 0, s, s, 0, 0, 0, 0, 0, 0, 0, 1].map((x) => +x.toFixed(6)));
    const dist = (u: Float32Array, v: Float32Array) => u.reduce((t, x, i) => t + (x - v[i]!) ** 2, 0);
    const x3 = ordinalFeatures(FIELDS, { a: 3, b: 'x' });
    expect(dist(x3, ordinalFeatures(FIELDS, { a: 4, b: 'x' }))).toBeLessThan(dist(x3, ordinalFeatures(FIELDS, { a: 7, b: 'x' })));
    expect(() => ordinalFeatures(FIELDS, { a: 2, b: 'w' })).toThrow(/proposal\.b/);
  });

  it('learns an interaction from few results: the pairwise term is chosen and beats the additive-only kernel', async () => {
    const rng = new Rng(2);
    const train = rng.shuffle([...all]).slice(0, 16);
    const full = await fitOn(train, interacting);
    const additive = await fitOn(train, interacting, { ...DEFAULT_GP_CONFIG, pairwise: [0] });
    expect(full.hyperparameters.b).toBeGreaterThan(0);
    const eFull = await mseOn(full, all, interacting);
    const eAdd = await mseOn(additive, all, interacting);
    const mu = all.reduce((t, p) => t + interacting(p), 0) / all.length;
    const base = all.reduce((t, p) => t + (interacting(p) - mu) ** 2, 0) / all.length;
    expect(eFull).toBeLessThan(0.8 * eAdd);
    expect(eFull).toBeLessThan(0.3 * base);
  });

  it('is unsure far from its data', async () => {
    const seen = all.filter((p) => p.b !== 'z');
    const m = await fitOn(seen, interacting);
    const pred = async (ps: Proposal[]) => m.predict(ps.map((p) => ordinalFeatures(FIELDS, p)));
    const vIn = (await pred(seen)).reduce((t, q) => t + q.variance, 0) / seen.length;
    const unseen = all.filter((p) => p.b === 'z');
    expect((await pred(unseen)).reduce((t, q) => t + q.variance, 0) / unseen.length).toBeGreaterThan(4 * vIn);
  });

  it('thompson draws: identical rows agree, and draws scatter around the mean with the predicted variance', async () => {
    const train = new Rng(3).shuffle([...all]).slice(0, 10);
    const m = await fitOn(train, interacting);
    const rows = [{ a: 7, b: 'z' }, { a: 7, b: 'z' }, { a: 0, b: 'x' }].map((p) => ordinalFeatures(FIELDS, p));
    const [p0] = await m.predict(rows);
    const rng = new Rng(9);
    const draws: number[] = [];
    for (let i = 0; i < 400; i++) {
      const d = await m.sample(rows, rng);
      expect(d[0]).toBeCloseTo(d[1]!, 3);
      draws.push(d[0]!);
    }
    const mean = draws.reduce((t, x) => t + x, 0) / draws.length;
    const v = draws.reduce((t, x) => t + (x - mean) ** 2, 0) / draws.length;
    expect(Math.abs(mean - p0!.mean)).toBeLessThan(4 * Math.sqrt(p0!.variance / draws.length));
    expect(v / p0!.variance).toBeGreaterThan(0.75);
    expect(v / p0!.variance).toBeLessThan(1.3);
  });

  it('the outcome scorer: the mean, or with thompson one draw per step (one proposal, one score; fresh draws across steps)', async () => {
    const m = await fitOn(new Rng(6).shuffle([...all]).slice(0, 8), interacting);
    const rollout = (p: Proposal): ResearchRollout => ({ context: 'c', proposal: p, choice: [], seed: 0 });
    const feats = (r: ResearchRollout) => ordinalFeatures(FIELDS, r.proposal);
    const group = [rollout({ a: 7, b: 'z' }), rollout({ a: 1, b: 'y' }), rollout({ a: 7, b: 'z' })];
    const pred = await m.predict(group.map(feats));
    const [plain] = await new OutcomeScorer(m, feats).score([group]);
    expect(plain!.scores).toEqual(pred.map((q) => q.mean));
    const ts = new OutcomeScorer(m, feats, new Rng(1));
    const [d1] = await ts.score([group]);
    const [d2] = await ts.score([group]);
    expect(d1!.scores[0]).toBeCloseTo(d1!.scores[2]!, 3);
    expect(d1!.scores[0]).not.toBeCloseTo(d2!.scores[0]!, 6);
    expect(d1!.variance).toEqual(pred.map((q) => q.variance));
    // Over many steps the draws scatter around the mean.
    let sum = 0;
    for (let i = 0; i < 200; i++) sum += (await ts.score([group]))[0]!.scores[1]!;
    expect(Math.abs(sum / 200 - pred[1]!.mean)).toBeLessThan(4 * Math.sqrt(pred[1]!.variance / 200));
    // The MLP ensemble has no posterior to draw from: asking for Thompson draws from it is an error.
    const ens = new EnsembleOutcomeModel(ordinalDim(FIELDS));
    expect(() => new OutcomeScorer(ens, feats, new Rng(1))).toThrow(/thompson/);
    await ens.release();
  });
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
