// Bearer-token auth for everything that changes state or moves a robot. The token is made at first
// start and kept in the data folder, readable by its owner only (0600). Repeated failures from one
// address are rate-limited, so the token cannot be guessed at network speed.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { AuthError, BearerAuth } from '../common/bearer-auth.js';
import { loadOrCreateSecretFile } from '../common/secret-file.js';
import { ApiError } from './errors.js';

export type { AuthOptions } from '../common/bearer-auth.js';

export interface TokenFile {
  token: string;
  file: string;
  created: boolean;
}

export function loadOrCreateToken(dataDir: string): TokenFile {
  const file = join(dataDir, 'token');
  const { text, created } = loadOrCreateSecretFile(file, () => randomBytes(32).toString('hex') + '\n');
  const token = text.trim();
  if (!/^[0-9a-f]{64}$/.test(token)) throw new Error(`${file}: not an access token made by this service (64 hex digits); delete it to make a new one`);
  return { token, file, created };
}

/** The service's token check (common/bearer-auth.ts), refusing with the service's ApiError. */
export class Auth extends BearerAuth {
  override check(header: string | undefined, address: string, o: { limit?: boolean; now?: number } = {}): void {
    try {
      super.check(header, address, o);
    } catch (e) {
      if (e instanceof AuthError) throw new ApiError(e.code, e.message);
      throw e;
    }
  }
}
