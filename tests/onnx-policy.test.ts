// OnnxPolicy: the observation vector comes from the robot's declared layout; a policy whose metadata
// carries a layout runs only on a robot with the same one, and the error names the first mismatch.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { buildObservation, layoutDim, layoutOf, layoutToJson, OBSERVATION_LAYOUT_KEY, robotEntries, type ObservationLayout } from '../common/layout.js';
import { loadRobotConfig } from '../hardware/config.js';
import { SimRobot } from '../hardware/robots/sim.js';
import * as nn from '../nn/index.js';
import { OnnxPolicy } from '../policies/onnx-policy.js';

const dir = mkdtempSync(join(tmpdir(), 'onnx-policy-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** action = W obs (a fixed linear map), exported with `layout` in its metadata when given. */
function linearPolicy(name: string, obsDim: number, actDim: number, layout?: ObservationLayout | string): string {
  const store = new nn.ParamStore(1);
  const lin = new nn.Linear(store, 'pi', obsDim, actDim);
  const g = new nn.Graph();
  const obs = g.input('obs', ['batch', obsDim]);
  const path = join(dir, `${name}.onnx`);
  nn.exportOnnx(path, {
    store,
    inputs: [{ name: 'obs', tensor: obs, doc: 'observation vector' }],
    outputs: [{ name: 'action', tensor: lin.forward(obs), doc: 'action' }],
    metadata: layout ? { [OBSERVATION_LAYOUT_KEY]: typeof layout === 'string' ? layout : layoutToJson(layout) } : {},
  });
  return path;
}

describe('OnnxPolicy and the observation layout', () => {
  it('runs on the robot whose layout it carries; the stand-in YAML of reach declares the same layout as sim:reach', async () => {
    const robot = await SimRobot.create({ task: 'reach' });
    try {
      const layout = layoutOf(robot.spec);
      const path = linearPolicy('reach', layoutDim(layout), 2, layout);
      const p = await OnnxPolicy.load(path, robot.spec);
      const o = await robot.observe();
      expect(Array.from(buildObservation(p.layout, o))).toEqual(Array.from(robot.lastObs.state));
      expect(await p.act(o)).toHaveLength(2);
      // a policy trained on sim:reach also loads for the stand-in over rosbridge (launch/robots/sim-reach.yaml)
      await expect(OnnxPolicy.load(path, loadRobotConfig('launch/robots/sim-reach.yaml').spec)).resolves.toBeInstanceOf(OnnxPolicy);
      // and that YAML flags the same scene features as the sim task
      expect(robotEntries(layoutOf(loadRobotConfig('launch/robots/sim-reach.yaml').spec))).toEqual(robotEntries(layoutOf(robot.spec)));
    } finally {
      await robot[Symbol.asyncDispose]();
    }
  });

  it('a layout that differs is refused with the first mismatch named, even at the same dimension', async () => {
    const reach = await SimRobot.create({ task: 'reach' });
    const push = await SimRobot.create({ task: 'pick' });
    try {
      const layout = layoutOf(reach.spec);
      const path = linearPolicy('reach2', layoutDim(layout), 2, layout);
      await expect(OnnxPolicy.load(path, push.spec)).rejects.toThrow(/reach2.onnx on robot sim-pick-nominal: observation layouts differ: joint 0: policy has 'shoulder' \(rad\), robot has 'x' \(m\)/);
      // same joints and feature count, one feature renamed: still refused, naming it
      const rename = (f: string) => (f === 'green target x' ? 'green pad x' : f);
      const renamed = { ...reach.spec, features: reach.spec.features!.map(rename), sceneFeatures: reach.spec.sceneFeatures!.map(rename) };
      await expect(OnnxPolicy.load(path, renamed)).rejects.toThrow("feature 4: policy has 'green target x' (m), robot has 'green pad x' (m)");
      const corrupt = linearPolicy('corrupt', layoutDim(layout), 2);
      // no layout in the metadata: only the dimension is checked
      await expect(OnnxPolicy.load(corrupt, reach.spec)).resolves.toBeInstanceOf(OnnxPolicy);
      await expect(OnnxPolicy.load(corrupt, push.spec)).rejects.toThrow(`'obs' has ${layoutDim(layout)} entries but robot sim-pick-nominal provides ${layoutDim(layoutOf(push.spec))}`);
      const garbled = linearPolicy('garbled', layoutDim(layout), 2, '{"joints": [{"name": "shoulder"}], "features": []}');
      await expect(OnnxPolicy.load(garbled, reach.spec)).rejects.toThrow(/garbled.onnx metadata 'observation_layout': observation layout invalid at \/joints\/0/);
    } finally {
      await reach[Symbol.asyncDispose]();
      await push[Symbol.asyncDispose]();
    }
  });
});
