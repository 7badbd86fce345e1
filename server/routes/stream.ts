// GET /api/stream (WebSocket): live events — real and imagined rollout frames, training metrics,
// episodes, run and robot status — as JSON text frames (StreamEvent in server/schemas.ts). Read-only.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { AppContext } from '../app.js';
import { StreamQuery } from '../schemas.js';
import { TOPICS, type Topic } from '../stream-hub.js';

export const streamPlugin = (ctx: AppContext): FastifyPluginAsyncTypebox => async (app) => {
  app.get('/stream', { websocket: true, schema: { tags: ['streams'], summary: 'WebSocket: live StreamEvent JSON frames; ?topics=real,imagined,metrics,episode,run,robot', querystring: StreamQuery } }, (socket, req) => {
    const topics = new Set<Topic>(req.query.topics ? (req.query.topics.split(',') as Topic[]) : TOPICS);
    ctx.hub.add(socket, topics);
    // A new viewer starts from the current state: robots and runs.
    if (topics.has('robot')) for (const r of ctx.robots.values()) socket.send(JSON.stringify({ type: 'robot', status: r.status() }));
    if (topics.has('run')) for (const s of ctx.runs.list()) socket.send(JSON.stringify({ type: 'run', status: s }));
    socket.on('message', () => socket.close(1008, 'this stream is read-only'));
  });
};
