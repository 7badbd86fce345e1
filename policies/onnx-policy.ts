// Runs a deployed policy .onnx on robot observations. The contract: input `obs` float32 [batch, D], the
// observation vector of the robot's layout (common/layout.ts: joint positions, joint velocities, features);
// output `action` float32 [batch, chunk · A] in the robot's action units. Policies that read a camera take
// `image` float32 [batch, H, W, 3] (RGB / 255; a camera of another size or encoding is decoded, centre-cropped and
// resized to it, common/image.ts) and those that read the instruction take `tokens` int64
// [batch, T] (the artifact's vocabulary and tokenizer, policies/artifact.ts). What the artifact declares in
// metadata_props — observation layout, action spec with limits, control rate — must match the
// robot, or loading fails with an error naming the first mismatch. A chunked policy's actions are sent
// one per control step before it is asked again.
import { readFileSync } from 'node:fs';
import { InferenceSession, Tensor } from 'onnxruntime-node';
import { readModelInfo, sessionOptions, type SessionOptions } from '../nn/index.js';
import { assertSameLayout, buildObservation, layoutDim, layoutFromJson, layoutOf, OBSERVATION_LAYOUT_KEY, type ObservationLayout } from '../common/layout.js';
import type { RobotObservation, RobotDeclaration } from '../common/robot.js';
import { cameraRgb } from '../common/image.js';
import { ARTIFACT_KEYS } from './artifact.js';
import { tokenize } from './tokenizer.js';

interface ImageInput {
  height: number;
  width: number;
}

interface InstructionInput {
  vocabulary: string[];
  maxTokens: number;
}

function json(text: string | undefined, key: string, path: string): unknown {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new Error(`${path} metadata '${key}': not JSON (${(e as Error).message})`);
  }
}

const close = (a: number, b: number) => a === b || Math.abs(a - b) <= 1e-6 * Math.max(1, Math.abs(a), Math.abs(b));

/** The first difference between the artifact's action spec and the robot's, in words, or null. */
function actionMismatch(art: { kind?: unknown; names?: unknown; low?: unknown; high?: unknown }, spec: RobotDeclaration): string | null {
  const a = spec.action;
  if (art.kind !== undefined && art.kind !== a.kind) return `action kind: policy has ${String(art.kind)}, robot has ${a.kind}`;
  const names = Array.isArray(art.names) ? (art.names as string[]) : [];
  const low = Array.isArray(art.low) ? (art.low as number[]) : [];
  const high = Array.isArray(art.high) ? (art.high as number[]) : [];
  for (let i = 0; i < Math.max(names.length, a.names.length); i++) {
    const show = (n: string | undefined, lo: number | undefined, hi: number | undefined) => (n === undefined ? 'nothing' : `'${n}' [${lo}, ${hi}]`);
    if (names[i] !== a.names[i] || !close(low[i] ?? NaN, a.low[i] ?? NaN) || !close(high[i] ?? NaN, a.high[i] ?? NaN)) {
      return `action ${i}: policy has ${show(names[i], low[i], high[i])}, robot has ${show(a.names[i], a.low[i], a.high[i])} (policy: ${names.length} actions, robot: ${a.names.length})`;
    }
  }
  return null;
}

export class OnnxPolicy {
  private queue: Float32Array[] = [];

  private constructor(
    private readonly session: InferenceSession,
    readonly layout: ObservationLayout,
    readonly actDim: number,
    readonly chunk: number,
    readonly path: string,
    private readonly robot: string,
    readonly image: ImageInput | undefined,
    readonly instruction: InstructionInput | undefined,
    /** metadata_props as stored (strings). */
    readonly metadata: Readonly<Record<string, string>>,
  ) {}

  /** `session`: ONNX Runtime's threads (its default: one per physical core); idle pool threads sleep rather than spin. */
  static async load(path: string, spec: RobotDeclaration, session: SessionOptions = {}): Promise<OnnxPolicy> {
    const info = readModelInfo(readFileSync(path));
    const md = info.metadata;
    const where = `${path} on robot ${spec.name}`;
    const obs = info.inputs.find((i) => i.name === 'obs');
    const act = info.outputs.find((o) => o.name === 'action');
    const known = ['obs', 'image', 'tokens'];
    const others = info.inputs.filter((i) => !known.includes(i.name)).map((i) => i.name);
    if (!obs || !act) throw new Error(`${path}: a policy needs an input 'obs' and an output 'action' (has inputs [${info.inputs.map((i) => i.name)}], outputs [${info.outputs.map((o) => o.name)}])`);
    if (others.length) throw new Error(`${path}: inputs [${others}] are not provided by this runner (only ${known.map((k) => `'${k}'`).join(', ')})`);
    const layout = layoutOf(spec);
    const meta = md[OBSERVATION_LAYOUT_KEY];
    if (meta !== undefined) assertSameLayout(layoutFromJson(meta, `${path} metadata '${OBSERVATION_LAYOUT_KEY}'`), layout, where, 'policy', 'robot');
    const D = Number(obs.shape.at(-1)), out = Number(act.shape.at(-1));
    const want = layoutDim(layout);
    if (D !== want) throw new Error(`${path}: 'obs' has ${D} entries but robot ${spec.name} provides ${want} (positions, velocities, ${layout.features.length} features)`);
    const chunk = Number(json(md[ARTIFACT_KEYS.chunk], ARTIFACT_KEYS.chunk, path) ?? 1);
    const A = out / chunk;
    if (!Number.isInteger(chunk) || chunk < 1 || !Number.isInteger(A)) throw new Error(`${path}: 'action' has ${out} entries, not a whole number of ${chunk}-step chunks`);
    if (A !== spec.action.names.length) throw new Error(`${path}: 'action' has ${A} entries${chunk > 1 ? ` per step (chunk ${chunk})` : ''} but robot ${spec.name} takes ${spec.action.names.length}`);
    const actionSpec = json(md[ARTIFACT_KEYS.action], ARTIFACT_KEYS.action, path) as Record<string, unknown> | undefined;
    if (actionSpec) {
      const m = actionMismatch(actionSpec, spec);
      if (m) throw new Error(`${where}: action specs differ: ${m}`);
    }
    const hz = json(md[ARTIFACT_KEYS.controlHz], ARTIFACT_KEYS.controlHz, path);
    if (typeof hz === 'number' && !close(hz, spec.controlHz)) throw new Error(`${where}: control rates differ: policy runs at ${hz} Hz, robot at ${spec.controlHz} Hz`);
    let image: ImageInput | undefined;
    const imgIn = info.inputs.find((i) => i.name === 'image');
    if (imgIn) {
      const [, h, w] = imgIn.shape.map(Number);
      image = { height: h!, width: w! };
      if (!spec.camera) throw new Error(`${where}: the policy reads a ${w}x${h} camera image; the robot declares no camera`);
    }
    let instruction: InstructionInput | undefined;
    const tokIn = info.inputs.find((i) => i.name === 'tokens');
    if (tokIn) {
      const vocabulary = json(md[ARTIFACT_KEYS.vocabulary], ARTIFACT_KEYS.vocabulary, path);
      if (!Array.isArray(vocabulary) || !vocabulary.every((w) => typeof w === 'string')) throw new Error(`${path}: reads 'tokens' but metadata '${ARTIFACT_KEYS.vocabulary}' is not a list of words`);
      instruction = { vocabulary, maxTokens: Number(tokIn.shape.at(-1)) };
    }
    return new OnnxPolicy(await InferenceSession.create(path, sessionOptions(session)), layout, A, chunk, path, spec.name, image, instruction, md);
  }

  get obsDim(): number {
    return layoutDim(this.layout);
  }

  /** Forgets the rest of a chunk (call at an episode's start). */
  reset(): void {
    this.queue = [];
  }

  async act(o: RobotObservation): Promise<Float32Array> {
    const next = this.queue.shift();
    if (next) return next;
    const feeds: Record<string, Tensor> = { obs: new Tensor('float32', buildObservation(this.layout, o, this.robot), [1, this.obsDim]) };
    if (this.image) feeds.image = new Tensor('float32', this.imageInput(o), [1, this.image.height, this.image.width, 3]);
    if (this.instruction) {
      if (o.instruction === undefined) throw new Error(`${this.path}: the policy reads the instruction; robot ${this.robot}'s observation has none`);
      feeds.tokens = new Tensor('int64', tokenize([o.instruction], this.instruction.vocabulary, this.instruction.maxTokens), [1, this.instruction.maxTokens]);
    }
    const out = Float32Array.from((await this.session.run(feeds)).action!.data as Float32Array);
    for (let k = 1; k < this.chunk; k++) this.queue.push(out.slice(k * this.actDim, (k + 1) * this.actDim));
    return out.slice(0, this.actDim);
  }

  private imageInput(o: RobotObservation): Float32Array {
    const { height, width } = this.image!;
    const img = o.image;
    if (!img) throw new Error(`${this.path}: the policy reads the camera image; robot ${this.robot}'s observation has none`);
    const rgb = cameraRgb(img, { width, height }, `${this.path}: robot ${this.robot}'s camera image`);
    const x = new Float32Array(rgb.length);
    for (let i = 0; i < rgb.length; i++) x[i] = rgb[i]! / 255;
    return x;
  }
}
