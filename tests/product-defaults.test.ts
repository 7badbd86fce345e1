// The product's defaults are the recipe bench embodied measures: `wmrl train` and the service's job calibrate first,
// and the sim robot reports its last commands, unless told otherwise.
import { Value } from '@sinclair/typebox/value';
import { expect, it } from 'vitest';
import { ANCHORS_PER_UPDATE, CALIBRATE_EPISODES as BENCH_CALIBRATE_EPISODES, HEADLINE, SIZES, variants } from '../bench/cells/embodied.js';
import { COMMAND_HISTORY as BENCH_COMMAND_HISTORY } from '../bench/cells/embodied/setup.js';
import { calibrateEpisodes, embodiedConfig, hasRobustDemonstrator, imaginationIn, imagineMultiple, postTrainLr } from '../recipes/embodied.js';
import { CALIBRATED_WORLD_MODEL, CALIBRATE_EPISODES, EmbodiedOptions, POST_TRAIN_LR, SIM_COMMAND_HISTORY } from '../recipes/options.js';
import { POST_TRAIN_PG } from '../wmrl/sim-setup.js';
import { DEFAULT_CALIBRATE, QUICK_CALIBRATE, TASK_CALIBRATE, calibrationConfig } from '../wmrl/calibrate.js';

const config = (o: Record<string, unknown>) => embodiedConfig(Value.Default(EmbodiedOptions, structuredClone(o)) as EmbodiedOptions);

it('are the settings bench embodied measures', () => {
  expect(CALIBRATE_EPISODES).toBe(BENCH_CALIBRATE_EPISODES);
  expect(SIM_COMMAND_HISTORY).toBe(BENCH_COMMAND_HISTORY);
  // The trainer's schedule: standard GRPO's prompts and group, the updates, the anchors per update, and the groups imagined.
  const d = Value.Default(EmbodiedOptions, { robot: 'sim:reach:gap' }) as EmbodiedOptions;
  expect({ prompts: d.prompts, group: d.group, updates: d.updates, anchorGroups: d.anchorGroups }).toEqual({ prompts: SIZES.full.prompts, group: SIZES.full.groupSize, updates: SIZES.full.updates, anchorGroups: ANCHORS_PER_UPDATE });
  expect(d.imagine).toBeUndefined();
  const bench = variants(SIZES.full.prompts);
  expect(bench.full!.prompts).toBe(d.prompts * imagineMultiple(d, 'learned'));
  expect(bench.full_sim!.prompts).toBe(d.prompts * imagineMultiple(d, 'identified-sim'));
  expect(imagineMultiple({ imagine: 3 }, 'identified-sim')).toBe(3);
  // The bench heads its report with the arm whose options are the product's calibrated recipe.
  expect((bench[HEADLINE]!.options as { imagine?: string }).imagine ?? 'model').toBe(CALIBRATED_WORLD_MODEL === 'identified-sim' ? 'identified-sim' : 'model');
});

it("post-trains a calibrated clone at its own step, an uncalibrated one at POST_TRAIN_PG's, unless told", () => {
  expect(POST_TRAIN_LR.uncalibrated).toBe(POST_TRAIN_PG.optimizer.lr);
  expect(postTrainLr(undefined, CALIBRATE_EPISODES)).toBe(POST_TRAIN_LR.calibrated);
  expect(postTrainLr(undefined, 0)).toBe(POST_TRAIN_LR.uncalibrated);
  expect(postTrainLr(5e-4, CALIBRATE_EPISODES)).toBe(5e-4);
  expect(postTrainLr(5e-4, 0)).toBe(5e-4);
  expect(config({ robot: 'sim:reach:gap', lr: 2e-4 })).toMatchObject({ lr: 2e-4 });
  expect('lr' in config({ robot: 'sim:reach:gap' })).toBe(false);
  expect(() => config({ robot: 'sim:reach:gap', lr: 0 })).toThrow(/^lr: /);
});

it('a run left to its defaults calibrates where it can check the clone and the task has a demonstrator; a pure world-model run never', async () => {
  const can = { evaluates: true, demonstrator: true };
  const cal = (o: Record<string, unknown>, c = can) => calibrateEpisodes({ pureWm: false, task: 'reach', ...o }, c);
  expect(cal({})).toBe(CALIBRATE_EPISODES);
  expect(cal({ calibrate: 0 })).toBe(0);
  expect(cal({ pureWm: true })).toBe(0);
  expect(() => cal({ pureWm: true, calibrate: 4 })).toThrow(/^calibration \(--calibrate, calibrate\) 4: a pure world-model run \(--pure-wm, pureWm\) runs nothing on the robot/);
  // Nothing would check the clone it leaves (a robot YAML without --eval-episodes): only when asked.
  expect(cal({}, { evaluates: false, demonstrator: true })).toBe(0);
  expect(cal({ calibrate: 8 }, { evaluates: false, demonstrator: true })).toBe(8);
  // A task without a robust demonstrator has nothing to learn again from: none by default, refused when asked.
  expect(await hasRobustDemonstrator('reach')).toBe(true);
  expect(await hasRobustDemonstrator('pick')).toBe(false);
  expect(cal({ task: 'pick' }, { evaluates: true, demonstrator: false })).toBe(0);
  expect(() => cal({ task: 'pick', calibrate: 16 }, { evaluates: true, demonstrator: false })).toThrow(/^calibration \(--calibrate, calibrate\) 16: task pick has no robust demonstrator/);
  // The sim robot reports its last commands by default; a robot YAML's history is its own.
  expect(config({ robot: 'sim:reach:gap' })).toMatchObject({ commandHistory: SIM_COMMAND_HISTORY });
  expect(config({ robot: 'sim:reach:gap', commandHistory: 0 })).toMatchObject({ commandHistory: 0 });
  expect(config({ robot: 'launch/robots/mqtt-arm.yaml', task: 'reach' }).commandHistory).toBe(0);
  expect(() => config({ robot: 'sim:reach:gap', pureWm: true, calibrate: 4 })).toThrow(/a pure world-model run/);
});

it("calibration clones from the task's own number of demonstrations where the task needs more, a smoke run's few everywhere; push identifies in the sim", () => {
  const cfg = (task: string, quick = false) => calibrationConfig({ task, episodes: 16, quick, seed: 0 });
  const demos = (task: string, quick = false) => cfg(task, quick).demos;
  expect(demos('reach')).toBe(DEFAULT_CALIBRATE.demos);
  expect(demos('push')).toBe(TASK_CALIBRATE.push!.demos);
  expect(demos('push')).toBeGreaterThan(demos('reach'));
  expect(demos('push', true)).toBe(QUICK_CALIBRATE.demos);
  // Push's twice the demonstrations at half the epochs: about reach's gradient steps per demonstration's worth of data.
  expect(cfg('push').epochs).toBe(TASK_CALIBRATE.push!.epochs);
  expect(cfg('reach').epochs).toBe(DEFAULT_CALIBRATE.epochs);
  expect(cfg('push', true).epochs).toBe(QUICK_CALIBRATE.epochs);
  // Push's robot identified in the sim; reach's, and a smoke run's (minutes faster), through the world model.
  expect(cfg('push').identify).toBe('sim');
  expect(cfg('reach').identify).toBe('world-model');
  expect(cfg('push', true).identify).toBe('world-model');
});

it('a calibrated run imagines where the product says unless told; an uncalibrated one in the learned model, never the identified sim', () => {
  expect(imaginationIn({}, CALIBRATE_EPISODES)).toBe(CALIBRATED_WORLD_MODEL);
  expect(imaginationIn({}, 0)).toBe('learned');
  expect(imaginationIn({ worldModel: 'learned' }, CALIBRATE_EPISODES)).toBe('learned');
  expect(imaginationIn({ worldModel: 'identified-sim' }, 4)).toBe('identified-sim');
  // A run whose calibration resolves to none (a robot without an evaluation) cannot imagine in a sim it never identified.
  expect(() => imaginationIn({ worldModel: 'identified-sim' }, 0)).toThrow(/^world model \(--world-model, worldModel\) identified-sim: the run does not calibrate/);
});
