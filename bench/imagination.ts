// imagination: how well imagined groups rank their rollouts the way the robot would. GRPO learns only from
// the order of a group's scores, so the figure that decides whether imagined groups carry signal is the
// within-group rank agreement (Spearman) between imagined and real returns of rollouts that share a start
// state and the policy's noise. Measured on reach for the behaviour-cloned policy, robot = the gap
// profile, against: the gap sim under other sensor noise and jitter (the ceiling any model can reach),
// the nominal sim itself, and the nominal-pretrained world model with its members drawn per rollout
// (train_wmrl before this session), one member per group (now), the members' mean, and imagination
// that feeds the model the action sent d control steps earlier, d identified from a few robot episodes
// by the model's one-step likelihood (the robot's actuation latency, which the nominal sim lacks); and a
// context-conditioned model pretrained across randomized profiles (mass, friction, damping, actuator gain),
// imagining under the context identified from the same few robot episodes, and under the robot's true one.
import { Rng } from '../nn/index.js';
import { CONTEXT_PARAMS, loadProfile, makeEnv, profileContext } from '../sim/index.js';
import type { GaussianPolicy } from '../policies/gaussian.js';
import { noisedRollout } from '../policies/demos.js';
import { DEFAULT_PRETRAIN, pretrain, pretrainWorldModel } from '../wmrl/sim-setup.js';
import { rankAgreement } from '../wmrl/gate.js';
import { ModelEnv, identifyDelay, identifySystem, repeatRows, replayScore, type EnsembleModel } from '../worldmodel/index.js';
import { fmt, median, type BenchOptions, type BenchReport } from './lib/report.js';

const TASK = 'reach';

interface Outcomes {
  ret: number[];
  success: number[];
  /** Per rollout: the start observation, the actions sent and the actions the actuators applied (the robot's only). */
  start?: Float32Array[];
  sent?: Float32Array[];
  applied?: Float32Array[];
}

interface RealEpisode {
  states: Float32Array;
  actions: Float32Array;
  rewards: Float32Array;
  success: Float32Array;
}

/** Every rollout i = b·G + k from prompt b under the policy with noise row i, in the sim under `profile`. */
async function simRollouts(policy: GaussianPolicy, profile: string, seeds: readonly number[], G: number, H: number, noise: Float32Array, o: { reseed?: number; keep?: RealEpisode[] } = {}): Promise<Outcomes> {
  const env = await makeEnv({ task: TASK, profile });
  const A = policy.actDim, D = policy.obsDim;
  const out: Outcomes = { ret: [], success: [], start: [], sent: [], applied: [] };
  try {
    for (let b = 0; b < seeds.length; b++) {
      for (let k = 0; k < G; k++) {
        const i = b * G + k;
        // With reseed: from the first step on, other sensor noise and jitter (the start observation is the robot's).
        const r = await noisedRollout(env, policy, seeds[b]!, noise.subarray(i * H * A, (i + 1) * H * A), H, o.reseed === undefined ? {} : { reseed: o.reseed + i });
        o.keep?.push({ states: r.states, actions: r.actions, rewards: r.rewards, success: r.success });
        out.start!.push(r.states.slice(0, D));
        out.ret.push(r.return);
        out.success.push(r.succeeded ? 1 : 0);
        out.sent!.push(r.actions);
        out.applied!.push(r.applied);
      }
    }
  } finally {
    env.dispose();
  }
  return out;
}

/**
 * Imagined rollouts, stepwise: the policy acts on the model's predictions; the model is fed the action sent
 * `delay` steps earlier (zeros before the first). A rollout ends where its predicted success passes 0.5.
 */
async function imagined(model: EnsembleModel, policy: GaussianPolicy, starts: Float32Array, G: number, H: number, noise: Float32Array, members: 'per-rollout' | 'per-group' | 'mean', delay: number, seed: number): Promise<Outcomes> {
  const D = policy.obsDim, A = policy.actDim, N = (starts.length / D) * G;
  const rng = new Rng(seed);
  const menv = new ModelEnv(model, { members: members === 'mean' ? 'mean' : 'fixed', seed });
  const E = model.members;
  const pinned = members === 'per-rollout' ? Int32Array.from({ length: N }, () => rng.int(E)) : members === 'per-group' ? Int32Array.from({ length: N }, (_, i) => Math.floor(i / G) % E) : undefined;
  let obs = menv.reset(repeatRows(starts, D, G), pinned ? { members: pinned } : {});
  const queue = Array.from({ length: delay }, () => new Float32Array(N * A));
  const ret = new Array<number>(N).fill(0), done = new Array<boolean>(N).fill(false);
  try {
    for (let t = 0; t < H; t++) {
      const z = new Float32Array(N * A);
      for (let i = 0; i < N; i++) z.set(noise.subarray((i * H + t) * A, (i * H + t + 1) * A), i * A);
      const act = (await policy.act(obs, z)).action.map((v) => Math.max(-1, Math.min(1, v)));
      queue.push(act);
      const s = await menv.step(queue.shift()!);
      for (let i = 0; i < N; i++) {
        if (done[i]) continue;
        ret[i]! += s.reward[i]!;
        if (s.successProb[i]! > 0.5) done[i] = true;
      }
      obs = s.obs;
    }
  } finally {
    await menv.release();
  }
  return { ret, success: done.map(Number) };
}

/**
 * The anchor pair's world-model side, as train_wmrl forms it: each robot episode's actions replayed open loop
 * from its start through the model (every member, mean score), scored as its return.
 */
async function replayed(model: EnsembleModel, robot: Outcomes, which: 'sent' | 'applied'): Promise<Outcomes> {
  const ret: number[] = [];
  for (let i = 0; i < robot.ret.length; i++) {
    const actions = robot[which]![i]!;
    ret.push(actions.length ? (await replayScore(model, robot.start![i]!, actions, { mode: 'return' })).score[0]! : 0);
  }
  return { ret, success: robot.success.map(() => NaN) };
}

export async function run(o: BenchOptions): Promise<BenchReport> {
  const q = o.quick;
  const B = q ? 6 : 32, G = 8, H = 100, maxDelay = 5, idEpisodes = 16;
  const seed = 0;
  const pre = q ? { bcEpisodes: 10, bcEpochs: 20, daggerRounds: 1, daggerEpisodes: 5, daggerEpochs: 10, wmEpisodes: 12, wmEpochs: 3, wmHidden: [64, 64], wmMembers: 3 } : {};
  const total = 7;
  o.progress(0, total, 'pretraining (behaviour cloning, world model on nominal)');
  const p = await pretrain({ ...DEFAULT_PRETRAIN, ...pre, wmRandomize: 0, task: TASK, seed });
  const { policy, model } = p;
  const D = policy.obsDim, A = policy.actDim;
  const rng = new Rng(11);
  const seeds = Array.from({ length: B }, (_, i) => 1_000_000 + i);
  const noise = Float32Array.from({ length: B * G * H * A }, () => rng.normal());
  const nominal = await makeEnv({ task: TASK, profile: 'nominal' });
  const starts = new Float32Array(B * D);
  seeds.forEach((s, b) => starts.set(nominal.reset(s).state, b * D));
  nominal.dispose();

  o.progress(1, total, 'the robot (gap) and the sims');
  const robot = await simRollouts(policy, 'gap', seeds, G, H, noise);
  const variants: Array<{ name: string; label: string; out: Outcomes }> = [];
  variants.push({ name: 'gap_other_noise', label: 'gap sim, other sensor noise and jitter (repeatability)', out: await simRollouts(policy, 'gap', seeds, G, H, noise, { reseed: 777_000 }) });
  variants.push({ name: 'nominal_sim', label: 'nominal sim', out: await simRollouts(policy, 'nominal', seeds, G, H, noise) });

  o.progress(2, total, 'delay identification from robot episodes');
  const idEps: RealEpisode[] = [];
  const idNoise = Float32Array.from({ length: idEpisodes * H * A }, () => rng.normal());
  await simRollouts(policy, 'gap', Array.from({ length: idEpisodes / G }, (_, i) => 3_000_000 + i), G, H, idNoise, { keep: idEps });
  const { delay: identified, nll } = await identifyDelay(model, idEps, maxDelay);

  o.progress(3, total, 'imagination');
  variants.push({ name: 'wm_member_per_rollout', label: 'world model, a member drawn per rollout (before)', out: await imagined(model, policy, starts, G, H, noise, 'per-rollout', 0, 5) });
  variants.push({ name: 'wm_member_per_group', label: 'world model, one member per group (train_wmrl now)', out: await imagined(model, policy, starts, G, H, noise, 'per-group', 0, 5) });
  variants.push({ name: 'wm_mean', label: "world model, members' mean", out: await imagined(model, policy, starts, G, H, noise, 'mean', 0, 5) });
  variants.push({ name: 'wm_delay', label: `world model, one member per group, identified delay ${identified}`, out: await imagined(model, policy, starts, G, H, noise, 'per-group', identified, 5) });
  o.progress(4, total, 'context-conditioned world model (randomized profiles)');
  const ctxPre = { ...DEFAULT_PRETRAIN, ...pre, ...(q ? { wmEpisodes: 24 } : {}), task: TASK, seed };
  const { model: ctxModel } = await pretrainWorldModel(ctxPre);
  const sys = await identifySystem(ctxModel, idEps, { maxDelay, context: true, seed: 1 });
  const trueContext = profileContext(loadProfile('gap'));
  variants.push({ name: 'wm_context', label: `context-conditioned world model, context and delay (${sys.delay}) identified`, out: await imagined(ctxModel, policy, starts, G, H, noise, 'per-group', sys.delay, 5) });
  ctxModel.setContext(trueContext);
  variants.push({ name: 'wm_context_true', label: "context-conditioned world model, the robot's true context (reference)", out: await imagined(ctxModel, policy, starts, G, H, noise, 'per-group', sys.delay, 5) });
  await ctxModel.release();
  o.progress(5, total, 'anchor replays');
  variants.push({ name: 'replay_applied', label: "replay of the robot episode's applied actions (the anchor pair, sim robot)", out: await replayed(model, robot, 'applied') });
  variants.push({ name: 'replay_sent', label: "replay of the robot episode's sent actions (the anchor pair, a robot reporting commands)", out: await replayed(model, robot, 'sent') });
  await model.release();
  await policy.release();

  const agreement = (x: Outcomes, ref: Outcomes = robot) => {
    // A side that ties throughout ranks nothing: it agrees at 0.
    const per = Array.from({ length: B }, (_, b) => rankAgreement(x.ret.slice(b * G, (b + 1) * G), ref.ret.slice(b * G, (b + 1) * G)) || 0);
    const m = per.reduce((a, v) => a + v, 0) / B;
    const se = Math.sqrt(per.reduce((a, v) => a + (v - m) ** 2, 0) / (B - 1) / B);
    return { mean: m, se, median: median(per) };
  };
  const meanOf = (x: number[]) => x.reduce((a, v) => a + v, 0) / x.length;
  const robotSuccess = meanOf(robot.success);
  const nominalOut = variants.find((v) => v.name === 'nominal_sim')!.out;
  const scored = variants.map((v) => ({ ...v, agree: agreement(v.out), agreeNominal: agreement(v.out, nominalOut), success: meanOf(v.out.success) }));
  const by = (name: string) => scored.find((v) => v.name === name)!;
  const rows = scored.map((v) => [v.label, fmt(v.agree.mean), fmt(v.agree.se, 2), fmt(v.agree.median), v.name === 'nominal_sim' || v.name.startsWith('replay') ? '-' : fmt(v.agreeNominal.mean), Number.isNaN(v.success) ? '-' : fmt(v.success), fmt(robotSuccess)]);
  const before = by('wm_member_per_rollout').agree, now = by('wm_member_per_group').agree, delayed = by('wm_delay').agree, ceiling = by('gap_other_noise').agree, nom = by('nominal_sim').agree;
  const summary = [
    `Task ${TASK}; the behaviour-cloned policy (seed ${seed}); robot = the sim under the gap profile; ${B} prompts × ${G} rollouts of up to ${H} steps, rollout k of every source driven by the same policy noise; the world model pretrained on nominal sim data (${model.members} members).`,
    `Within-group rank agreement with the robot's returns (mean Spearman over ${B} groups ± its standard error): the gap sim under other sensor noise and jitter reaches ${fmt(ceiling.mean)} (the robot's own repeatability), the nominal sim ${fmt(nom.mean)}.`,
    `The world model with a member drawn per rollout agrees ${fmt(before.mean)} ± ${fmt(before.se, 2)} with the robot; with one member per group ${fmt(now.mean)} ± ${fmt(now.se, 2)}. Against the nominal sim it was trained on they agree ${fmt(by('wm_member_per_rollout').agreeNominal.mean)} and ${fmt(by('wm_member_per_group').agreeNominal.mean)}: one member per group is what lets the model rank its own domain; on the robot the reality gap bounds both.`,
    `The model's one-step NLL on ${idEpisodes} robot episodes is lowest when it is fed the action sent ${identified} steps earlier (NLL ${nll.map((v, d) => `d=${d}: ${fmt(v)}`).join(', ')}); imagining with that delay agrees ${fmt(delayed.mean)} ± ${fmt(delayed.se, 2)} and predicts ${fmt(by('wm_delay').success)} success against the robot's ${fmt(robotSuccess)} (without it: ${fmt(by('wm_member_per_group').success)}).`,
    (() => {
      const cx = by('wm_context').agree, tr = by('wm_context_true').agree;
      const apart = Math.abs(cx.mean - delayed.mean) > 2 * Math.hypot(cx.se, delayed.se);
      return `A world model pretrained on ${ctxPre.wmEpisodes} episodes under randomized profiles (${CONTEXT_PARAMS.join(', ')} drawn in [1/${ctxPre.wmRandomize}, ${ctxPre.wmRandomize}]) and conditioned on them identifies the robot's context from the same ${idEpisodes} episodes as ${fmtContext(sys.context)} (true: ${fmtContext(trueContext)}); imagining under it agrees ${fmt(cx.mean)} ± ${fmt(cx.se, 2)} with the robot, ${apart ? (cx.mean > delayed.mean ? 'above' : 'below') : 'indistinguishable from'} the nominal model with the identified delay (${fmt(delayed.mean)}), and under the true context ${fmt(tr.mean)} ± ${fmt(tr.se, 2)}; it predicts ${fmt(by('wm_context').success)} success.`;
    })(),
    (() => {
      const rp = by('replay_applied').agree;
      const apart = Math.abs(rp.mean - now.mean) > 2 * Math.hypot(rp.se, now.se);
      const verdict = !apart ? 'indistinguishable from that of' : rp.mean > now.mean ? 'above that of' : 'below that of';
      return `The anchor pairs' world-model side, the open-loop replay of a robot episode's applied actions, ranks the group's episodes ${fmt(rp.mean)} ± ${fmt(rp.se, 2)} like the robot (its sent actions: ${fmt(by('replay_sent').agree.mean)}): ${verdict} the closed-loop imagined rollouts the corrections are applied to (${fmt(now.mean)}; two standard errors of the difference ${fmt(2 * Math.hypot(rp.se, now.se), 2)})` +
        (apart && rp.mean > now.mean ? ', so debiasing and the anchor weight are calibrated on a smaller error than the one they correct.' : '.');
    })(),
  ].join('\n');
  return {
    title: 'imagination: do imagined groups rank rollouts as the robot does?',
    summary,
    header: ['source of the scores', 'rank agreement with the robot (mean)', '± s.e.', 'median', 'rank agreement with the nominal sim (mean)', 'success (the model predicts / the sim measures)', 'robot success'],
    rows,
    plot: { title: `${TASK}: within-group rank agreement with the gap robot`, xLabel: 'source', yLabel: 'mean Spearman', bars: scored.map((v) => ({ label: v.name, value: v.agree.mean })) },
    result: {
      ceiling: ceiling.mean,
      nominal_sim: nom.mean,
      wm_member_per_rollout: before.mean,
      wm_member_per_group: now.mean,
      wm_member_per_rollout_vs_nominal: by('wm_member_per_rollout').agreeNominal.mean,
      wm_member_per_group_vs_nominal: by('wm_member_per_group').agreeNominal.mean,
      wm_mean: by('wm_mean').agree.mean,
      wm_delay: delayed.mean,
      replay_applied: by('replay_applied').agree.mean,
      replay_sent: by('replay_sent').agree.mean,
      identified_delay: identified,
      wm_context: by('wm_context').agree.mean,
      wm_context_true: by('wm_context_true').agree.mean,
      robot_success: robotSuccess,
      wm_delay_success: by('wm_delay').success,
      wm_success: by('wm_member_per_group').success,
    },
  };
}

/** A context as `name value` pairs, exponentiated back to scales. */
function fmtContext(c: Float32Array): string {
  return Array.from(c, (v, j) => `${CONTEXT_PARAMS[j]} ${fmt(Math.exp(v), 2)}`).join(', ');
}
