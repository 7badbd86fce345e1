// GET /metrics: Prometheus text format (prom-client).
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { AppContext } from '../app.js';

export const metricsPlugin = (ctx: AppContext): FastifyPluginAsyncTypebox => async (app) => {
  app.get('/metrics', { schema: { tags: ['health'], summary: 'Prometheus metrics', produces: ['text/plain'], response: { 200: Type.String() } } }, async (_req, reply) => {
    reply.type(ctx.registry.contentType);
    return ctx.registry.metrics();
  });
};
