// The independent validator every exported model is checked against: onnx.checker (Debian python3-onnx).
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const PYTHON = '/usr/bin/python3';

/** Runs onnx.checker.check_model(full_check=True); returns (ir_version, opset) as Python sees them. */
export function onnxCheck(path: string): { ir: number; opset: number } {
  const script = [
    'import sys, onnx',
    'm = onnx.load(sys.argv[1])',
    'onnx.checker.check_model(m, full_check=True)',
    'print(m.ir_version, [o.version for o in m.opset_import if o.domain in ("", "ai.onnx")][0])',
  ].join('\n');
  let out: string;
  try {
    out = execFileSync(PYTHON, ['-c', script, path], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (e) {
    const err = e as { stderr?: string; message: string };
    if (/No module named 'onnx'/.test(err.stderr ?? '') || !existsSync(PYTHON)) {
      throw new Error('the onnx checker is missing: install Debian python3-onnx (apt-get install python3-onnx), as .ci/run does');
    }
    throw new Error(`onnx.checker rejected ${path}: ${err.stderr ?? err.message}`);
  }
  const [ir, opset] = out.trim().split(/\s+/).map(Number);
  return { ir: ir!, opset: opset! };
}
