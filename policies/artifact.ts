// The deployment artifact of any policy of the one interface: one `.onnx` whose graph is the policy's
// deterministic action (its mean, clipped to the robot's action limits) and whose metadata_props say
// everything a robot needs to run it — the observation layout, the action spec with limits, the
// normalization, the instruction vocabulary and tokenizer, the image format, the control rate, the
// policy version and the training run. policies/onnx-policy.ts loads it and checks it against a robot.
//
// Inputs:  obs    float32 [batch, D]            the robot's observation vector (common/layout.ts)
//          image  float32 [batch, H, W, 3]      RGB / 255 (only for policies that read images)
//          tokens int64   [batch, T]            the instruction's word ids (only for policies that read instructions)
//          features float32 [batch, F]          a frozen backbone's features (a head on a backbone; its one-file
//                                               artifact, backbone.ts exportBackboneHeadArtifact, computes them inside)
// Output:  action float32 [batch, chunk · A]    `chunk` consecutive actions in the robot's action units
import { Graph, exportOnnx, maximum, minimum, type ExportSpec, type ModelInfo } from '../nn/index.js';
import { OBSERVATION_LAYOUT_KEY, layoutDim, layoutEntries, layoutToJson, type ObservationLayout } from '../common/layout.js';
import type { ActionSpec } from '../common/robot.js';
import { declareContext, type Policy } from './types.js';

export const ARTIFACT_FORMAT = 'wmrl-policy/1';

/** The metadata_props keys of an artifact (values are JSON unless noted). */
export const ARTIFACT_KEYS = {
  format: 'format',
  kind: 'kind',
  layout: OBSERVATION_LAYOUT_KEY,
  action: 'action_spec',
  chunk: 'action_chunk',
  normalization: 'normalization',
  vocabulary: 'vocabulary',
  tokenizer: 'tokenizer',
  image: 'image',
  controlHz: 'control_hz',
  policyVersion: 'policy_version',
  runId: 'training_run',
} as const;

export const TOKENIZER_DOC = 'lower-case words (runs of [a-z0-9]); id 0 pads, id 1 is a word not in the vocabulary, vocabulary[k] is id k + 2; cut or padded to max_tokens';

export interface ArtifactMeta {
  /** The robot's observation layout; its length must be the policy's obsDim. */
  layout: ObservationLayout;
  /** The robot's action spec; names and limits per control step. */
  action: ActionSpec;
  controlHz: number;
  policyVersion: string;
  runId: string;
}

export function exportPolicyArtifact(policy: Policy, path: string, meta: ArtifactMeta): ModelInfo {
  return exportOnnx(path, policyArtifactSpec(policy, meta));
}

/** The artifact's graph, inputs, outputs and metadata_props, before serialization. */
export function policyArtifactSpec(policy: Policy, meta: ArtifactMeta): ExportSpec {
  const D = layoutDim(meta.layout), A = policy.actDim, k = policy.chunk * A;
  if (D !== policy.obsDim) throw new Error(`exportPolicyArtifact: the layout has ${D} entries, the policy reads ${policy.obsDim}`);
  const { names, low, high } = meta.action;
  if (names.length !== A || low.length !== A || high.length !== A) throw new Error(`exportPolicyArtifact: the action spec has ${names.length} names, ${low.length} lows, ${high.length} highs; the policy acts with ${A}`);
  if (!(meta.controlHz > 0)) throw new Error(`exportPolicyArtifact: controlHz must be > 0, got ${meta.controlHz}`);
  const spec = policy.inputs();
  const g = new Graph();
  const obs = g.input('obs', ['batch', D]);
  const ctx = declareContext(policy, g, 'batch');
  const rep = (v: readonly number[]) => Array.from({ length: k }, (_, i) => v[i % A]!);
  const action = minimum(maximum(policy.forward(obs, ctx).mean, g.constant(rep(low), [k])), g.constant(rep(high), [k]));
  const entries = layoutEntries(meta.layout).map((e) => e.label);
  return {
    inputs: [
      { name: 'obs', tensor: obs, doc: `observation [batch, ${D}]: ${entries.join(', ')}` },
      ...(ctx.image ? [{ name: 'image', tensor: ctx.image, doc: `camera image [batch, ${spec.image!.height}, ${spec.image!.width}, 3]: RGB / 255` }] : []),
      ...(ctx.tokens ? [{ name: 'tokens', tensor: ctx.tokens, doc: `instruction token ids [batch, ${spec.instruction!.maxTokens}] (metadata 'vocabulary', 'tokenizer')` }] : []),
      // a head on a frozen backbone: exportBackboneHeadArtifact (backbone.ts) joins the backbone's output here
      ...(ctx.features ? [{ name: 'features', tensor: ctx.features, doc: `frozen backbone features [batch, ${spec.features!.dim}]` }] : []),
    ],
    outputs: [{ name: 'action', tensor: action, doc: `action [batch, ${k}]: ${policy.chunk} step(s) of ${names.join(', ')} in [${low.join(', ')}] .. [${high.join(', ')}]` }],
    store: policy.store,
    graphName: 'policy',
    docString: `WMRL Bridge ${policy.kind} policy: the mean action, clipped to the robot's action limits.`,
    metadata: {
      [ARTIFACT_KEYS.format]: ARTIFACT_FORMAT,
      [ARTIFACT_KEYS.kind]: policy.kind,
      [ARTIFACT_KEYS.layout]: layoutToJson(meta.layout),
      observation_names: entries,
      [ARTIFACT_KEYS.action]: { kind: meta.action.kind, names, low, high },
      [ARTIFACT_KEYS.chunk]: policy.chunk,
      [ARTIFACT_KEYS.normalization]: { obs_mean: spec.obsMean, obs_std: spec.obsStd, ...(spec.image ? { image: 'rgb8 / 255' } : {}) },
      ...(spec.instruction ? { [ARTIFACT_KEYS.vocabulary]: spec.instruction.vocabulary, [ARTIFACT_KEYS.tokenizer]: { doc: TOKENIZER_DOC, max_tokens: spec.instruction.maxTokens } } : {}),
      ...(spec.image ? { [ARTIFACT_KEYS.image]: { height: spec.image.height, width: spec.image.width, channels: 3, layout: 'NHWC', encoding: 'rgb', scale: 1 / 255 } } : {}),
      [ARTIFACT_KEYS.controlHz]: meta.controlHz,
      [ARTIFACT_KEYS.policyVersion]: meta.policyVersion,
      [ARTIFACT_KEYS.runId]: meta.runId,
    },
  };
}
