// Bearer-token auth for everything that changes state or moves a robot. The token is made at first
// start and kept in the data folder, readable by its owner only (0600). Repeated failures from one
// address are rate-limited, so the token cannot be guessed at network speed.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ApiError } from './errors.js';

export interface TokenFile {
  token: string;
  file: string;
  created: boolean;
}

export function loadOrCreateToken(dataDir: string): TokenFile {
  const file = join(dataDir, 'token');
  mkdirSync(dataDir, { recursive: true });
  if (existsSync(file)) {
    const mode = statSync(file).mode & 0o777;
    if (mode & 0o077) chmodSync(file, 0o600); // never left readable by others
    const token = readFileSync(file, 'utf8').trim();
    if (!/^[0-9a-f]{64}$/.test(token)) throw new Error(`${file}: not an access token made by this service (64 hex digits); delete it to make a new one`);
    return { token, file, created: false };
  }
  const token = randomBytes(32).toString('hex');
  writeFileSync(file, token + '\n', { mode: 0o600, flag: 'wx' });
  return { token, file, created: true };
}

export interface AuthOptions {
  /** Failed attempts an address may make within `windowMs` before it is refused with 429. */
  maxFailures?: number;
  windowMs?: number;
}

export class Auth {
  private readonly expected: Buffer;
  private readonly failures = new Map<string, number[]>();
  private readonly maxFailures: number;
  private readonly windowMs: number;

  constructor(token: string, o: AuthOptions = {}) {
    this.expected = Buffer.from(token);
    this.maxFailures = o.maxFailures ?? 10;
    this.windowMs = o.windowMs ?? 60_000;
  }

  /** Throws 429 while the address is over its failure budget, 401 for a missing or wrong token. */
  check(header: string | undefined, address: string, now = Date.now()): void {
    const recent = (this.failures.get(address) ?? []).filter((t) => now - t < this.windowMs);
    if (recent.length >= this.maxFailures) {
      this.failures.set(address, recent);
      throw new ApiError('WMRL_RATE_LIMITED', `too many failed authentications from ${address}; wait ${Math.ceil((recent[0]! + this.windowMs - now) / 1000)} s`);
    }
    const m = /^Bearer\s+(\S+)$/i.exec(header ?? '');
    const given = m ? Buffer.from(m[1]!) : null;
    if (given && given.length === this.expected.length && timingSafeEqual(given, this.expected)) return;
    recent.push(now);
    this.failures.set(address, recent);
    throw new ApiError('WMRL_UNAUTHORIZED', header ? 'the access token is wrong (Authorization: Bearer <token>, the token is in data/token)' : 'this route needs the access token: Authorization: Bearer <token> (the token is in data/token)');
  }
}
