// Standalone inference models: parameters baked in as initializers, inputs and outputs named and
// documented, deployment facts in metadata_props, so a robot needs nothing else to run the file.
import { readFileSync } from 'node:fs';
import { readModelInfo, toOnnx, type ModelInfo, type NamedTensor } from './onnx.js';
import { writeFileAtomic, type ParamStore } from './params.js';

export interface ExportSpec {
  inputs: NamedTensor[];
  outputs: NamedTensor[];
  store: ParamStore;
  graphName?: string;
  docString?: string;
  /** String values are stored as is; anything else as JSON. */
  metadata?: Readonly<Record<string, unknown>>;
}

export function exportModel(spec: ExportSpec): Uint8Array {
  const metadata: Record<string, string> = {};
  for (const [k, v] of Object.entries(spec.metadata ?? {})) metadata[k] = typeof v === 'string' ? v : JSON.stringify(v);
  return toOnnx({
    inputs: spec.inputs,
    outputs: spec.outputs,
    initializers: new Map(spec.store.entries()),
    graphName: spec.graphName ?? 'policy',
    docString: spec.docString,
    metadata,
  });
}

/** Writes the model atomically to `path` and returns what a reader of the file will see. */
export function exportOnnx(path: string, spec: ExportSpec): ModelInfo {
  const bytes = exportModel(spec);
  writeFileAtomic(path, [bytes]);
  return readModelInfo(bytes);
}

export function readOnnxInfo(path: string): ModelInfo {
  return readModelInfo(readFileSync(path));
}
