// Runs a deployed policy .onnx on robot observations. The contract: input `obs` float32
// [batch, D] with D = joints (positions) + joints (velocities) + the robot's features, in that
// order; output `action` float32 [batch, A] in the robot's action units.
import { readFileSync } from 'node:fs';
import { InferenceSession, Tensor } from 'onnxruntime-node';
import { readModelInfo } from '../nn/index.js';
import type { RobotObservation, RobotDeclaration } from '../common/robot.js';

export class OnnxPolicy {
  private constructor(private readonly session: InferenceSession, readonly obsDim: number, readonly actDim: number, readonly path: string) {}

  static async load(path: string, spec: RobotDeclaration): Promise<OnnxPolicy> {
    const info = readModelInfo(readFileSync(path));
    const obs = info.inputs.find((i) => i.name === 'obs');
    const act = info.outputs.find((o) => o.name === 'action');
    const others = info.inputs.filter((i) => i.name !== 'obs').map((i) => i.name);
    if (!obs || !act) throw new Error(`${path}: a policy needs an input 'obs' and an output 'action' (has inputs [${info.inputs.map((i) => i.name)}], outputs [${info.outputs.map((o) => o.name)}])`);
    if (others.length) throw new Error(`${path}: inputs [${others}] are not provided by this runner (only 'obs')`);
    const D = Number(obs.shape.at(-1)), A = Number(act.shape.at(-1));
    const want = spec.joints.length * 2 + (spec.features?.length ?? 0);
    if (D !== want) throw new Error(`${path}: 'obs' has ${D} entries but robot ${spec.name} provides ${want} (positions, velocities, ${spec.features?.length ?? 0} features)`);
    if (A !== spec.action.names.length) throw new Error(`${path}: 'action' has ${A} entries but robot ${spec.name} takes ${spec.action.names.length}`);
    return new OnnxPolicy(await InferenceSession.create(path), D, A, path);
  }

  static observationVector(o: RobotObservation): Float32Array {
    const f = o.features ?? new Float32Array(0);
    const v = new Float32Array(o.position.length * 2 + f.length);
    v.set(o.position, 0);
    v.set(o.velocity, o.position.length);
    v.set(f, o.position.length * 2);
    return v;
  }

  async act(o: RobotObservation): Promise<Float32Array> {
    const out = await this.session.run({ obs: new Tensor('float32', OnnxPolicy.observationVector(o), [1, this.obsDim]) });
    return Float32Array.from(out.action!.data as Float32Array);
  }
}
