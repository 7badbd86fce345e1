// Public surface of sim/: tasks, envs, profiles, rendering and scene export.
export { makeEnv, TASKS, taskDef, type MakeEnvOptions } from './registry.js';
export { VecEnv, type VecStep } from './vec.js';
export { MjEnv } from './env.js';
export { makeCustomEnv, parseRobotMapping, type RobotMapping } from './custom.js';
export { loadProfile, parseProfile, NOMINAL, CONTEXT_PARAMS, CONTEXT_NAMES, profileContext, randomProfile, type HardwareProfile } from './profiles.js';
export { SimModel, SimData, MujocoLoadError, mujoco, heapSize } from './mujoco.js';
export { renderImage } from './render.js';
export { SceneTwin } from './twin.js';
export { combinationSplit, regionOf, type Combination, type EvaluationSplit, type SplitOptions } from './split.js';
export { encodePng, decodePng } from '../common/png.js';
export { sceneStatic, bodyPoses, encodeFrame, decodeFrame, type SceneStatic, type SceneGeom } from './scene.js';
export type * from './types.js';
export { expertEpisode, expertSuccess, exploratoryEpisodes, type Demo, type ExploratoryData, type ExploratoryEpisode } from './rollout.js';
