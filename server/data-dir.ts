// The data folder holds recorded episodes, policies, run checkpoints and the access token: it is
// the owner's only. Folders are 0700, files 0600, whatever the umask; a folder made by an older
// version (with the default umask) is tightened at start.
import { chmodSync, closeSync, existsSync, lstatSync, mkdirSync, openSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

export const PRIVATE_DIR = 0o700;
export const PRIVATE_FILE = 0o600;

/** The episode database; SQLite gives its -wal and -shm files the database file's mode. */
export const EPISODES_DB = 'episodes.db';

/**
 * Creates the data folder (0700) and the episode database file (0600, empty: SQLite makes it a
 * database), and takes group and others' access off everything already in it. Symbolic links
 * are left alone (their targets are not the service's).
 */
export function preparePrivateDataDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR });
  tighten(dir);
  const db = join(dir, EPISODES_DB);
  if (!existsSync(db)) closeSync(openSync(db, 'a', PRIVATE_FILE));
}

function tighten(path: string): void {
  const st = lstatSync(path);
  if (st.isSymbolicLink()) return;
  if (st.isDirectory()) {
    for (const name of readdirSync(path)) tighten(join(path, name));
  }
  // Only group and others' bits go: the owner's stay as they were.
  if (st.mode & 0o077) chmodSync(path, st.mode & 0o700);
}
