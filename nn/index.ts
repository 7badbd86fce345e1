// nn/: a tensor graph builder with reverse-mode autodiff that emits ONNX, run by ONNX Runtime.
export * from './shape.js';
export { Graph, Tensor, topoSort, type DType } from './graph.js';
export * from './ops.js';
export { grad, sumToShape } from './autodiff.js';
export { ParamStore, writeFileAtomic, readTensorFile, writeTensorFile, type Init, type ParamValue } from './params.js';
export * from './modules.js';
export { Trainer, opFlopsPerRow, type AdamConfig, type TrainerConfig, type StepResult } from './train.js';
export { Program, tensor, f32, ort, sessionOptions, type SessionOptions } from './runtime.js';
export { toOnnx, readModelInfo, OPSET, IR_VERSION, type ModelInfo, type NamedTensor, type OnnxModelSpec } from './onnx.js';
export { exportModel, exportOnnx, readOnnxInfo, type ExportSpec } from './export.js';
export { composeModels, type ComposeOptions } from './compose.js';
export { evaluate } from './reference.js';
export { nd, type ND } from './ndarray.js';
export { Rng, type RngState } from './rng.js';
