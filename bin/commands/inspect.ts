// `wmrl inspect`: what a deployed .onnx file expects and declares.
import * as nn from '../../nn/index.js';
import { printJson } from '../json-output.js';

export async function inspect(path: string, o: { json?: boolean } = {}): Promise<void> {
  const info = nn.readOnnxInfo(path);
  if (o.json) return printJson({ file: path, ...info });
  console.log(`${path}: IR version ${info.irVersion}, opset ${info.opset}, producer ${info.producer || '?'}`);
  for (const [kind, vs] of [['input', info.inputs], ['output', info.outputs]] as const) {
    for (const v of vs) console.log(`  ${kind} ${v.name}: ${v.dtype} [${v.shape.join(', ')}]${v.doc ? ` — ${v.doc}` : ''}`);
  }
  for (const [k, v] of Object.entries(info.metadata)) console.log(`  metadata ${k} = ${v}`);
}

