// `wmrl episodes export` and `wmrl export` through the real entry point: OUT/ or --rosbag2 writes a rosbag2 bag
// folder, OUT.mcap one file; contradictory flags and zstd on a Node without it are refused, naming the problem.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZSTD_AVAILABLE } from '../episodes/mcap/export.js';
import { METADATA_FILE } from '../episodes/mcap/rosbag2.js';
import { EpisodeStore } from '../episodes/store/store.js';
import { richEpisode } from './helpers/episode-data.js';

const dir = mkdtempSync(join(tmpdir(), 'wmrl-export-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const db = join(dir, 'cli.db');
beforeAll(() => {
  const e = richEpisode('ep-cli', 4);
  const store = EpisodeStore.open(db);
  try {
    for (const s of e.steps) store.ingest(e.meta, s);
    store.finish(e.meta.id, { status: 'complete' });
  } finally {
    store.close();
  }
});

describe('wmrl episodes export', () => {
  const wmrl = (...args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', 'bin/wmrl.ts', ...args], { encoding: 'utf8', timeout: 120_000 });

  it('OUT/ (or --rosbag2) writes a bag folder; OUT.mcap one file; bad flag combinations are refused, naming them', () => {
    const folder = wmrl('episodes', 'export', 'ep-cli', join(dir, 'cli-bag') + '/', '--store', db);
    expect(folder.status, folder.stderr).toBe(0);
    expect(folder.stdout).toMatch(/wrote rosbag2 bag .*cli-bag\/ \(\d+ messages, \d+ topics\): metadata\.yaml, cli-bag_0\.mcap/);
    expect(readdirSync(join(dir, 'cli-bag')).sort()).toEqual(['cli-bag_0.mcap', METADATA_FILE]);
    const flag = wmrl('episodes', 'export', 'ep-cli', join(dir, 'cli-bag2'), '--rosbag2', '--lz4', '--store', db);
    expect(flag.status, flag.stderr).toBe(0);
    expect(existsSync(join(dir, 'cli-bag2', 'cli-bag2_0.mcap'))).toBe(true);
    const one = wmrl('episodes', 'export', 'ep-cli', join(dir, 'cli.mcap'), '--store', db);
    expect(one.status, one.stderr).toBe(0);
    expect(existsSync(join(dir, 'cli.mcap'))).toBe(true);

    const both = wmrl('episodes', 'export', 'ep-cli', join(dir, 'x.mcap'), '--lz4', '--zstd', '--store', db);
    expect([both.status, both.stderr]).toEqual([1, expect.stringMatching(/--lz4 and --zstd: give one chunk compression/)]);
    const named = wmrl('episodes', 'export', 'ep-cli', join(dir, 'y.mcap'), '--rosbag2', '--store', db);
    expect([named.status, named.stderr]).toEqual([1, expect.stringMatching(/y\.mcap: a rosbag2 bag is a folder/)]);
    const again = wmrl('episodes', 'export', 'ep-cli', join(dir, 'cli-bag') + '/', '--store', db);
    expect([again.status, again.stderr]).toEqual([1, expect.stringMatching(/cli-bag\/?: the folder exists and is not empty/)]);
    const z = wmrl('episodes', 'export', 'ep-cli', join(dir, 'z.mcap'), '--zstd', '--store', db);
    if (ZSTD_AVAILABLE) expect(z.status, z.stderr).toBe(0);
    else expect([z.status, z.stderr]).toEqual([1, expect.stringMatching(/zstd compression needs node:zlib's zstd \(Node >= 22\.15\)/)]);
  });

  it('wmrl export --rosbag2 writes one bag folder per episode', () => {
    const r = wmrl('export', 'ep-cli', '--out', join(dir, 'many'), '--rosbag2', '--store', db, '--json');
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ episodes: [{ id: 'ep-cli', file: join(dir, 'many', 'ep-cli') }] });
    expect(readdirSync(join(dir, 'many', 'ep-cli')).sort()).toEqual(['ep-cli_0.mcap', METADATA_FILE]);
  });
});
