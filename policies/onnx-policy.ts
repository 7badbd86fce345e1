// Runs a deployed policy .onnx on robot observations. The contract: input `obs` float32 [batch, D], the
// observation vector of the robot's layout (common/layout.ts: joint positions, joint velocities, features);
// output `action` float32 [batch, A] in the robot's action units. A policy that carries its layout in
// metadata_props (`observation_layout`) runs only on a robot with the same layout.
import { readFileSync } from 'node:fs';
import { InferenceSession, Tensor } from 'onnxruntime-node';
import { readModelInfo } from '../nn/index.js';
import { assertSameLayout, buildObservation, layoutDim, layoutFromJson, layoutOf, OBSERVATION_LAYOUT_KEY, type ObservationLayout } from '../common/layout.js';
import type { RobotObservation, RobotDeclaration } from '../common/robot.js';

export class OnnxPolicy {
  private constructor(
    private readonly session: InferenceSession,
    readonly layout: ObservationLayout,
    readonly actDim: number,
    readonly path: string,
    private readonly robot: string,
  ) {}

  static async load(path: string, spec: RobotDeclaration): Promise<OnnxPolicy> {
    const info = readModelInfo(readFileSync(path));
    const obs = info.inputs.find((i) => i.name === 'obs');
    const act = info.outputs.find((o) => o.name === 'action');
    const others = info.inputs.filter((i) => i.name !== 'obs').map((i) => i.name);
    if (!obs || !act) throw new Error(`${path}: a policy needs an input 'obs' and an output 'action' (has inputs [${info.inputs.map((i) => i.name)}], outputs [${info.outputs.map((o) => o.name)}])`);
    if (others.length) throw new Error(`${path}: inputs [${others}] are not provided by this runner (only 'obs')`);
    const layout = layoutOf(spec);
    const meta = info.metadata[OBSERVATION_LAYOUT_KEY];
    if (meta !== undefined) assertSameLayout(layoutFromJson(meta, `${path} metadata '${OBSERVATION_LAYOUT_KEY}'`), layout, `${path} on robot ${spec.name}`, 'policy', 'robot');
    const D = Number(obs.shape.at(-1)), A = Number(act.shape.at(-1));
    const want = layoutDim(layout);
    if (D !== want) throw new Error(`${path}: 'obs' has ${D} entries but robot ${spec.name} provides ${want} (positions, velocities, ${layout.features.length} features)`);
    if (A !== spec.action.names.length) throw new Error(`${path}: 'action' has ${A} entries but robot ${spec.name} takes ${spec.action.names.length}`);
    return new OnnxPolicy(await InferenceSession.create(path), layout, A, path, spec.name);
  }

  get obsDim(): number {
    return layoutDim(this.layout);
  }

  async act(o: RobotObservation): Promise<Float32Array> {
    const out = await this.session.run({ obs: new Tensor('float32', buildObservation(this.layout, o, this.robot), [1, this.obsDim]) });
    return Float32Array.from(out.action!.data as Float32Array);
  }
}
