// GET /api/stream (WebSocket): live events — real and imagined rollout frames, training metrics,
// episodes, run and robot status — as JSON text frames (StreamEvent in server/schemas.ts). Read-only.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { AppContext } from '../app.js';
import { ApiError } from '../errors.js';
import type { HostPolicy } from '../../common/host-policy.js';
import { StreamQuery } from '../schemas.js';
import { TOPICS, type Topic } from '../stream-hub.js';

export const streamPlugin = (ctx: AppContext, hosts: HostPolicy): FastifyPluginAsyncTypebox => async (app) => {
  // Browsers let any page open a WebSocket to any host: only the service's own pages (and allowed
  // origins) may read the stream; clients that send no Origin are not browsers.
  const sameOrigin = async (req: { headers: { origin?: string; host?: string } }) => {
    if (!hosts.originAllowed(req.headers.origin, req.headers.host)) throw new ApiError('WMRL_FORBIDDEN_ORIGIN', `WebSocket from origin '${String(req.headers.origin).slice(0, 200)}' refused: only the service's own pages (or --allowed-origin) may open /api/stream`);
  };
  app.get('/stream', { websocket: true, onRequest: sameOrigin, schema: { tags: ['streams'], summary: 'WebSocket: live StreamEvent JSON frames; ?topics=real,imagined,metrics,episode,run,robot', querystring: StreamQuery } }, (socket, req) => {
    const topics = new Set<Topic>(req.query.topics ? (req.query.topics.split(',') as Topic[]) : TOPICS);
    ctx.hub.add(socket, topics);
    // A new viewer starts from the current state: robots and runs.
    if (topics.has('robot')) for (const r of ctx.robots.values()) socket.send(JSON.stringify({ type: 'robot', status: r.status() }));
    if (topics.has('run')) for (const s of ctx.runs.list()) socket.send(JSON.stringify({ type: 'run', status: s }));
    socket.on('message', () => socket.close(1008, 'this stream is read-only'));
  });
};
