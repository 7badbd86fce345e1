// The fastify application: one plugin per domain, TypeBox schemas on every route, OpenAPI at /docs,
// bearer-token auth on routes that change state, stable error codes, the viewer as static files.
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import AjvCompiler, { type ValidatorFactory } from '@fastify/ajv-compiler';
import fastifyStatic from '@fastify/static';
import fastifySwagger from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import fastifyWebsocket from '@fastify/websocket';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyError, type FastifyInstance } from 'fastify';
import { Histogram, type Registry } from 'prom-client';
import { rewardPlugin } from '../autoresearch/reward-api.js';
import type { RewardService } from '../autoresearch/reward-service.js';
import type { EpisodeStore } from '../episodes/store/store.js';
import type { Auth } from './auth.js';
import { ApiError } from './errors.js';
import { HostPolicy } from '../common/host-policy.js';
import type { PolicyLibrary } from './policy-library.js';
import type { RobotHost } from './robot-host.js';
import type { RunManager } from './runs.js';
import type { ErrorCode } from './schemas.js';
import type { StreamHub } from './stream-hub.js';
import { episodesPlugin } from './routes/episodes.js';
import { healthPlugin } from './routes/health.js';
import { metricsPlugin } from './routes/metrics.js';
import { policiesPlugin } from './routes/policies.js';
import { robotsPlugin } from './routes/robots.js';
import { runsPlugin } from './routes/runs.js';
import { streamPlugin } from './routes/stream.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route changes state or moves a robot: it needs the bearer token. */
    auth?: boolean;
    /** False: wrong tokens are never answered 429 here (the e-stop). */
    rateLimit?: boolean;
  }
}

/** What the routes use: the service's parts, passed explicitly. */
export interface AppContext {
  store: EpisodeStore;
  robots: Map<string, RobotHost>;
  runs: RunManager;
  policies: PolicyLibrary;
  auth: Auth;
  hub: StreamHub;
  registry: Registry;
  version: string;
  startedAt: number;
  endpoints(): { foxglove: string | null; mqtt: string | null };
  /** Faults of the service itself (a 500): never only in the reply. */
  onError(e: Error): void;
}

export interface AppOptions {
  /** The built viewer (dist/web); not served when absent. */
  viewerDir?: string;
  logger?: boolean;
  /** JSON bodies; policy uploads have their own limit. */
  bodyLimit?: number;
  policyBodyLimit?: number;
  requestTimeoutMs?: number;
  /** The reward API for external RL trainers (autoresearch/reward-api.ts), served under /reward when given. */
  reward?: RewardService;
  /** False: the reward API takes requests without the access token (default: it needs it, as every state-changing route). */
  rewardAuth?: boolean;
  /** Which Host headers and WebSocket Origins are answered (default: loopback names and addresses). */
  hosts?: HostPolicy;
  /** Declared ROS packages of the robots' URDFs, by robot id: `package://PKG/...` resolves in `dir`. */
  urdfPackages?: Record<string, Record<string, string>>;
}

export type App = FastifyInstance;

const FASTIFY_CODES: Record<string, ErrorCode> = {
  FST_ERR_CTP_BODY_TOO_LARGE: 'WMRL_BODY_TOO_LARGE',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'WMRL_UNSUPPORTED_MEDIA',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'WMRL_VALIDATION',
  FST_ERR_CTP_INVALID_JSON_BODY: 'WMRL_VALIDATION',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'WMRL_VALIDATION',
};

/**
 * Unknown fields are errors, not silently dropped; every error is reported, not just the first.
 * Query strings and path parameters are text, so their numbers are coerced; JSON bodies are not
 * (`"episodes": "5"` is a violation, not a 5).
 */
const buildValidator: ValidatorFactory = (external, server) => {
  const base = { ...(server?.customOptions ?? {}), removeAdditional: false, allErrors: true, useDefaults: true } as const;
  const strict = AjvCompiler()(external, { customOptions: { ...base, coerceTypes: false } });
  const coerce = AjvCompiler()(external, { customOptions: { ...base, coerceTypes: 'array' } });
  return (route) => (route.httpPart === 'body' ? strict : coerce)(route);
};

/** Names the field of every schema violation, e.g. "body.episodes: must be >= 1". */
function validationMessage(e: FastifyError): string {
  const ctx = e.validationContext ?? 'request';
  return (e.validation ?? [])
    .map((v) => {
      const path = `${ctx}${v.instancePath.replace(/\//g, '.')}`;
      const p = v.params as Record<string, unknown>;
      if (v.keyword === 'required') return `${path}.${String(p.missingProperty)}: is required`;
      if (v.keyword === 'additionalProperties') return `${path}.${String(p.additionalProperty)}: is not a known field`;
      return `${path}: ${v.message ?? v.keyword}`;
    })
    .join('; ');
}

export async function buildApp(ctx: AppContext, o: AppOptions = {}): Promise<App> {
  const hosts = o.hosts ?? new HostPolicy({ bind: '127.0.0.1' });
  const app = Fastify({
    logger: o.logger ?? false,
    // Every id reaches its route and its schema (400 naming the field), not the static files' wildcard.
    routerOptions: { maxParamLength: 8192 },
    bodyLimit: o.bodyLimit ?? 64 * 1024,
    requestTimeout: o.requestTimeoutMs ?? 30_000,
    connectionTimeout: 60_000,
    return503OnClosing: true,
    schemaController: { compilersFactory: { buildValidator } },
  }).withTypeProvider<TypeBoxTypeProvider>();

  app.setErrorHandler((err: FastifyError, req, reply) => {
    if (err instanceof ApiError) return reply.status(err.statusCode).send({ statusCode: err.statusCode, code: err.code, message: err.message });
    if (err.validation) return reply.status(400).send({ statusCode: 400, code: 'WMRL_VALIDATION', message: validationMessage(err) });
    const mapped = err.code ? FASTIFY_CODES[err.code] : undefined;
    if (mapped) {
      const status = mapped === 'WMRL_VALIDATION' ? 400 : (err.statusCode ?? 400);
      return reply.status(status).send({ statusCode: status, code: mapped, message: err.message });
    }
    // A client error raised below the routes (the static files refuse a path too long to be a file name: 403).
    if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
      const code: ErrorCode = err.statusCode === 404 ? 'WMRL_NOT_FOUND' : err.statusCode === 403 ? 'WMRL_FORBIDDEN' : 'WMRL_VALIDATION';
      const status = code === 'WMRL_VALIDATION' ? 400 : err.statusCode;
      return reply.status(status).send({ statusCode: status, code, message: `${req.method} ${req.url.split('?')[0]!.slice(0, 200)}: ${err.message}` });
    }
    // Anything else is a fault of the service: the service's error sink gets it in full, the caller an id
    // to quote (internal messages name files and state an attacker should not learn).
    const errorId = randomBytes(6).toString('hex');
    ctx.onError(new Error(`[error ${errorId}] ${req.method} ${req.url.slice(0, 300)}: ${err.message}`, { cause: err }));
    return reply.status(500).send({ statusCode: 500, code: 'WMRL_INTERNAL', message: `internal error ${errorId}: the service's log has the details`, errorId });
  });
  app.setNotFoundHandler((req, reply) => reply.status(404).send({ statusCode: 404, code: 'WMRL_NOT_FOUND', message: `no route ${req.method} ${req.url.split('?')[0]}` }));
  const http = new Histogram({ name: 'wmrl_http_request_seconds', help: 'HTTP request duration', labelNames: ['method', 'route', 'status'], buckets: [0.001, 0.005, 0.02, 0.1, 0.5, 2], registers: [ctx.registry] });
  app.addHook('onResponse', async (req, reply) => {
    http.observe({ method: req.method, route: req.routeOptions.url ?? 'unknown', status: String(reply.statusCode) }, reply.elapsedTime / 1000);
  });
  app.addHook('onRequest', async (req) => {
    // First: a rebinding page must learn nothing, not even which routes need the token.
    if (!hosts.hostAllowed(req.headers.host)) throw new ApiError('WMRL_MISDIRECTED', `this service does not answer to host '${String(req.headers.host).slice(0, 100)}' (allowed: loopback, its addresses, its bound host, --allowed-host)`);
    const c = req.routeOptions.config;
    if (c.auth) ctx.auth.check(req.headers.authorization, req.ip, { limit: c.rateLimit !== false });
  });

  await app.register(fastifySwagger, {
    openapi: {
      info: { title: 'WMRL Bridge', version: ctx.version, description: 'Runs, robots, policies, episodes and live streams of the WMRL Bridge service.' },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'the token in data/token' } } },
    },
  });
  await app.register(fastifySwaggerUi, { routePrefix: '/docs' });
  await app.register(fastifyWebsocket, { options: { maxPayload: 64 * 1024 } });

  await app.register(healthPlugin(ctx), { prefix: '/api' });
  await app.register(robotsPlugin(ctx, o.urdfPackages ?? {}), { prefix: '/api/robots' });
  await app.register(runsPlugin(ctx), { prefix: '/api/runs' });
  await app.register(policiesPlugin(ctx, o.policyBodyLimit ?? 64 * 1024 * 1024), { prefix: '/api/policies' });
  await app.register(episodesPlugin(ctx), { prefix: '/api/episodes' });
  await app.register(streamPlugin(ctx, hosts), { prefix: '/api' });
  await app.register(metricsPlugin(ctx));
  if (o.reward) await app.register(rewardPlugin(o.reward, { auth: o.rewardAuth === false ? null : ctx.auth }), { prefix: '/reward' });

  if (o.viewerDir && existsSync(o.viewerDir)) await app.register(fastifyStatic, { root: o.viewerDir, prefix: '/', index: 'index.html' });
  else app.get('/', { schema: { hide: true } }, async (_req, reply) => reply.type('text/plain').send('The viewer is not built: npm run build:web (npm start builds it on first start).\nAPI: /docs\n'));
  return app;
}
