// vla-ceiling: how far RL can lift bench vla's behaviour-cloned VLA at all, with signals bench vla's rows do not
// have. On reach with the gap robot, from a clone made as bench vla made its clone before
// its robot reported its commands (recipes/vla.ts cloneOnGap at CLONE's scale: the state alone, the same split, 300
// demonstrations and fit) and the same policy gradient (vlaPgConfig: the head only; here at lr 3e-4, the rate its
// report ran at, where bench vla's rows now run at 1e-4), each row runs the same number of updates of the same
// groups (prompts x rollouts from the split's training seeds):
//   robot_dense:      standard GRPO on the robot scored by its dense reward — an oracle: the gap robot as if it
//                     measured the task's dense reward, on every group (bench vla's robot reports only success);
//   robot_sparse:     the same, scored by the robot's sparse success;
//   imagined_true:    the pure world model imagining under the gap robot's true context and actuation delay
//                     (the best identification could give; the VLA reads the digital twin's renders), scored by
//                     the model's dense return;
//   imagined_nominal: the same under the model's nominal context and no delay (bench vla's dense_only);
//   mlp_robot_dense:  a Gaussian MLP over the state alone cloned from the same demonstrations, under robot_dense's
//                     oracle with the embodied trainers' policy gradient (every parameter, POST_TRAIN_PG): whether
//                     the ceiling is the VLA's or the policy gradient's.
// True success: the mean action on the split's held-out start states (bench vla's headline), every few updates.
// Beside it, the sampled-action success of the robot rows' own training episodes: what the gradient optimizes.
import { evaluateOn } from '../policies/demos.js';
import { ClippedPolicyGradient, type PgConfig } from '../policies/pg.js';
import type { Policy } from '../policies/types.js';
import { SceneTwin, makeEnv } from '../sim/index.js';
import type { EvaluationSplit } from '../sim/index.js';
import { SplitPrompts, type ClosableTarget } from '../wmrl/embodied.js';
import { DEFAULT_PRETRAIN, POST_TRAIN_PG, SimPrompts, pretrainWorldModel, simRobotTarget } from '../wmrl/sim-setup.js';
import { trainStandard } from '../wmrl/train_standard.js';
import { DEFAULT_WMRL, trainWmrl } from '../wmrl/train_wmrl.js';
import { fmt, type BenchOptions, type BenchReport } from './lib/report.js';
import { LATENCY, S, cloneOnGap, makeVla, sparse, vlaPgConfig, vlaSplit } from '../recipes/vla.js';
import { CLONE, CONTEXT_TRUTH, benchMlp } from './vla.js';

const TASK = 'reach';
const ROWS = ['robot_dense', 'robot_sparse', 'imagined_true', 'imagined_nominal', 'mlp_robot_dense'] as const;
type Row = (typeof ROWS)[number];
const LABEL: Record<Row, string> = {
  robot_dense: 'robot, dense reward (oracle)',
  robot_sparse: 'robot, sparse success',
  imagined_true: 'world model, true context and delay',
  imagined_nominal: 'world model, nominal context',
  mlp_robot_dense: 'Gaussian MLP clone, robot, dense reward (oracle)',
};

interface Curve {
  /** (update, held-out success of the mean action), update 0 = the row's clone. */
  success: Array<[number, number]>;
  /** Sampled-action success of the row's robot training episodes per evaluation window (robot rows). */
  trainSuccess: Array<[number, number]>;
  robotEpisodes: number;
}

export async function run(o: BenchOptions): Promise<BenchReport> {
  const q = o.quick;
  const P = { updates: q ? 2 : 24, prompts: q ? 2 : 16, groupSize: q ? 2 : 8, evalEvery: q ? 1 : 4 };
  const pre = q ? { wmEpisodes: 12, wmEpochs: 2, wmHidden: [64, 64], wmMembers: 3 } : {};
  const total = 4 + ROWS.length;
  let done = 0;
  o.progress(done, total, `${TASK}: split, behaviour cloning`);
  const split: EvaluationSplit = await vlaSplit(TASK, q);
  const clone = await cloneOnGap(TASK, split, CLONE[q ? 'quick' : 'full'][TASK], makeVla, (k) => o.progress(done, total, `${TASK}: behaviour cloning, round ${k + 1}`));
  const vla = clone.policy;
  o.progress(done, total, `${TASK}: behaviour cloning a Gaussian MLP`);
  // The embodied trainers' policy: a Gaussian MLP over the state alone (128x128, log-std -1).
  const mlpClone = await cloneOnGap(TASK, split, CLONE[q ? 'quick' : 'full'][TASK], benchMlp, () => {});
  const mlp = mlpClone.policy;
  o.progress(++done, total, `${TASK}: behaviour cloning a Gaussian MLP`);
  o.progress(++done, total, `${TASK}: world model`);
  const { model, simData } = await pretrainWorldModel({ ...DEFAULT_PRETRAIN, ...pre, task: TASK, seed: 0, onProgress: (what, k, n) => o.progress(done, total, `${TASK}: ${what} ${k}/${n}`) });
  const robotEnv = await makeEnv({ task: TASK, profile: 'gap', image: S });
  const twin = await SceneTwin.create(TASK, S);
  using sim = await SimPrompts.create(TASK);
  const heldOut = async (p: Policy) => (await evaluateOn(robotEnv, p, split.heldOutStates)).success;
  o.progress(++done, total, `${TASK}: evaluating the clone`);
  const clone0 = await heldOut(vla), mlp0 = await heldOut(mlp);
  const policy0 = vla.paramNames().map((n) => Float32Array.from(vla.store.get(n).data));
  const model0 = model.store.names().map((n) => Float32Array.from(model.store.get(n).data));
  const curves = new Map<Row, Curve>();
  const pgConfig: PgConfig = { ...vlaPgConfig(q), optimizer: { lr: 3e-4, clipNorm: 0.5 } };
  try {
    for (const row of ROWS) {
      vla.paramNames().forEach((n, i) => vla.store.set(n, policy0[i]!));
      model.store.names().forEach((n, i) => model.store.set(n, model0[i]!));
      const robot = await simRobotTarget({ task: TASK, profile: 'gap', robots: 1, resetSeconds: 5, seed: 0, image: S });
      const target: ClosableTarget = row === 'robot_dense' || row === 'mlp_robot_dense' ? robot : sparse(robot);
      const policy: Policy = row === 'mlp_robot_dense' ? mlp : vla;
      const pg = row === 'mlp_robot_dense' ? await ClippedPolicyGradient.create(mlp, POST_TRAIN_PG) : await ClippedPolicyGradient.create(vla, pgConfig, { trainable: vla.headParamNames() });
      const prompts = new SplitPrompts(sim, split.train.slice(CLONE[q ? 'quick' : 'full'][TASK].demos), 1_000_000);
      const common = { updates: P.updates, prompts: P.prompts, groupSize: P.groupSize, evalEvery: P.evalEvery, promptSeed0: 1_000_000, seed: 0 };
      const evaluate = async (p: Policy) => ({ success: await heldOut(p), meanReturn: NaN, episodes: split.heldOutStates.length });
      const onUpdate = (u: { update: number }) => o.progress(done, total, `${TASK}: ${row} update ${u.update}/${P.updates}`);
      let rows;
      if (row === 'robot_dense' || row === 'robot_sparse' || row === 'mlp_robot_dense') {
        rows = (await trainStandard({ config: common, policy, pg, target, prompts, evaluate, hooks: { onUpdate } })).rows;
      } else {
        // The model's store (reset above) holds its nominal context; imagined_true sets the robot's.
        if (row === 'imagined_true') model.setContext(Float32Array.from(CONTEXT_TRUTH, Math.log));
        const config = { ...DEFAULT_WMRL, ...common, horizon: target.maxSteps, corrector: false as const, refitEvery: 0, context: 'fixed' as const, actionDelay: row === 'imagined_true' ? LATENCY : 0 };
        rows = (await trainWmrl({ config, policy: vla, pg, model, simData, target, prompts, twin, evaluate, hooks: { onUpdate }, warn: () => {} })).rows;
      }
      const curve: Curve = { success: [[0, row === 'mlp_robot_dense' ? mlp0 : clone0]], trainSuccess: [], robotEpisodes: target.clock.episodes };
      let window: number[] = [];
      for (const r of rows) {
        if (typeof r.trainSuccess === 'number') window.push(r.trainSuccess);
        if (r.evalSuccess === undefined) continue;
        curve.success.push([r.update, r.evalSuccess]);
        if (window.length) curve.trainSuccess.push([r.update, window.reduce((a, x) => a + x, 0) / window.length]);
        window = [];
      }
      curves.set(row, curve);
      await pg.release();
      await target.close();
      o.progress(++done, total, `${TASK}: ${row} done`);
    }
  } finally {
    twin.dispose();
    robotEnv.dispose();
    await model.release();
    await vla.release();
    await mlp.release();
  }
  o.progress(++done, total, 'report');

  const pct = (x: number) => `${fmt(100 * x, 2)}%`;
  const pts = (d: number) => `${d >= 0 ? '+' : ''}${fmt(100 * d, 2)} points`;
  const final = (row: Row) => curves.get(row)!.success.at(-1)![1];
  const start = (row: Row) => curves.get(row)!.success[0]![1];
  const best = (row: Row) => Math.max(...curves.get(row)!.success.slice(1).map(([, s]) => s));
  const n = split.heldOutStates.length;
  const se = (p: number) => Math.sqrt(Math.max(p, 0.5 / n) * (1 - Math.min(p, 1 - 0.5 / n)) / n);
  const evalUpdates = curves.get(ROWS[0])!.success.map(([u]) => u);
  const summary = [
    `Task ${TASK}; robot = the sim under the gap profile (${S}x${S} top camera); the VLA behaviour-cloned as bench vla clones it (${clone.steps} labelled steps, final loss ${fmt(clone.loss, 2)}; the robust demonstrator's noise-injected demonstrations succeeded ${pct(clone.demoSuccess)}), and a Gaussian MLP (128x128, the state alone) cloned from the same demonstrations (final loss ${fmt(mlpClone.loss, 2)}). ` +
      `Every row: ${P.updates} updates of ${P.prompts} prompts x ${P.groupSize} rollouts from the split's training seeds, the VLA's head only, lr ${pgConfig.optimizer.lr}, ${pgConfig.epochs} epochs, minibatch ${pgConfig.minibatch} (the MLP: every parameter, lr ${POST_TRAIN_PG.optimizer.lr}, as the embodied trainers); the robot rows spend ${curves.get('robot_dense')!.robotEpisodes} robot episodes each. ` +
      `True success = the mean action on ${n} held-out start states, one seed (binomial standard error at the VLA clone's ${pct(clone0)}: ±${fmt(100 * se(clone0), 2)} points; the MLP clone starts at ${pct(mlp0)}).`,
    `After ${P.updates} updates: ${ROWS.map((row) => `${LABEL[row]} ${pct(final(row))} (${pts(final(row) - start(row))} over its clone; best ${pct(best(row))} over the evaluations)`).join(', ')}.`,
    `The robot rows' sampled-action training success (what the gradient optimizes, the policy's noise included) over the first and the last evaluation window: ${(['robot_dense', 'robot_sparse', 'mlp_robot_dense'] as const).map((row) => { const t = curves.get(row)!.trainSuccess; return `${LABEL[row]} ${pct(t[0]?.[1] ?? NaN)} → ${pct(t.at(-1)?.[1] ?? NaN)}`; }).join(', ')}.`,
    `bench vla's target asks WMRL for at least ${pts(0.1)} over the clone with the robot's sparse success and the world model; here the oracle with the robot's dense reward on every group reached ${pts(best('robot_dense') - clone0)} at its best evaluation (the MLP under the same oracle: ${pts(best('mlp_robot_dense') - mlp0)}).`,
  ].join('\n');
  const rows: BenchReport['rows'] = [
    ['behaviour cloning (VLA)', pct(clone0), ...evalUpdates.slice(1).map(() => '–'), '0'],
    ['behaviour cloning (Gaussian MLP)', pct(mlp0), ...evalUpdates.slice(1).map(() => '–'), '0'],
    ...ROWS.map((row) => [LABEL[row], ...curves.get(row)!.success.map(([, s]) => pct(s)), String(curves.get(row)!.robotEpisodes)]),
  ];
  const result: Record<string, number> = { clone: clone0, mlp_clone: mlp0 };
  for (const row of ROWS) {
    result[row] = final(row);
    result[`${row}_best`] = best(row);
  }
  return {
    title: 'VLA RL ceiling on the gap robot: the clone under the robot\'s dense reward, its sparse success, and the world model under the true and the nominal context',
    summary,
    header: ['row', ...evalUpdates.map((u) => (u === 0 ? 'start' : `update ${u}`)), 'robot episodes'],
    rows,
    plot: {
      title: `Held-out success of the mean action, ${TASK}, gap robot`,
      xLabel: 'update',
      yLabel: 'success (%)',
      lines: ROWS.map((row) => ({ label: LABEL[row], points: curves.get(row)!.success.map(([u, s]) => [u, 100 * s] as [number, number]) })),
    },
    result,
  };
}
