// Episodes: list, fetch one (its steps), export one as a ROS 2 MCAP bag.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { ZSTD_AVAILABLE, episodeMcapStream } from '../../episodes/mcap/export.js';
import { EpisodeStoreError } from '../../episodes/store/validate.js';
import type { Episode } from '../../episodes/types.js';
import type { EpisodeSummary as StoredSummary } from '../../episodes/store/store.js';
import type { AppContext } from '../app.js';
import { ApiError } from '../errors.js';
import { ErrorBody, EpisodeDetail, EpisodeListQuery, EpisodeSummary, ExportQuery, replies } from '../schemas.js';

const EpisodeParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 128 }) });
const round = (x: number) => Math.round(x * 1e6) / 1e6;

function summary(s: StoredSummary): EpisodeSummary {
  const m = s.meta;
  return { id: m.id, robot: m.robot, policyVersion: m.policyVersion, hardwareProfile: m.hardwareProfile, task: m.task ?? null, instruction: m.instruction ?? null, startedAt: m.startedAt, status: s.status, steps: s.steps, success: s.success ?? null };
}

export const episodesPlugin = (ctx: AppContext): FastifyPluginAsyncTypebox => async (app) => {
  const found = <T>(id: string, read: (id: string) => T): T => {
    try {
      return read(id);
    } catch (e) {
      if (e instanceof EpisodeStoreError && e.code === 'NOT_FOUND') throw new ApiError('WMRL_EPISODE_NOT_FOUND', `no episode '${id}'`);
      throw e;
    }
  };
  const get = (id: string): Episode => found(id, (i) => ctx.store.get(i));
  app.get('/', { schema: { tags: ['episodes'], summary: 'recorded episodes, newest last', querystring: EpisodeListQuery, response: replies(Type.Array(EpisodeSummary), 400) } }, async (req) => {
    return ctx.store.list({ status: req.query.status, robot: req.query.robot, limit: req.query.limit }).map(summary);
  });
  app.get('/:id', { schema: { tags: ['episodes'], summary: 'one episode with its steps', params: EpisodeParams, response: replies(EpisodeDetail, 400, 404) } }, async (req) => {
    const e = get(req.params.id);
    const last = e.steps.at(-1);
    return {
      summary: { id: e.meta.id, robot: e.meta.robot, policyVersion: e.meta.policyVersion, hardwareProfile: e.meta.hardwareProfile, task: e.meta.task ?? null, instruction: e.meta.instruction ?? null, startedAt: e.meta.startedAt, status: e.status, steps: e.steps.length, success: last?.success ?? null },
      steps: e.steps.map((s) => ({ seq: s.seq, tObs: s.tObs, position: Array.from(s.obs.position, round), velocity: Array.from(s.obs.velocity, round), action: Array.from(s.action, round), reward: s.reward, done: s.done })),
    };
  });
  app.get(
    '/:id/mcap',
    { schema: { tags: ['episodes'], summary: 'the episode as a ROS 2 MCAP bag (CDR; Foxglove and ros2 bag read it)', params: EpisodeParams, querystring: ExportQuery, produces: ['application/octet-stream'], response: { 200: Type.Unknown(), 400: ErrorBody, 404: ErrorBody } } },
    async (req, reply) => {
      if (req.query.compression === 'zstd' && !ZSTD_AVAILABLE) throw new ApiError('WMRL_VALIDATION', `compression=zstd: this service runs on Node ${process.version}, whose node:zlib has no zstd (Node >= 22.15 has it); use compression=lz4`);
      // Streamed: steps read from the store a page at a time, the bag sent as it is written.
      const bag = episodeMcapStream(found(req.params.id, (i) => ctx.store.stream(i)), { compression: req.query.compression });
      return reply.type('application/octet-stream').header('content-disposition', `attachment; filename="${req.params.id}.mcap"`).send(bag);
    },
  );
};
