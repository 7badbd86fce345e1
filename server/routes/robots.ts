// Robots: list, status, the 3D scene, the URDF and its meshes, e-stop and reset. E-stop and reset need the token.
import { existsSync, readFileSync, realpathSync, statSync } from 'node:fs';
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

/** `rel` is outside the folder it is resolved in: refused, naming the robot. */
const outside = (host: RobotHost, rel: string, how = 'is') => new ApiError('WMRL_VALIDATION', `params.*: '${rel}' ${how} outside the folder of robot '${host.id}''s URDF`);

/**
 * The file `rel` names for the robot's URDF: relative to the URDF's folder, or `package/PKG/rest` for
 * `package://PKG/rest` — PKG being a package declared for the robot (`packages`: name → folder), or
 * else the URDF's own package: its folder or the folder above it (ROS's PKG/urdf/robot.urdf), when
 * named PKG. Never a folder further up (any folder of that name would do, e.g. the user's home), never
 * a file outside the folder, symbolic links resolved first, and only model files.
 */
function urdfFile(host: RobotHost, rel: string, packages: Readonly<Record<string, string>>): string {
  if (host.urdf === null) throw new ApiError('WMRL_NOT_FOUND', `robot '${host.id}' declares no URDF`);
  let root = realpathSync(dirname(host.urdf));
  let rest = rel;
  const pkg = /^package\/([^/]+)\/(.+)$/.exec(rel);
  if (pkg) {
    const name = pkg[1]!;
    const declared = Object.hasOwn(packages, name) ? packages[name]! : undefined;
    const own = [root, dirname(root)].find((d) => basename(d) === name);
    const dir = declared !== undefined ? realpathSync(declared) : own;
    if (dir === undefined) throw new ApiError('WMRL_NOT_FOUND', `robot '${host.id}': package://${name}/ is neither declared for it (${Object.keys(packages).join(', ') || 'none declared'}) nor its URDF's own package (the URDF's folder or the one above it, named '${name}')`);
    root = dir;
    rest = pkg[2]!;
  }
  const file = resolve(root, rest);
  if (!file.startsWith(root + sep)) throw outside(host, rel);
  if (!(extname(file).toLowerCase() in MODEL_FILES)) throw new ApiError('WMRL_NOT_FOUND', `robot '${host.id}': '${rel}' is not a model file (${Object.keys(MODEL_FILES).join(', ')})`);
  if (!existsSync(file)) throw new ApiError('WMRL_NOT_FOUND', `robot '${host.id}' has no URDF file '${rel}'`);
  // A symbolic link in the folder may point anywhere: the file it resolves to must be inside too.
  const real = realpathSync(file);
  if (!real.startsWith(root + sep)) throw outside(host, rel, 'links');
  if (!statSync(real).isFile()) throw new ApiError('WMRL_NOT_FOUND', `robot '${host.id}' has no URDF file '${rel}'`);
  return real;
}

/** Checks the declared packages (robot id → package name → folder) once, at start: each names a folder. */
function checkPackages(all: Readonly<Record<string, Readonly<Record<string, string>>>>, robots: ReadonlyMap<string, RobotHost>): void {
  for (const [id, pkgs] of Object.entries(all)) {
    if (!robots.has(id)) throw new Error(`URDF packages declared for robot '${id}', which the service does not have (${[...robots.keys()].join(', ')})`);
    for (const [name, dir] of Object.entries(pkgs)) {
      if (!/^[A-Za-z0-9._-]+$/.test(name)) throw new Error(`robot '${id}': URDF package name '${name}' is not a ROS package name`);
      if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new Error(`robot '${id}': URDF package '${name}' folder ${dir} is not a folder`);
    }
  }
}

export const robotsPlugin = (ctx: AppContext, packages: Readonly<Record<string, Readonly<Record<string, string>>>> = {}): FastifyPluginAsyncTypebox => async (app) => {
  checkPackages(packages, ctx.robots);
  const robot = (id: string): RobotHost => {
    const r = ctx.robots.get(id);
    if (!r) throw new ApiError('WMRL_ROBOT_NOT_FOUND', `no robot '${id}' (robots: ${[...ctx.robots.keys()].join(', ')})`);
    return r;
  };
  app.get('/', { schema: { tags: ['robots'], summary: 'the robots', response: replies(Type.Array(RobotStatus)) } }, async () => [...ctx.robots.values()].map((r) => r.status()));
  app.get('/:id', { schema: { tags: ['robots'], summary: "a robot's status", params: IdParams, response: replies(RobotStatus, 400, 404) } }, async (req) => robot(req.params.id).status());
  app.get('/:id/scene', { schema: { tags: ['robots'], summary: "the robot's 3D scene (sim/scene.ts wmrl-scene/1: bodies, geoms, meshes, initial poses)", params: IdParams, response: { 200: Type.Unknown(), 400: ErrorBody, 404: ErrorBody } } }, async (req) => {
    const r = robot(req.params.id);
    if (!r.scene) throw new ApiError('WMRL_NOT_FOUND', `robot '${r.id}' has no 3D scene: it is a ${r.kind} robot whose YAML names no sim task (task:) to draw it in${r.urdf ? '; the viewer draws it from its URDF' : ''}`);
    return r.scene;
  });
  app.get(
    '/:id/urdf/*',
    { schema: { tags: ['robots'], summary: "a file of the robot's URDF: the URDF, a mesh or texture beside it, or package/PKG/... for a package://PKG/... reference", params: UrdfFileParams, response: { 200: Type.Unknown(), 400: ErrorBody, 404: ErrorBody } } },
    async (req, reply) => {
      const r = robot(req.params.id);
      const file = urdfFile(r, req.params['*'], packages[r.id] ?? {});
      return reply.type(MODEL_FILES[extname(file).toLowerCase()]!).send(readFileSync(file));
    },
  );
  app.post(
    '/:id/estop',
    // Never 429: whatever wrong tokens came from this address, the operator's e-stop goes through.
    { config: { auth: true, rateLimit: false }, schema: { tags: ['robots'], summary: 'e-stop: latches until reset (never rate-limited); 503 when the robot did not confirm its own stop (the latch holds)', ...secured, params: IdParams, querystring: EstopQuery, response: replies(RobotStatus, 400, 401, 404, 503) } },
    async (req) => {
      const r = robot(req.params.id);
      await r.estop(req.query.reason ?? 'e-stop requested through the API');
      return r.status();
    },
  );
  app.post(
    '/:id/reset',
    { config: { auth: true }, schema: { tags: ['robots'], summary: 'clear a latched e-stop and bring the robot to its start state; 503 when the robot did not reset (its own e-stop holds, or its link is down): the latch stays', ...secured, params: IdParams, response: replies(RobotStatus, 400, 401, 404, 409, 429, 503) } },
    async (req) => {
      const r = robot(req.params.id);
      if (r.run && !r.safety.isEstopped) throw new ApiError('WMRL_ROBOT_BUSY', `robot '${r.id}' is driven by run '${r.run}'; stop the run or e-stop the robot first`);
      await r.reset();
      return r.status();
    },
  );
};
