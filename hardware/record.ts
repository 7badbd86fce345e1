// Runs a policy on a robot in real time, through the safety layer, and records the episode as it
// happens: each step goes to the store before the next control tick (committed there, for the store
// itself; a robot's control thread hands it to the service's thread, which commits it).
import { randomUUID } from 'node:crypto';
import type { EpisodeSink } from '../episodes/store/store.js';
import { SafetyStop, type SafetyLayer } from './safety.js';
import type { RobotObservation } from '../common/robot.js';
import type { ResetOptions } from './types.js';
import type { EpisodeMeta, EpisodeStatus } from '../episodes/types.js';

export type Policy = (obs: RobotObservation) => Float32Array | Promise<Float32Array>;

/**
 * Per-step outcome, asked right after each command; robots that cannot score themselves leave reward 0
 * and never end early. A remote robot's scorer waits for the robot to report the step (RosRobot.outcomeOfLastCommand).
 */
export type Scorer = () => StepOutcome | Promise<StepOutcome>;
export interface StepOutcome { reward: number; done: boolean; success?: boolean }

export interface RunEpisodeOptions {
  robot: SafetyLayer;
  /** Options of the reset that starts the episode (a seed selects the start state). */
  reset?: ResetOptions;
  policy: Policy;
  maxSteps: number;
  store?: EpisodeSink;
  meta: Omit<EpisodeMeta, 'id' | 'startedAt'> & { id?: string };
  score?: Scorer;
  /** Control ticks are paced at the robot's rate; false runs as fast as the robot answers (sim). */
  realTime?: boolean;
  signal?: AbortSignal;
  onStep?: (seq: number, reward: number) => void;
  /** Called with each action as the robot actually received it (after the safety layer's clipping). */
  onSent?: (action: Float32Array) => void;
}

export interface EpisodeOutcome {
  id: string;
  steps: number;
  status: EpisodeStatus;
  success?: boolean;
  return: number;
  stoppedBy?: string;
}

export async function runEpisode(o: RunEpisodeOptions): Promise<EpisodeOutcome> {
  // Reset first: the episode's instruction is the one the robot gives after the reset.
  let obs = await o.robot.reset(o.reset);
  let obsAt = o.robot.now();
  const meta: EpisodeMeta = { ...o.meta, id: o.meta.id ?? randomUUID(), startedAt: Date.now(), ...(obs.instruction !== undefined && o.meta.instruction === undefined ? { instruction: obs.instruction } : {}) };
  const rec = o.store?.begin(meta);
  const period = 1000 / o.robot.spec.controlHz;
  let ret = 0;
  let success: boolean | undefined;
  let stoppedBy: string | undefined;
  let seq = 0;
  const t0 = performance.now();
  try {
    for (; seq < o.maxSteps; seq++) {
      if (o.signal?.aborted) {
        stoppedBy = 'aborted';
        break;
      }
      const tObs = obs.stamp;
      const action = await o.policy(obs);
      const sent = await o.robot.act(action, { stamp: obsAt });
      o.onSent?.(sent);
      // The action's time on the robot's clock: the observation's stamp plus the policy's latency.
      const tAct = tObs + (o.robot.now() - obsAt) / 1000;
      const s = (await o.score?.()) ?? { reward: 0, done: false };
      const done = s.done || seq === o.maxSteps - 1;
      if (s.success !== undefined) success = s.success;
      ret += s.reward;
      rec?.append({ seq, tObs, tAct, obs, action: sent, reward: s.reward, done, ...(done && success !== undefined ? { success } : {}) });
      o.onStep?.(seq, s.reward);
      if (done) {
        seq++;
        break;
      }
      if (o.realTime !== false) {
        const wait = t0 + (seq + 1) * period - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      }
      obs = await o.robot.observe();
      obsAt = o.robot.now();
    }
  } catch (e) {
    if (!(e instanceof SafetyStop)) {
      if (rec) o.store!.finish(meta.id, { status: 'partial' });
      throw e;
    }
    stoppedBy = e.reason;
  }
  const status: EpisodeStatus = stoppedBy ? 'partial' : 'complete';
  if (rec) {
    if (status === 'complete') rec.finish({ success });
    else o.store!.finish(meta.id, { status: 'partial' });
  }
  return { id: meta.id, steps: seq, status, success, return: ret, ...(stoppedBy ? { stoppedBy } : {}) };
}
