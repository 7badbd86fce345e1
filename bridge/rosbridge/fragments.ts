// Reassembly of fragmented frames with hard bounds: a peer that sends huge totals or never
// finishes a message cannot grow memory without limit.
import type { Fragment } from './protocol.js';

export interface FragmentLimits {
  /** Largest `total` accepted for one message. */
  maxFragments: number;
  /** Largest reassembled message, in characters. */
  maxMessageLength: number;
  /** Incomplete messages kept per connection; the oldest is evicted beyond this. */
  maxPending: number;
  /** An incomplete message older than this is evicted. */
  timeoutMs: number;
}

export const DEFAULT_FRAGMENT_LIMITS: FragmentLimits = { maxFragments: 10_000, maxMessageLength: 16 * 1024 * 1024, maxPending: 32, timeoutMs: 10_000 };

interface Pending {
  total: number;
  parts: Array<string | undefined>;
  received: number;
  length: number;
  firstSeen: number;
}

export type FragmentResult = { done: true; text: string } | { done: false; error?: string };

export class FragmentBuffer {
  private readonly pending = new Map<string, Pending>();
  evicted = 0;

  constructor(private readonly limits: FragmentLimits = DEFAULT_FRAGMENT_LIMITS, private readonly now: () => number = Date.now) {}

  get size(): number {
    return this.pending.size;
  }

  /** Bytes (characters) held in incomplete messages. */
  get heldLength(): number {
    let n = 0;
    for (const p of this.pending.values()) n += p.length;
    return n;
  }

  add(id: string, num: number, total: number, data: string): FragmentResult {
    this.expire();
    if (total > this.limits.maxFragments) return { done: false, error: `fragment '${id.slice(0, 60)}': total ${total} exceeds the ${this.limits.maxFragments}-fragment limit` };
    let p = this.pending.get(id);
    if (p && p.total !== total) {
      this.pending.delete(id);
      return { done: false, error: `fragment '${id.slice(0, 60)}': total changed from ${p.total} to ${total}; message dropped` };
    }
    if (!p) {
      if (this.pending.size >= this.limits.maxPending) {
        const oldest = this.pending.keys().next().value as string;
        this.pending.delete(oldest);
        this.evicted++;
      }
      p = { total, parts: new Array<string | undefined>(total), received: 0, length: 0, firstSeen: this.now() };
      this.pending.set(id, p);
    }
    if (p.parts[num] !== undefined) return { done: false };
    if (p.length + data.length > this.limits.maxMessageLength) {
      this.pending.delete(id);
      return { done: false, error: `fragment '${id.slice(0, 60)}': message exceeds ${this.limits.maxMessageLength} bytes; dropped` };
    }
    p.parts[num] = data;
    p.received++;
    p.length += data.length;
    if (p.received < total) return { done: false };
    this.pending.delete(id);
    return { done: true, text: p.parts.join('') };
  }

  /** Drops incomplete messages past their timeout. */
  expire(): void {
    const limit = this.now() - this.limits.timeoutMs;
    for (const [id, p] of this.pending) {
      if (p.firstSeen > limit) break; // insertion order = age order
      this.pending.delete(id);
      this.evicted++;
    }
  }
}

/** Splits a frame into rosbridge fragment messages of at most `size` characters of data each. */
export function fragment(id: string, text: string, size: number): Fragment[] {
  const total = Math.max(1, Math.ceil(text.length / size));
  return Array.from({ length: total }, (_, num) => ({ op: 'fragment' as const, id, data: text.slice(num * size, (num + 1) * size), num, total }));
}
