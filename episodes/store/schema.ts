// The episode database layout, its versions, and the step <-> row codec.
// Arrays are stored as raw little-endian BLOBs (Float64 positions/velocities, Float32 actions and
// features): 8 or 4 bytes a value, and exact (NaN and -0 included), unlike JSON.

import type Database from 'better-sqlite3';
import type { ImageEncoding } from '../../common/robot.js';
import type { EpisodeStep } from '../types.js';
import { EpisodeStoreError } from './validate.js';

/** One migration brings the database from version i to i + 1 (index i); it runs in a transaction. */
export type Migration = (db: Database.Database) => void;

export const MIGRATIONS: readonly Migration[] = [
  (db) => {
    db.exec(`
      CREATE TABLE episodes (
        id               TEXT PRIMARY KEY,
        robot            TEXT NOT NULL,
        policy_version   TEXT NOT NULL,
        hardware_profile TEXT NOT NULL,
        task             TEXT,
        instruction      TEXT,
        started_at       REAL NOT NULL,
        extra            TEXT,
        status           TEXT NOT NULL CHECK (status IN ('recording', 'complete', 'partial')),
        success          INTEGER,
        finished_at      REAL,
        -- the writer: a local process (pid, incarnation, token) or a remote robot (pid NULL)
        writer_pid         INTEGER,
        writer_token       TEXT,
        writer_incarnation TEXT,
        -- array lengths fixed by the first step (n_features -1: no features)
        n_joints   INTEGER,
        n_action   INTEGER,
        n_features INTEGER,
        duplicates INTEGER NOT NULL DEFAULT 0
      );
      CREATE INDEX episodes_status_robot ON episodes (status, robot);
      CREATE TABLE steps (
        episode_id     TEXT NOT NULL REFERENCES episodes (id) ON DELETE CASCADE,
        seq            INTEGER NOT NULL,
        t_obs          REAL NOT NULL,
        t_act          REAL NOT NULL,
        stamp          REAL NOT NULL,
        position       BLOB NOT NULL,
        velocity       BLOB NOT NULL,
        features       BLOB,
        image_width    INTEGER,
        image_height   INTEGER,
        image_encoding TEXT,
        image          BLOB,
        instruction    TEXT,
        action         BLOB NOT NULL,
        reward         REAL,
        reward_nan     INTEGER NOT NULL DEFAULT 0,
        done           INTEGER NOT NULL,
        success        INTEGER,
        PRIMARY KEY (episode_id, seq)
      ) WITHOUT ROWID;
    `);
  },
];

/** Brings the database to the latest version; refuses a database written by newer code. */
export function migrate(db: Database.Database, migrations: readonly Migration[], file: string): void {
  const version = db.pragma('user_version', { simple: true }) as number;
  if (version > migrations.length) {
    throw new EpisodeStoreError(
      'SCHEMA_TOO_NEW',
      undefined,
      `${file}: episode database is schema version ${version}, this code knows up to ${migrations.length}`,
    );
  }
  for (let v = version; v < migrations.length; v++) {
    db.transaction(() => {
      migrations[v](db);
      db.pragma(`user_version = ${v + 1}`);
    }).immediate();
  }
}

export interface StepRow {
  episode_id: string;
  seq: number;
  t_obs: number;
  t_act: number;
  stamp: number;
  position: Buffer;
  velocity: Buffer;
  features: Buffer | null;
  image_width: number | null;
  image_height: number | null;
  image_encoding: string | null;
  image: Buffer | null;
  instruction: string | null;
  action: Buffer;
  reward: number | null;
  reward_nan: number;
  done: number;
  success: number | null;
}

const bytes = (a: ArrayBufferView): Buffer => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
// Copy into a fresh, aligned buffer: SQLite's blobs need not be 8-byte aligned.
const f64 = (b: Buffer): Float64Array => new Float64Array(new Uint8Array(b).buffer);
const f32 = (b: Buffer): Float32Array => new Float32Array(new Uint8Array(b).buffer);

export function stepToRow(episodeId: string, s: EpisodeStep): StepRow {
  const img = s.obs.image;
  return {
    episode_id: episodeId,
    seq: s.seq,
    t_obs: s.tObs,
    t_act: s.tAct,
    stamp: s.obs.stamp,
    position: bytes(s.obs.position),
    velocity: bytes(s.obs.velocity),
    features: s.obs.features ? bytes(s.obs.features) : null,
    image_width: img?.width ?? null,
    image_height: img?.height ?? null,
    image_encoding: img?.encoding ?? null,
    image: img ? bytes(img.data) : null,
    instruction: s.obs.instruction ?? null,
    action: bytes(s.action),
    // SQLite stores NaN as NULL; keep the fact that the reward was NaN apart from "no reward".
    reward: Number.isNaN(s.reward) ? null : s.reward,
    reward_nan: Number.isNaN(s.reward) ? 1 : 0,
    done: s.done ? 1 : 0,
    success: s.success === undefined ? null : s.success ? 1 : 0,
  };
}

export function rowToStep(r: StepRow): EpisodeStep {
  const step: EpisodeStep = {
    seq: r.seq,
    tObs: r.t_obs,
    tAct: r.t_act,
    obs: { stamp: r.stamp, position: f64(r.position), velocity: f64(r.velocity) },
    action: f32(r.action),
    reward: r.reward_nan ? NaN : (r.reward ?? NaN),
    done: r.done === 1,
  };
  if (r.features !== null) step.obs.features = f32(r.features);
  if (r.image !== null) {
    step.obs.image = {
      width: r.image_width ?? 0,
      height: r.image_height ?? 0,
      encoding: r.image_encoding as ImageEncoding,
      data: new Uint8Array(r.image),
    };
  }
  if (r.instruction !== null) step.obs.instruction = r.instruction;
  if (r.success !== null) step.success = r.success === 1;
  return step;
}
