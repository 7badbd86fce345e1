// Runs: start one (a route per registered job kind, its options schema on the body), list, status,
// stop (checkpointed), metrics, recent rollouts for playback.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { AppContext } from '../app.js';
import { ApiError } from '../errors.js';
import { IdParams, JobInfo, MetricsPoint, RolloutReply, RunStatus, replies } from '../schemas.js';

const secured = { security: [{ bearer: [] }] };

export const runsPlugin = (ctx: AppContext): FastifyPluginAsyncTypebox => async (app) => {
  app.get('/', { schema: { tags: ['runs'], summary: 'every run since the service started', response: replies(Type.Array(RunStatus)) } }, async () => ctx.runs.list());
  app.get('/jobs', { schema: { tags: ['runs'], summary: 'the job kinds a run can be started with, and their options schemas', response: replies(Type.Array(JobInfo)) } }, async () =>
    ctx.runs.jobKinds().map((j) => ({ kind: j.kind, description: j.description, options: j.options })),
  );
  for (const job of ctx.runs.jobKinds()) {
    app.post(
      `/${job.kind}`,
      { config: { auth: true }, schema: { tags: ['runs'], summary: `start a run: ${job.description}`, ...secured, body: job.options, response: { ...replies(RunStatus, 400, 401, 404, 409, 413, 429), 201: RunStatus } } },
      async (req, reply) => reply.status(201).send(ctx.runs.start(job.kind, req.body as Record<string, unknown>)),
    );
  }
  app.get('/:id', { schema: { tags: ['runs'], summary: "a run's status", params: IdParams, response: replies(RunStatus, 400, 404) } }, async (req) => ctx.runs.get(req.params.id).status);
  app.post(
    '/:id/stop',
    { config: { auth: true }, schema: { tags: ['runs'], summary: 'stop a run: the episode being recorded is finished, the run checkpointed', ...secured, params: IdParams, response: replies(RunStatus, 400, 401, 404, 429) } },
    async (req) => ctx.runs.stop(req.params.id),
  );
  app.get('/:id/metrics', { schema: { tags: ['runs'], summary: "a run's training metrics, one point per step", params: IdParams, response: replies(Type.Array(MetricsPoint), 400, 404) } }, async (req) => ctx.runs.metrics(req.params.id));
  app.get('/:id/rollouts', { schema: { tags: ['runs'], summary: 'episodes of the run kept for playback (the last 20)', params: IdParams, response: replies(Type.Array(Type.String()), 400, 404) } }, async (req) => ctx.runs.rollouts(req.params.id));
  app.get(
    '/:id/rollouts/:episode',
    { schema: { tags: ['runs'], summary: 'real and imagined frames of one episode, for playback', params: Type.Object({ id: IdParams.properties.id, episode: Type.String({ maxLength: 128 }) }), response: replies(RolloutReply, 400, 404) } },
    async (req) => {
      const r = ctx.runs.rollout(req.params.id, req.params.episode);
      if (!r) throw new ApiError('WMRL_EPISODE_NOT_FOUND', `run '${req.params.id}' keeps no rollout of episode '${req.params.episode}'`);
      return { episode: req.params.episode, ...r };
    },
  );
};
