// Robots: list, status, the 3D scene, e-stop and reset. E-stop and reset need the token.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { AppContext } from '../app.js';
import { ApiError } from '../errors.js';
import type { RobotHost } from '../robot-host.js';
import { ErrorBody, EstopQuery, IdParams, RobotStatus, replies } from '../schemas.js';

const secured = { security: [{ bearer: [] }] };

export const robotsPlugin = (ctx: AppContext): FastifyPluginAsyncTypebox => async (app) => {
  const robot = (id: string): RobotHost => {
    const r = ctx.robots.get(id);
    if (!r) throw new ApiError('WMRL_ROBOT_NOT_FOUND', `no robot '${id}' (robots: ${[...ctx.robots.keys()].join(', ')})`);
    return r;
  };
  app.get('/', { schema: { tags: ['robots'], summary: 'the robots', response: replies(Type.Array(RobotStatus)) } }, async () => [...ctx.robots.values()].map((r) => r.status()));
  app.get('/:id', { schema: { tags: ['robots'], summary: "a robot's status", params: IdParams, response: replies(RobotStatus, 400, 404) } }, async (req) => robot(req.params.id).status());
  app.get('/:id/scene', { schema: { tags: ['robots'], summary: "the robot's 3D scene (sim/scene.ts wmrl-scene/1: bodies, geoms, meshes, initial poses)", params: IdParams, response: { 200: Type.Unknown(), 400: ErrorBody, 404: ErrorBody } } }, async (req) => robot(req.params.id).scene);
  app.post(
    '/:id/estop',
    { config: { auth: true }, schema: { tags: ['robots'], summary: 'e-stop: latches until reset', ...secured, params: IdParams, querystring: EstopQuery, response: replies(RobotStatus, 400, 401, 404, 429) } },
    async (req) => {
      const r = robot(req.params.id);
      await r.estop(req.query.reason ?? 'e-stop requested through the API');
      return r.status();
    },
  );
  app.post(
    '/:id/reset',
    { config: { auth: true }, schema: { tags: ['robots'], summary: 'clear a latched e-stop and bring the robot to its start state', ...secured, params: IdParams, response: replies(RobotStatus, 400, 401, 404, 409, 429) } },
    async (req) => {
      const r = robot(req.params.id);
      if (r.run && !r.safety.isEstopped) throw new ApiError('WMRL_ROBOT_BUSY', `robot '${r.id}' is driven by run '${r.run}'; stop the run or e-stop the robot first`);
      await r.reset();
      return r.status();
    },
  );
};
