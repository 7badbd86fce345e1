// A secret kept in a file only its owner may read (the access token, the MQTT logins).
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

/** Reads `file`, tightening a looser mode to 0600, or makes it once from `make()` (0600, never overwriting one made meanwhile). */
export function loadOrCreateSecretFile(file: string, make: () => string): { text: string; created: boolean } {
  mkdirSync(dirname(file), { recursive: true });
  if (existsSync(file)) {
    if (statSync(file).mode & 0o077) chmodSync(file, 0o600);
    return { text: readFileSync(file, 'utf8'), created: false };
  }
  const text = make();
  writeFileSync(file, text, { mode: 0o600, flag: 'wx' });
  return { text, created: true };
}
