// GET /api/health: is the service up, and where are its other endpoints.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { AppContext } from '../app.js';
import { Health, replies } from '../schemas.js';

export const healthPlugin = (ctx: AppContext): FastifyPluginAsyncTypebox => async (app) => {
  app.get('/health', { schema: { tags: ['health'], summary: 'service health', response: replies(Health) } }, async () => {
    const e = ctx.endpoints();
    return { status: 'ok' as const, version: ctx.version, uptimeS: (Date.now() - ctx.startedAt) / 1000, robots: ctx.robots.size, runs: ctx.runs.list().length, foxglove: e.foxglove, mqtt: e.mqtt };
  });
};
