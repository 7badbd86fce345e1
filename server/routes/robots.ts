// Robots: list, status, the 3D scene, the URDF and its meshes, e-stop and reset. E-stop and reset need the token.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { basename, dirname, extname, resolve, sep } from 'node:path';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { AppContext } from '../app.js';
import { ApiError } from '../errors.js';
import type { RobotHost } from '../robot-host.js';
import { ErrorBody, EstopQuery, IdParams, RobotStatus, UrdfFileParams, replies } from '../schemas.js';

const secured = { security: [{ bearer: [] }] };

/** What a robot's URDF folder serves: the robot description and the meshes and textures it names, nothing else. */
const MODEL_FILES: Record<string, string> = {
  '.urdf': 'application/xml', '.xml': 'application/xml',
  '.stl': 'model/stl', '.obj': 'model/obj', '.dae': 'model/vnd.collada+xml', '.glb': 'model/gltf-binary', '.gltf': 'model/gltf+json',
  '.png': 'image/png', '.jpg': 'image/jpeg', '.jpeg': 'image/jpeg',
};

/**
 * The file `rel` names for the robot's URDF: relative to the URDF's folder, or `package/PKG/rest` for
 * `package://PKG/rest` — PKG being the nearest folder of that name above the URDF (a ROS package's folder is
 * named after it). Never a file outside that folder, and only model files.
 */
function urdfFile(host: RobotHost, rel: string): string {
  if (host.urdf === null) throw new ApiError('WMRL_NOT_FOUND', `robot '${host.id}' declares no URDF`);
  let root = dirname(host.urdf);
  let rest = rel;
  const pkg = /^package\/([^/]+)\/(.+)$/.exec(rel);
  if (pkg) {
    let dir = root;
    while (basename(dir) !== pkg[1] && dirname(dir) !== dir) dir = dirname(dir);
    if (basename(dir) !== pkg[1]) throw new ApiError('WMRL_NOT_FOUND', `robot '${host.id}': no folder '${pkg[1]}' above its URDF for package://${pkg[1]}/`);
    root = dir;
    rest = pkg[2]!;
  }
  const file = resolve(root, rest);
  if (!file.startsWith(root + sep)) throw new ApiError('WMRL_VALIDATION', `params.*: '${rel}' is outside the folder of robot '${host.id}''s URDF`);
  if (!(extname(file).toLowerCase() in MODEL_FILES)) throw new ApiError('WMRL_NOT_FOUND', `robot '${host.id}': '${rel}' is not a model file (${Object.keys(MODEL_FILES).join(', ')})`);
  if (!existsSync(file) || !statSync(file).isFile()) throw new ApiError('WMRL_NOT_FOUND', `robot '${host.id}' has no URDF file '${rel}'`);
  return file;
}

export const robotsPlugin = (ctx: AppContext): FastifyPluginAsyncTypebox => async (app) => {
  const robot = (id: string): RobotHost => {
    const r = ctx.robots.get(id);
    if (!r) throw new ApiError('WMRL_ROBOT_NOT_FOUND', `no robot '${id}' (robots: ${[...ctx.robots.keys()].join(', ')})`);
    return r;
  };
  app.get('/', { schema: { tags: ['robots'], summary: 'the robots', response: replies(Type.Array(RobotStatus)) } }, async () => [...ctx.robots.values()].map((r) => r.status()));
  app.get('/:id', { schema: { tags: ['robots'], summary: "a robot's status", params: IdParams, response: replies(RobotStatus, 400, 404) } }, async (req) => robot(req.params.id).status());
  app.get('/:id/scene', { schema: { tags: ['robots'], summary: "the robot's 3D scene (sim/scene.ts wmrl-scene/1: bodies, geoms, meshes, initial poses)", params: IdParams, response: { 200: Type.Unknown(), 400: ErrorBody, 404: ErrorBody } } }, async (req) => robot(req.params.id).scene);
  app.get(
    '/:id/urdf/*',
    { schema: { tags: ['robots'], summary: "a file of the robot's URDF: the URDF, a mesh or texture beside it, or package/PKG/... for a package://PKG/... reference", params: UrdfFileParams, response: { 200: Type.Unknown(), 400: ErrorBody, 404: ErrorBody } } },
    async (req, reply) => {
      const file = urdfFile(robot(req.params.id), req.params['*']);
      return reply.type(MODEL_FILES[extname(file).toLowerCase()]!).send(readFileSync(file));
    },
  );
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
