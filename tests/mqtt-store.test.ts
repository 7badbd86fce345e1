// Episodes uploaded over MQTT land in the real SQLite episode store, exactly once, acknowledged
// only after they are committed.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EpisodeIngest, EpisodeUploader } from '../bridge/mqtt/episodes.js';
import { storeSink } from '../bridge/mqtt/store-sink.js';
import { EpisodeStore } from '../episodes/store/store.js';
import type { EpisodeMeta, EpisodeStep } from '../episodes/types.js';
import { BROKERS } from './helpers/mqtt-brokers.js';

const dir = mkdtempSync(join(tmpdir(), 'mqtt-store-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const step = (seq: number, last: boolean): EpisodeStep => ({
  seq,
  tObs: seq * 0.02,
  tAct: seq * 0.02 + 0.002,
  obs: { stamp: seq * 0.02, position: Float64Array.of(seq, -seq - 0.5), velocity: Float64Array.of(0.5, 0), features: Float32Array.of(1, 2, 3), instruction: 'reach the red target', image: { width: 2, height: 1, encoding: 'rgb8', data: Uint8Array.of(1, 2, 3, 4, 5, seq) } },
  action: Float32Array.of(0.25, -0.5),
  reward: seq / 10,
  done: last,
  ...(last ? { success: true } : {}),
});

describe.each(BROKERS)('MQTT episode upload into the SQLite store ($name)', (kind) => {
  it('three episodes arrive complete and identical; re-sent steps are not stored twice', async () => {
    const broker = await kind.start();
    const store = EpisodeStore.open(join(dir, `${kind.name}.db`), { synchronous: 'NORMAL' });
    const errors: Error[] = [];
    try {
      const ingest = await EpisodeIngest.create(await broker.client('svc'), storeSink(store), { onError: (e) => errors.push(e) });
      const up = await EpisodeUploader.create(await broker.client('robot-1'), 'robot-1', { onError: (e) => errors.push(e), resendMs: 100 });
      const sent: Array<{ meta: EpisodeMeta; steps: EpisodeStep[] }> = [];
      for (let k = 0; k < 3; k++) {
        const meta: EpisodeMeta = { id: `ep-${kind.name}-${k}`, robot: 'robot-1', policyVersion: 'v1', hardwareProfile: 'real', startedAt: 1_700_000_000_000 + k, instruction: 'reach the red target' };
        const steps = Array.from({ length: 10 }, (_, s) => step(s, s === 9));
        up.begin(meta);
        for (const s of steps) up.step(meta.id, s);
        await up.end(meta.id);
        sent.push({ meta, steps });
      }
      await up.drained();
      expect(up.pendingSteps).toBe(0);
      for (const { meta, steps } of sent) {
        const e = store.get(meta.id);
        expect(e.status).toBe('complete');
        expect(e.steps).toEqual(steps);
      }
      // A robot that never saw the acks re-sends everything: the store keeps one copy.
      const again = await EpisodeUploader.create(await broker.client('robot-1b'), 'robot-1', { onError: (e) => errors.push(e), resendMs: 100 });
      again.begin(sent[0]!.meta);
      for (const s of sent[0]!.steps) again.step(sent[0]!.meta.id, s);
      await again.end(sent[0]!.meta.id);
      await again.drained();
      expect(store.get(sent[0]!.meta.id).steps).toHaveLength(10);
      expect(store.list().find((x) => x.meta.id === sent[0]!.meta.id)!.duplicates + ingest.stats.duplicates).toBeGreaterThanOrEqual(10);
      expect(errors).toEqual([]);
      ingest.close();
    } finally {
      store.close();
      await broker.close();
    }
  });
});
