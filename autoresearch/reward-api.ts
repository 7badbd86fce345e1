// The reward API for external RL trainers, as one fastify plugin with TypeBox schemas:
//
//   POST /get_reward  OpenRLHF's remote reward model format: {query, prompts, labels} →
//                     {rewards, scores, extra_logs}; `query[i]` is prompt + response.
//   POST /grade       {items: [{prompt, response}]} → {items: [{score, source, worldModel, reason}], stats}
//   GET  /health      {status, capacity, busy, queueLength, inFlight, calibrated, observed, isolation}
//
// The service (reward-service.ts) groups items by prompt into GRPO groups, scores them with the
// corrected outcome world model and executes anchor groups in the sandbox pool. OpenRLHF's format
// has no null: an excluded item (its execution timed out or crashed) gets its group's mean reward,
// which gives it zero advantage under group normalization, and is marked `excluded: 1` in
// extra_logs; /grade returns null for it. The service registers the plugin under /reward
// (server/app.ts), behind its access token; `serveRewardApi` serves it alone, at the root, behind
// the token it is given. The token rides in `Authorization: Bearer <token>` or, for trainers that
// send no headers (OpenRLHF's --remote_rm_url), in `?token=`. A full queue is answered 503 at once.
import { randomBytes } from 'node:crypto';
import { Type, type Static } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox, TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyError } from 'fastify';
import { BearerAuth } from '../common/bearer-auth.js';
import { HostPolicy } from '../common/host-policy.js';
import { RewardQueueFull, type GradedItem, type RewardService } from './reward-service.js';

const MAX_ITEMS = 4096;
const Text = Type.String({ maxLength: 256 * 1024 });

export const GetRewardRequest = Type.Object(
  {
    query: Type.Array(Text, { minItems: 1, maxItems: MAX_ITEMS, description: 'prompt + response, one per sample' }),
    prompts: Type.Array(Text, { minItems: 1, maxItems: MAX_ITEMS, description: 'the prompt of each sample; samples with the same prompt form one GRPO group' }),
    labels: Type.Optional(Type.Array(Type.Union([Type.String(), Type.Null()]), { maxItems: MAX_ITEMS, description: 'ground truth per sample (unused by research tasks)' })),
  },
  // OpenRLHF versions add keys over time; unknown ones are ignored here, not refused.
  { additionalProperties: true },
);
export type GetRewardRequest = Static<typeof GetRewardRequest>;

const PerItem = (description: string) => Type.Array(Type.Number(), { description });
export const GetRewardResponse = Type.Object({
  rewards: Type.Array(Type.Number()),
  scores: Type.Array(Type.Number()),
  extra_logs: Type.Object({
    real: PerItem('1: scored by its real execution in the sandbox'),
    pending: PerItem('1: its real execution was still running at the deadline; scored by the calibrated world model'),
    excluded: PerItem('1: its real execution timed out or crashed; reward = its group mean (zero advantage)'),
    invalid: PerItem('1: the response is not a valid proposal; reward = the invalid-proposal penalty'),
    world_model: PerItem('the calibrated world-model score (the reward itself where the item is invalid)'),
    anchor_weight: PerItem('the inverse-variance up-weight of anchor groups now'),
    bias_reduction: PerItem('held-out reduction of the squared residual by the debias map (0 before a map)'),
    calibrated: PerItem('1 once the debias map is fitted'),
  }),
});
export type GetRewardResponse = Static<typeof GetRewardResponse>;

export const GradeRequest = Type.Object(
  { items: Type.Array(Type.Object({ prompt: Text, response: Text }, { additionalProperties: false }), { minItems: 1, maxItems: MAX_ITEMS }) },
  { additionalProperties: false },
);
export type GradeRequest = Static<typeof GradeRequest>;

const Nullable = <T extends ReturnType<typeof Type.Number>>(t: T) => Type.Union([t, Type.Null()]);
export const GradeResponse = Type.Object({
  items: Type.Array(Type.Object({
    score: Nullable(Type.Number()),
    source: Type.Union(['real', 'wm', 'pending', 'excluded', 'invalid'].map((s) => Type.Literal(s))),
    worldModel: Nullable(Type.Number()),
    reason: Type.Union([Type.String(), Type.Null()]),
  })),
  stats: Type.Object({
    groups: Type.Integer(), anchorGroups: Type.Integer(), realItems: Type.Integer(), pendingItems: Type.Integer(),
    excludedItems: Type.Integer(), invalidItems: Type.Integer(), calibrated: Type.Boolean(), biasReduction: Nullable(Type.Number()),
    anchorWeight: Type.Number(), disagreement: Nullable(Type.Number()), realizedAnchorFraction: Type.Number(), realExecutions: Type.Integer(), inFlight: Type.Integer(),
  }),
});

export const RewardHealth = Type.Object({
  status: Type.Literal('ok'),
  capacity: Type.Integer({ description: 'sandbox slots' }),
  busy: Type.Integer(),
  queueLength: Type.Integer(),
  inFlight: Type.Integer({ description: 'anchor groups executing' }),
  pendingRequests: Type.Integer({ description: 'requests being graded' }),
  maxPendingRequests: Type.Integer({ description: 'requests graded at once at most; more are answered 503 WMRL_QUEUE_FULL' }),
  calibrated: Type.Boolean(),
  observed: Type.Integer({ description: 'executed results the world model has learned from' }),
  isolation: Type.Union([Type.Object({ network: Type.Boolean(), pidNamespace: Type.Boolean(), rlimits: Type.Boolean() }), Type.Null()]),
});

const ErrorBody = Type.Object({ statusCode: Type.Integer(), code: Type.String(), message: Type.String(), errorId: Type.Optional(Type.String()) });
const replies = <T extends Parameters<typeof Type.Object>[0]>(ok: ReturnType<typeof Type.Object<T>>) => ({ 200: ok, 400: ErrorBody, 401: ErrorBody, 429: ErrorBody, 500: ErrorBody, 503: ErrorBody });
const secured = { security: [{ bearer: [] }] };
/** `?token=` for trainers that cannot send headers; nothing else rides in the query. */
const TokenQuery = Type.Object({ token: Type.Optional(Type.String({ maxLength: 256 })) }, { additionalProperties: false });

class BadRequest extends Error {}

/** "body.prompts: must NOT have fewer than 1 items", one clause per violation. */
function validationMessage(e: FastifyError): string {
  const ctx = e.validationContext ?? 'request';
  return (e.validation ?? []).map((v) => {
    const path = `${ctx}${v.instancePath.replace(/\//g, '.')}`;
    const p = v.params as Record<string, unknown>;
    if (v.keyword === 'required') return `${path}.${String(p.missingProperty)}: is required`;
    if (v.keyword === 'additionalProperties') return `${path}.${String(p.additionalProperty)}: is not a known field`;
    return `${path}: ${v.message ?? v.keyword}`;
  }).join('; ');
}

/** The response part of an OpenRLHF query: what follows its prompt (the whole query when it does not start with it). */
const responseOf = (query: string, prompt: string): string => (query.startsWith(prompt) ? query.slice(prompt.length) : query);

/** OpenRLHF's reply from graded items: excluded items get their prompt group's mean reward. */
function openRlhfReply(prompts: readonly string[], graded: readonly GradedItem[], stats: { anchorWeight: number; biasReduction: number | null; calibrated: boolean }): GetRewardResponse {
  const sums = new Map<string, { s: number; n: number }>();
  graded.forEach((g, i) => {
    if (g.score === null) return;
    const e = sums.get(prompts[i]!) ?? { s: 0, n: 0 };
    sums.set(prompts[i]!, { s: e.s + g.score, n: e.n + 1 });
  });
  const rewards = graded.map((g, i) => {
    if (g.score !== null) return g.score;
    const e = sums.get(prompts[i]!);
    return e ? e.s / e.n : (g.worldModel ?? 0);
  });
  const flag = (s: GradedItem['source']) => graded.map((g) => (g.source === s ? 1 : 0));
  const n = graded.length;
  return {
    rewards,
    scores: rewards,
    extra_logs: {
      real: flag('real'),
      pending: flag('pending'),
      excluded: flag('excluded'),
      invalid: flag('invalid'),
      world_model: graded.map((g, i) => g.worldModel ?? rewards[i]!),
      anchor_weight: Array(n).fill(stats.anchorWeight),
      bias_reduction: Array(n).fill(stats.biasReduction ?? 0),
      calibrated: Array(n).fill(stats.calibrated ? 1 : 0),
    },
  };
}

/** Checks a request's bearer token; throws an error with a 4xx `statusCode` and a WMRL_ `code` to refuse it (the service's Auth, BearerAuth). */
export interface RewardAuth {
  check(authorization: string | undefined, address: string): void;
}

export interface RewardPluginOptions {
  /** Checks the bearer token of /get_reward and /grade (with its failure rate limit); null: no token asked. */
  auth: RewardAuth | null;
}

/** A refusal from the token check (or the service's other ApiErrors): its own status and stable code. */
const isCodedRefusal = (e: unknown): e is { statusCode: number; code: string; message: string } => {
  const c = e as { statusCode?: unknown; code?: unknown };
  return typeof c.statusCode === 'number' && c.statusCode >= 400 && c.statusCode < 500 && typeof c.code === 'string' && c.code.startsWith('WMRL_');
};

export const rewardPlugin = (service: RewardService, o: RewardPluginOptions): FastifyPluginAsyncTypebox => async (app) => {
  // Inside this plugin only: the service's error shape, so the API reads the same served alone or under /reward.
  app.setErrorHandler((err: FastifyError, req, reply) => {
    if (isCodedRefusal(err)) return reply.status(err.statusCode).send({ statusCode: err.statusCode, code: err.code, message: err.message });
    if (err instanceof RewardQueueFull) return reply.status(503).header('retry-after', '1').send({ statusCode: 503, code: 'WMRL_QUEUE_FULL', message: err.message });
    if (err.validation) return reply.status(400).send({ statusCode: 400, code: 'WMRL_VALIDATION', message: validationMessage(err) });
    if (err instanceof BadRequest) return reply.status(400).send({ statusCode: 400, code: 'WMRL_VALIDATION', message: err.message });
    if (err.statusCode && err.statusCode < 500) return reply.status(err.statusCode).send({ statusCode: err.statusCode, code: 'WMRL_VALIDATION', message: err.message });
    // The full message to the owner's error sink; the caller gets an id to quote, not the service's internals.
    const errorId = randomBytes(6).toString('hex');
    service.opts.onError(new Error(`[error ${errorId}] reward API ${req.method} ${req.url.split('?')[0]}: ${err.message}`, { cause: err }));
    return reply.status(500).send({ statusCode: 500, code: 'WMRL_INTERNAL', message: `internal error ${errorId}: the service's log has the details`, errorId });
  });
  const auth = o.auth;
  const authorized = auth
    ? async (req: { headers: { authorization?: string }; query: unknown; ip: string }) => {
        const q = (req.query ?? {}) as { token?: string };
        auth.check(req.headers.authorization ?? (q.token !== undefined ? `Bearer ${q.token}` : undefined), req.ip);
      }
    : async () => {};

  app.post('/get_reward', { onRequest: authorized, schema: { tags: ['reward'], summary: 'OpenRLHF remote reward model: rewards for prompt + response samples', ...secured, querystring: TokenQuery, body: GetRewardRequest, response: replies(GetRewardResponse) } }, async (req) => {
    const { query, prompts, labels } = req.body;
    if (prompts.length !== query.length) throw new BadRequest(`body.prompts: has ${prompts.length} items, body.query has ${query.length}; they must be aligned`);
    if (labels && labels.length !== query.length) throw new BadRequest(`body.labels: has ${labels.length} items, body.query has ${query.length}; they must be aligned`);
    const { items, stats } = await service.grade(query.map((q, i) => ({ prompt: prompts[i]!, response: responseOf(q, prompts[i]!) })));
    return openRlhfReply(prompts, items, stats);
  });

  app.post('/grade', { onRequest: authorized, schema: { tags: ['reward'], summary: 'grade research proposals: score (null = excluded) and where it came from', ...secured, querystring: TokenQuery, body: GradeRequest, response: replies(GradeResponse) } }, async (req) => {
    return service.grade(req.body.items);
  });

  app.get('/health', { schema: { tags: ['reward'], summary: 'sandbox capacity and correction state', response: { 200: RewardHealth } } }, async () => {
    const h = service.health();
    return { status: 'ok' as const, ...h, isolation: h.isolation ? { network: h.isolation.network, pidNamespace: h.isolation.pidNamespace, rlimits: h.isolation.rlimits } : null };
  });
};

export interface ServeRewardOptions {
  host?: string;
  /** 0: a free port. */
  port: number;
  bodyLimit?: number;
  /** The bearer token /get_reward and /grade need; absent: none (for a trainer on the same machine only). */
  token?: string;
  /** Host names answered besides loopback, the machine's addresses and `host` (DNS rebinding). */
  allowedHosts?: readonly string[];
}

/** A fresh access token for the reward API: 64 hex digits, as the service's. */
export const newRewardToken = (): string => randomBytes(32).toString('hex');

/** Serves the reward API alone (at the root: POST /get_reward, POST /grade, GET /health). */
export async function serveRewardApi(service: RewardService, o: ServeRewardOptions): Promise<{ url: string; close(): Promise<void> }> {
  if (o.token !== undefined && !/^[\x21-\x7e]{16,256}$/.test(o.token)) throw new Error('reward API token: 16 to 256 printable characters without spaces');
  const host = o.host ?? '127.0.0.1';
  const hosts = new HostPolicy({ bind: host, allowedHosts: o.allowedHosts });
  const app = Fastify({
    bodyLimit: o.bodyLimit ?? 64 * 1024 * 1024,
    // As the service validates: no type coercion of JSON bodies, every violation reported.
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, allErrors: true } },
  }).withTypeProvider<TypeBoxTypeProvider>();
  app.addHook('onRequest', async (req, reply) => {
    if (!hosts.hostAllowed(req.headers.host)) return reply.status(421).send({ statusCode: 421, code: 'WMRL_MISDIRECTED', message: `this service does not answer to host '${String(req.headers.host).slice(0, 100)}'` });
  });
  await app.register(rewardPlugin(service, { auth: o.token === undefined ? null : new BearerAuth(o.token, { where: 'the token wmrl reward-serve printed at start, or its --token' }) }));
  const address = await app.listen({ host, port: o.port });
  return { url: address, close: () => app.close() };
}
