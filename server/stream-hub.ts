// Fans the service's events out to WebSocket viewers: each event is serialized once, sent to every
// client that asked for its type, and dropped for a client whose socket is backed up. Events are
// queued and sent after the current task (setImmediate), never inside the control step that made
// them: a slow viewer, or fifty, must never slow the control loop.
import type { WebSocket } from 'ws';
import type { StreamEvent } from './schemas.js';

export type Topic = StreamEvent['type'];
export const TOPICS: Topic[] = ['metrics', 'real', 'imagined', 'episode', 'run', 'robot'];

/** A client more than this many bytes behind misses frames until it catches up. */
const MAX_BUFFERED = 1 << 20;

export class StreamHub {
  private readonly clients = new Map<WebSocket, Set<Topic>>();
  sent = 0;
  dropped = 0;

  get size(): number {
    return this.clients.size;
  }

  add(ws: WebSocket, topics: Set<Topic>): void {
    this.clients.set(ws, topics);
    ws.once('close', () => this.clients.delete(ws));
  }

  private queue: StreamEvent[] = [];
  private scheduled = false;

  publish(ev: StreamEvent): void {
    if (this.clients.size === 0) return;
    this.queue.push(ev);
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.flush());
  }

  private flush(): void {
    this.scheduled = false;
    const q = this.queue;
    this.queue = [];
    for (const ev of q) this.send(ev);
  }

  private send(ev: StreamEvent): void {
    let text: string | undefined;
    for (const [ws, topics] of this.clients) {
      if (!topics.has(ev.type) || ws.readyState !== ws.OPEN) continue;
      if (ws.bufferedAmount > MAX_BUFFERED) {
        this.dropped++;
        continue;
      }
      text ??= JSON.stringify(ev);
      ws.send(text);
      this.sent++;
    }
  }

  closeAll(): void {
    for (const ws of this.clients.keys()) ws.close(1001, 'service shutting down');
    this.clients.clear();
  }
}
