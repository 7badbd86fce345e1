// worldmodel/: learned dynamics for WMRL (the mbrl-lib split: models apart from algorithms). Imports only nn/.
export {
  TransitionBuffer,
  validateTransitions,
  concatTransitions,
  selectTransitions,
  fitNormalizer,
  episodeHistory,
  historyLength,
  contextLength,
  repeatContext,
  type Transitions,
  type Normalizer,
} from './dataset.js';
export { EnsembleModel, type EnsembleConfig, type FitOptions, type FitReport, type EpochReport, type EvalReport, type Prediction, type Heads, type StepTensors } from './ensemble.js';
export { ModelEnv, repeatRows, type MemberMode, type ModelEnvOptions, type ModelStep, type GraphPolicy, type ImagineOptions, type Imagined } from './model-env.js';
export { scoreImagined, scoreWithVariance, successScore, replayScore, collapse, replayToSuccess, type CollapseMode, type ScoreOptions, type SuccessMode, type ReplayScore } from './scorers.js';
export { delayActions, identifyDelay, type DelayEpisode, type DelayEstimate } from './delay.js';
export { identifyContext, identifySystem, type ContextSearch, type ContextEstimate, type SystemEstimate } from './context.js';
export { fitRollout, rolloutLengths, runBootstrap, type RolloutFitOptions, type RolloutEpoch } from './multistep.js';
export { refitTransitions, refitModel, relabelScore, type RefitOptions, type RobotRewards, type RobotRowsEpisode } from './refit.js';
