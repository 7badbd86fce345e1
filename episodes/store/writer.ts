// Who is writing an episode, and whether that writer is still alive. A pid alone is not enough:
// pids are reused, and a database outlives reboots. So a writer is recorded as
// (pid, process start time, boot id, random token): a live pid whose start time or boot differs is
// another process; inside this process the token says whether the store that began it is still open.

import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';

export interface WriterIdentity {
  pid: number;
  /** Random per store open; lets one process tell its own open stores from closed ones. */
  token: string;
  /** `<boot id>/<start time in clock ticks>` on Linux; '' where /proc is not available. */
  incarnation: string;
}

const openTokens = new Set<string>();

function readProc(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

/** Start time of a process (field 22 of /proc/<pid>/stat), or undefined when unknown. */
function processStartTicks(pid: number): string | undefined {
  const stat = readProc(`/proc/${pid}/stat`);
  if (stat === undefined) return undefined;
  // The command name (field 2) may contain spaces and parentheses: split after the last ')'.
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return rest[19];
}

/** Boot id and start time of a live process: differs for a later process with the same pid. */
export function incarnationOf(pid: number): string {
  const boot = readProc('/proc/sys/kernel/random/boot_id')?.trim();
  const start = processStartTicks(pid);
  return boot === undefined || start === undefined ? '' : `${boot}/${start}`;
}

/** A new identity for a store being opened by this process. */
export function newWriter(): WriterIdentity {
  const w = { pid: process.pid, token: randomUUID(), incarnation: incarnationOf(process.pid) };
  openTokens.add(w.token);
  return w;
}

export function releaseWriter(w: WriterIdentity): void {
  openTokens.delete(w.token);
}

/** True when the recorded writer may still be appending to its episode. */
export function writerAlive(pid: number, token: string, incarnation: string): boolean {
  if (pid === process.pid && incarnation === incarnationOf(process.pid)) return openTokens.has(token);
  try {
    process.kill(pid, 0);
  } catch (e) {
    // EPERM: the pid exists but belongs to another user; fall through to the incarnation check.
    if ((e as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  if (incarnation === '') return true; // no /proc when it was recorded: the live pid is all we know
  return incarnationOf(pid) === incarnation;
}
