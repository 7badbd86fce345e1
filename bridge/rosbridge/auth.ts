// rosbridge v2's `auth` op with a shared secret, as rosauth checks it, so roslib's
// `ros.authenticate(...)` works against this server and this project's client works against
// rosbridge_server with rosauth.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Auth } from './protocol.js';

/** The MAC rosauth expects: sha512 hex of secret + client + dest + rand + t + level + end (t and end in whole seconds). */
export function rosauthMac(secret: string, a: Omit<Auth, 'op' | 'mac'>): string {
  return createHash('sha512').update(`${secret}${a.client}${a.dest}${a.rand}${Math.floor(a.t)}${a.level}${Math.floor(a.end)}`).digest('hex');
}

/** A fresh auth op for `secret` to the server at `dest` (the URL connected to, e.g. ws://host:9090), valid from now for `validS` seconds. */
export function authOp(secret: string, o: { dest: string; client?: string; level?: string; validS?: number; nowS?: number }): Auth {
  const t = Math.floor(o.nowS ?? Date.now() / 1000);
  const fields = { client: o.client ?? 'wmrl', dest: o.dest, rand: randomBytes(16).toString('hex'), t, level: o.level ?? 'user', end: t + (o.validS ?? 24 * 3600) };
  return { op: 'auth', mac: rosauthMac(secret, fields), ...fields };
}

/** Shortest shared secret accepted: a guessable one would open the robot to the network. */
export const MIN_SECRET_LENGTH = 16;

/** Longest auth fields accepted, characters: an unauthenticated client must not make the server hash megabytes. */
export const AUTH_FIELD_MAX = { mac: 128, client: 256, dest: 512, rand: 256, level: 32 } as const;

export class AuthChecker {
  /** MACs accepted within the time window: a captured auth op cannot be replayed. */
  private readonly seen = new Map<string, number>();

  constructor(
    private readonly secret: string,
    /** Largest |now − t| accepted, s (rosauth's allowed time delta). */
    private readonly windowS = 30,
    private readonly nowS: () => number = () => Date.now() / 1000,
  ) {
    if (secret.length < MIN_SECRET_LENGTH) throw new Error(`rosbridge: the shared secret has ${secret.length} characters; use at least ${MIN_SECRET_LENGTH}`);
  }

  /**
   * null when `a` authenticates; otherwise why not. `destProblem` says why `a.dest` does not name this
   * server (null when it does): an auth op captured for one server must not open another with the same secret.
   */
  check(a: Auth, destProblem?: (dest: string) => string | null): string | null {
    for (const [k, max] of Object.entries(AUTH_FIELD_MAX)) {
      const n = a[k as keyof typeof AUTH_FIELD_MAX].length;
      if (n > max) return `auth: field '${k}' has ${n} characters; at most ${max} are accepted`;
    }
    const now = this.nowS();
    for (const [mac, t] of this.seen) if (Math.abs(now - t) > this.windowS) this.seen.delete(mac);
    if (!(Math.abs(now - a.t) <= this.windowS)) return `auth: time t=${a.t} is more than ${this.windowS} s from the server's clock (${Math.floor(now)})`;
    if (!(a.end > now)) return `auth: session end ${a.end} has passed`;
    const want = Buffer.from(rosauthMac(this.secret, a), 'hex');
    const got = /^[0-9a-f]{128}$/i.test(a.mac) ? Buffer.from(a.mac, 'hex') : Buffer.alloc(0);
    if (got.length !== want.length || !timingSafeEqual(got, want)) return 'auth: the MAC does not match the shared secret';
    const wrongDest = destProblem?.(a.dest);
    if (wrongDest) return wrongDest;
    if (this.seen.has(a.mac.toLowerCase())) return 'auth: this auth message was already used (replay)';
    this.seen.set(a.mac.toLowerCase(), a.t);
    return null;
  }
}

