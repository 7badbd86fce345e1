// A robot's e-stop latch, kept on disk (data/estop/<robot>.json) so that a restart does not release it:
// a robot that was e-stopped stays stopped until the operator resets it. The file exists while the
// latch is set; the reset removes it.
import { lstatSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Type, type Static } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { writeFileAtomic } from '../nn/index.js';

export const LATCH_FORMAT = 'wmrl-estop/1';

/** The latch file's content. */
export const LatchRecord = Type.Object({
  format: Type.Literal(LATCH_FORMAT),
  robot: Type.String(),
  reason: Type.String(),
  /** When it latched (ISO 8601). */
  at: Type.String(),
});
export type LatchRecord = Static<typeof LatchRecord>;

/** What a latch file says: not latched (no file), latched, or latched because the file cannot be read. */
export type LatchState = { latched: false } | { latched: true; reason: string; at: string | null; unreadable: boolean };

/** The latch file of robot `id` under the data folder. */
export const latchFile = (dataDir: string, id: string): string => join(dataDir, 'estop', `${encodeURIComponent(id)}.json`);

export class EstopLatch {
  constructor(
    readonly robot: string,
    readonly file: string,
  ) {}

  /** A file that cannot be parsed keeps the robot latched: only the operator's reset releases it. */
  read(): LatchState {
    // lstat, not exists: a dangling symlink in its place is there, unreadable, and so latched.
    if (!lstatSync(this.file, { throwIfNoEntry: false })) return { latched: false };
    let text: string;
    try {
      text = readFileSync(this.file, 'utf8');
    } catch (e) {
      return this.unreadable(`it cannot be read (${(e as Error).message})`);
    }
    let v: unknown;
    try {
      v = JSON.parse(text);
    } catch (e) {
      return this.unreadable(`it is not JSON (${(e as Error).message})`);
    }
    if (!Value.Check(LatchRecord, v)) {
      const first = Value.Errors(LatchRecord, v).First();
      return this.unreadable(`it is not a ${LATCH_FORMAT} record (${first ? `${first.path || '/'}: ${first.message}` : 'wrong shape'})`);
    }
    return { latched: true, reason: v.reason, at: v.at, unreadable: false };
  }

  private unreadable(why: string): LatchState {
    return { latched: true, reason: `its e-stop latch file ${this.file} cannot be read: ${why}; treated as e-stopped until reset`, at: null, unreadable: true };
  }

  set(reason: string, at = new Date()): void {
    const rec: LatchRecord = { format: LATCH_FORMAT, robot: this.robot, reason, at: at.toISOString() };
    mkdirSync(dirname(this.file), { recursive: true, mode: 0o700 });
    writeFileAtomic(this.file, [JSON.stringify(rec, null, 1)]);
  }

  clear(): void {
    rmSync(this.file, { force: true });
  }
}
