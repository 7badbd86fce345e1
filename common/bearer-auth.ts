// Bearer-token checking with a failure budget per address, shared by the service's API (server/auth.ts)
// and the reward API served alone (autoresearch/reward-api.ts). The token is compared in constant time.
import { timingSafeEqual } from 'node:crypto';

/** A refused token: 401 (missing or wrong) or 429 (the address is over its failure budget). */
export class AuthError extends Error {
  readonly statusCode: 401 | 429;
  constructor(
    readonly code: 'WMRL_UNAUTHORIZED' | 'WMRL_RATE_LIMITED',
    message: string,
  ) {
    super(message);
    this.name = 'AuthError';
    this.statusCode = code === 'WMRL_UNAUTHORIZED' ? 401 : 429;
  }
}

export interface AuthOptions {
  /** Failed attempts an address may make within `windowMs` before its wrong tokens are answered 429. */
  maxFailures?: number;
  windowMs?: number;
  /** Where the caller finds the token, for the 401's message. */
  where?: string;
}

/** Addresses tracked at most; past it, expired entries are dropped (many source addresses cannot grow memory). */
const MAX_ADDRESSES = 10_000;

export class BearerAuth {
  private readonly expected: Buffer;
  private readonly failures = new Map<string, number[]>();
  private readonly maxFailures: number;
  private readonly windowMs: number;
  private readonly where: string;

  constructor(token: string, o: AuthOptions = {}) {
    if (token.length === 0) throw new Error('an access token must not be empty');
    this.expected = Buffer.from(token);
    this.maxFailures = o.maxFailures ?? 10;
    this.windowMs = o.windowMs ?? 60_000;
    this.where = o.where ?? 'the token is in data/token';
  }

  /**
   * Returns when the token is right, whatever the address's failures: a flood of wrong tokens from
   * the operator's address (or a NAT shared with an attacker) never locks the operator out. A wrong
   * or missing token is 401, or 429 once the address is over its failure budget — except where
   * `limit` is false (the e-stop), which always answers 401 so that nothing about budgets stands
   * between an operator and the e-stop.
   */
  check(header: string | undefined, address: string, o: { limit?: boolean; now?: number } = {}): void {
    const m = /^Bearer\s+(\S+)$/i.exec(header ?? '');
    const given = m ? Buffer.from(m[1]!) : null;
    if (given && given.length === this.expected.length && timingSafeEqual(given, this.expected)) return;
    const now = o.now ?? Date.now();
    const recent = (this.failures.get(address) ?? []).filter((t) => now - t < this.windowMs);
    if (recent.length >= this.maxFailures) {
      this.failures.set(address, recent);
      if (o.limit !== false) throw new AuthError('WMRL_RATE_LIMITED', `too many failed authentications from ${address}; wait ${Math.ceil((recent[0]! + this.windowMs - now) / 1000)} s`);
    } else {
      recent.push(now);
      this.remember(address, recent, now);
    }
    throw new AuthError('WMRL_UNAUTHORIZED', header ? `the access token is wrong (Authorization: Bearer <token>; ${this.where})` : `this route needs the access token: Authorization: Bearer <token> (${this.where})`);
  }

  private remember(address: string, recent: number[], now: number): void {
    if (!this.failures.has(address) && this.failures.size >= MAX_ADDRESSES) {
      for (const [a, ts] of this.failures) if (ts.every((t) => now - t >= this.windowMs)) this.failures.delete(a);
      // Still full: the oldest entry goes (a Map iterates in insertion order).
      if (this.failures.size >= MAX_ADDRESSES) this.failures.delete(this.failures.keys().next().value!);
    }
    this.failures.set(address, recent);
  }
}
