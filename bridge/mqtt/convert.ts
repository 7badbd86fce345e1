// Conversions between the robot and episode types (common/, episodes/: typed arrays, binary images, ±Infinity limits) and
// their JSON wire form in messages.ts.

import type { RobotObservation, RobotDeclaration } from '../../common/robot.js';
import type { EpisodeMeta, EpisodeStep } from '../../episodes/types.js';
import type { EpisodeStepMsg, WireMeta, WireObs, WireSpec } from './messages.js';

export function obsToWire(obs: RobotObservation): WireObs {
  const w: WireObs = { stamp: obs.stamp, position: Array.from(obs.position), velocity: Array.from(obs.velocity) };
  if (obs.features) w.features = Array.from(obs.features);
  if (obs.image) {
    const { width, height, encoding, data } = obs.image;
    w.image = { width, height, encoding, data: Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('base64') };
  }
  if (obs.instruction !== undefined) w.instruction = obs.instruction;
  return w;
}

export function obsFromWire(w: WireObs): RobotObservation {
  const obs: RobotObservation = {
    stamp: w.stamp,
    position: Float64Array.from(w.position),
    velocity: Float64Array.from(w.velocity),
  };
  if (w.features) obs.features = Float32Array.from(w.features);
  if (w.image) {
    const { width, height, encoding, data } = w.image;
    obs.image = { width, height, encoding, data: new Uint8Array(Buffer.from(data, 'base64')) };
  }
  if (w.instruction !== undefined) obs.instruction = w.instruction;
  return obs;
}

const finiteOrNull = (x: number): number | null => (Number.isFinite(x) ? x : null);

export function specToWire(spec: RobotDeclaration): WireSpec {
  const w: WireSpec = {
    name: spec.name,
    joints: [...spec.joints],
    positionLimits: spec.positionLimits.map(([lo, hi]) => [finiteOrNull(lo), finiteOrNull(hi)]),
    velocityLimits: [...spec.velocityLimits],
    action: { kind: spec.action.kind, names: [...spec.action.names], low: [...spec.action.low], high: [...spec.action.high] },
    controlHz: spec.controlHz,
  };
  if (spec.jointUnits) w.jointUnits = [...spec.jointUnits];
  if (spec.features) w.features = [...spec.features];
  if (spec.featureUnits) w.featureUnits = [...spec.featureUnits];
  if (spec.sceneFeatures) w.sceneFeatures = [...spec.sceneFeatures];
  if (spec.camera) w.camera = { ...spec.camera };
  return w;
}

export function specFromWire(w: WireSpec): RobotDeclaration {
  const spec: RobotDeclaration = {
    name: w.name,
    joints: [...w.joints],
    positionLimits: w.positionLimits.map(([lo, hi]) => [lo ?? -Infinity, hi ?? Infinity]),
    velocityLimits: [...w.velocityLimits],
    action: { kind: w.action.kind, names: [...w.action.names], low: [...w.action.low], high: [...w.action.high] },
    controlHz: w.controlHz,
  };
  if (w.jointUnits) spec.jointUnits = [...w.jointUnits];
  if (w.features) spec.features = [...w.features];
  if (w.featureUnits) spec.featureUnits = [...w.featureUnits];
  if (w.sceneFeatures) spec.sceneFeatures = [...w.sceneFeatures];
  if (w.camera) spec.camera = { ...w.camera };
  return spec;
}

export function metaToWire(meta: EpisodeMeta): WireMeta {
  return { ...meta };
}

export function metaFromWire(w: WireMeta): EpisodeMeta {
  return { ...w };
}

export function stepToWire(episodeId: string, step: EpisodeStep, ackedUpTo: number): EpisodeStepMsg {
  const m: EpisodeStepMsg = {
    type: 'episode_step',
    episodeId,
    seq: step.seq,
    ackedUpTo,
    tObs: step.tObs,
    tAct: step.tAct,
    obs: obsToWire(step.obs),
    action: Array.from(step.action),
    reward: step.reward,
    done: step.done,
  };
  if (step.success !== undefined) m.success = step.success;
  return m;
}

export function stepFromWire(m: EpisodeStepMsg): EpisodeStep {
  const step: EpisodeStep = {
    seq: m.seq,
    tObs: m.tObs,
    tAct: m.tAct,
    obs: obsFromWire(m.obs),
    action: Float32Array.from(m.action),
    reward: m.reward,
    done: m.done,
  };
  if (m.success !== undefined) step.success = m.success;
  return step;
}
