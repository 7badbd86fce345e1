// Policies: list, describe, download the .onnx, upload one, deploy one to a robot (a `policy` run).
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { OnnxPolicy } from '../../policies/onnx-policy.js';
import type { AppContext } from '../app.js';
import { ApiError } from '../errors.js';
import { ErrorBody, DeployBody, IdParams, PolicyInfo, RunStatus, replies } from '../schemas.js';

const secured = { security: [{ bearer: [] }] };

export const policiesPlugin = (ctx: AppContext, uploadLimit: number): FastifyPluginAsyncTypebox => async (app) => {
  app.addContentTypeParser('application/octet-stream', { parseAs: 'buffer', bodyLimit: uploadLimit }, (_req, body, done) => done(null, body));
  app.get('/', { schema: { tags: ['policies'], summary: 'the deployable policies', response: replies(Type.Array(PolicyInfo)) } }, async () => ctx.policies.list());
  app.get('/:id', { schema: { tags: ['policies'], summary: "a policy's inputs, outputs and metadata", params: IdParams, response: replies(PolicyInfo, 400, 404) } }, async (req) => ctx.policies.info(req.params.id));
  app.get(
    '/:id/download',
    { schema: { tags: ['policies'], summary: 'the policy .onnx file', params: IdParams, produces: ['application/octet-stream'], response: { 200: Type.Unknown(), 400: ErrorBody, 404: ErrorBody } } },
    async (req, reply) => {
      const bytes = ctx.policies.bytes(req.params.id);
      return reply.type('application/octet-stream').header('content-disposition', `attachment; filename="${req.params.id}.onnx"`).send(bytes);
    },
  );
  app.put(
    '/:id',
    {
      config: { auth: true },
      bodyLimit: uploadLimit,
      schema: { tags: ['policies'], summary: 'upload a policy .onnx (body: the file, application/octet-stream)', ...secured, params: IdParams, consumes: ['application/octet-stream'], response: { ...replies(PolicyInfo, 400, 401, 413, 415, 422, 429), 201: PolicyInfo } },
    },
    async (req, reply) => {
      if (!Buffer.isBuffer(req.body)) throw new ApiError('WMRL_UNSUPPORTED_MEDIA', 'send the .onnx file as application/octet-stream');
      return reply.status(201).send(ctx.policies.save(req.params.id, req.body));
    },
  );
  app.post(
    '/:id/deploy',
    { config: { auth: true }, schema: { tags: ['policies'], summary: 'deploy a policy on a robot: starts a `policy` run that records every episode', ...secured, params: IdParams, body: DeployBody, response: { ...replies(RunStatus, 400, 401, 404, 409, 422, 429, 503), 201: RunStatus } } },
    async (req, reply) => {
      const info = ctx.policies.info(req.params.id);
      const robot = ctx.robots.get(req.body.robot);
      if (!robot) throw new ApiError('WMRL_ROBOT_NOT_FOUND', `no robot '${req.body.robot}' (robots: ${[...ctx.robots.keys()].join(', ')})`);
      try {
        await OnnxPolicy.load(ctx.policies.path(info.id), robot.spec);
      } catch (e) {
        throw new ApiError('WMRL_POLICY_INVALID', (e as Error).message);
      }
      return reply.status(201).send(ctx.runs.start('policy', { robot: robot.id, policy: info.id, episodes: req.body.episodes }));
    },
  );
};
