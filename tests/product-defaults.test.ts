// The product's defaults are the recipe bench embodied measures: `wmrl train` and the service's job calibrate first,
// and the sim robot reports its last commands, unless told otherwise.
import { Value } from '@sinclair/typebox/value';
import { expect, it } from 'vitest';
import { CALIBRATE_EPISODES as BENCH_CALIBRATE_EPISODES } from '../bench/cells/embodied.js';
import { COMMAND_HISTORY as BENCH_COMMAND_HISTORY } from '../bench/cells/embodied/setup.js';
import { embodiedConfig } from '../recipes/embodied.js';
import { CALIBRATE_EPISODES, EmbodiedOptions, SIM_COMMAND_HISTORY } from '../recipes/options.js';

const config = (o: Record<string, unknown>) => embodiedConfig(Value.Default(EmbodiedOptions, structuredClone(o)) as EmbodiedOptions);

it('are the settings bench embodied measures', () => {
  expect(CALIBRATE_EPISODES).toBe(BENCH_CALIBRATE_EPISODES);
  expect(SIM_COMMAND_HISTORY).toBe(BENCH_COMMAND_HISTORY);
});

it('a run left to its defaults calibrates and reads the last commands; a pure world-model run calibrates on nothing', () => {
  expect(config({ robot: 'sim:reach:gap' })).toMatchObject({ calibrate: CALIBRATE_EPISODES, commandHistory: SIM_COMMAND_HISTORY });
  expect(config({ robot: 'sim:reach:gap', algo: 'standard' })).toMatchObject({ calibrate: CALIBRATE_EPISODES });
  expect(config({ robot: 'sim:reach:gap', calibrate: 0, commandHistory: 0 })).toMatchObject({ calibrate: 0, commandHistory: 0 });
  expect(config({ robot: 'sim:reach:gap', pureWm: true })).toMatchObject({ calibrate: 0 });
  expect(() => config({ robot: 'sim:reach:gap', pureWm: true, calibrate: 4 })).toThrow(/^calibration \(--calibrate, calibrate\) 4: a pure world-model run \(--pure-wm, pureWm\) runs nothing on the robot/);
  // A robot YAML's history is its own: the sim default does not reach it.
  expect(config({ robot: 'launch/robots/mqtt-arm.yaml', task: 'reach' }).commandHistory).toBe(0);
});
