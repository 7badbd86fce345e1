// bc-scale: how many demonstrations a behaviour clone needs on the gap robot before it does what its demonstrator
// does. Per task (reach, push), the robust demonstrator (Env.demonstrator) records noise-injected demonstrations
// on the gap robot and labels DAgger rounds, exactly as bench vla clones its VLA (policies/dagger.ts cloneWithDagger, the same
// split, rounds, episodes per round and epochs), for a growing number of demonstration episodes; the policy is the
// embodied trainers' Gaussian MLP over the state alone (bench/vla.ts benchMlp), which clones in a small fraction of
// the VLA's time. Success of the clone's mean action on the split's 100 held-out start states and 100 held-out
// (instruction, target region) combinations, beside the demonstrator's own on the held-out states.
// It answers why bench vla clones from as many demonstrations as it does: a clone far below its demonstrator
// leaves RL nothing to lift, and how far below it is is a question of data.
// Beside each clone, its sibling over the state and the last LATENCY commands sent (sim/env.ts commandHistory):
// the demonstrator compensates the latency from the commands it sent; a policy over the state alone cannot see
// the commands still in flight.
import { cloneWithDagger } from '../policies/dagger.js';
import { evaluateHeldOut } from '../policies/demos.js';
import { LATENCY, vlaSplit } from '../recipes/vla.js';
import { makeEnv } from '../sim/index.js';
import { fmt, type BenchOptions, type BenchReport, type Series } from './lib/report.js';
import { expertOn } from './cells/vla-measure.js';
import { CLONE, TASKS, benchMlp } from './vla.js';

export const tasks = TASKS;
/** Demonstration episodes per clone (DAgger's included, as CLONE counts them). */
const DEMOS = {
  full: { reach: [80, 160, 320, 640, 1000], push: [40, 160, 500, 1000] },
  quick: { reach: [4, 8], push: [4, 8] },
};

/** The clone's observation: the state alone, or with the last LATENCY commands sent. */
const VARIANTS = [
  { key: 'state', label: 'state', commandHistory: 0 },
  { key: 'history', label: `state + last ${LATENCY} commands`, commandHistory: LATENCY },
] as const;
type Variant = (typeof VARIANTS)[number]['key'];

interface Row {
  task: (typeof TASKS)[number];
  variant: Variant;
  demos: number;
  steps: number;
  loss: number;
  heldOutStates: number;
  heldOutCombinations: number;
  seconds: number;
}

export async function run(o: BenchOptions): Promise<BenchReport> {
  const q = o.quick;
  const chosen: ReadonlyArray<(typeof TASKS)[number]> = o.task ? TASKS.filter((t) => t === o.task) : TASKS;
  const scale = q ? DEMOS.quick : DEMOS.full;
  const C = CLONE[q ? 'quick' : 'full'];
  const total = chosen.reduce((n, t) => n + VARIANTS.length * scale[t].length + 1, 0);
  let done = 0;
  const rows: Row[] = [];
  const demonstrator = new Map<string, number>();
  for (const task of chosen) {
    o.progress(done, total, `${task}: split`);
    const split = await vlaSplit(task, q);
    demonstrator.set(task, (await expertOn(task, split, 'demonstrator', LATENCY)).heldOutStates);
    o.progress(++done, total, `${task}: demonstrator evaluated`);
    for (const v of VARIANTS) {
      // one gap robot per task and observation (no camera: the MLP reads the state), every clone recorded and evaluated on it
      const env = await makeEnv({ task, profile: 'gap', commandHistory: v.commandHistory });
      try {
        for (const demos of scale[task]) {
          const c = C[task];
          // the DAgger rounds of bench vla, fewer when there are too few demonstrations to keep a round-0 episode
          const rounds = Math.min(c.daggerRounds, Math.floor((demos - 1) / c.daggerEpisodes));
          const t0 = performance.now();
          const clone = await cloneWithDagger(benchMlp(env), env, LATENCY, split.train.slice(0, demos), rounds, c.daggerEpisodes, c.bcEpochs, () => {});
          const seconds = (performance.now() - t0) / 1000;
          const ev = await evaluateHeldOut(env, clone.policy, split);
          await clone.policy.release();
          rows.push({ task, variant: v.key, demos, steps: clone.steps, loss: clone.loss, heldOutStates: ev.heldOutStates.success, heldOutCombinations: ev.heldOutCombinations.success, seconds });
          o.progress(++done, total, `${task}: ${v.label}, ${demos} demonstrations`);
        }
      } finally {
        env.dispose();
      }
    }
  }
  const pct = (x: number) => `${fmt(100 * x, 3)}%`;
  const label = (v: Variant) => VARIANTS.find((x) => x.key === v)!.label;
  const sentences = chosen.flatMap((task) => {
    const d = demonstrator.get(task)!;
    const per = VARIANTS.map(({ key }) => {
      const rs = rows.filter((r) => r.task === task && r.variant === key);
      const first = rs[0]!, last = rs[rs.length - 1]!, best = rs.reduce((a, b) => (b.heldOutStates > a.heldOutStates ? b : a));
      return `${task}, ${label(key)}: ${pct(first.heldOutStates)} of held-out states at ${first.demos} demonstrations, ${pct(last.heldOutStates)} at ${last.demos} (best ${pct(best.heldOutStates)} at ${best.demos}); the demonstrator itself ${pct(d)}, so the largest clone recovers ${fmt(last.heldOutStates / Math.max(d, 1e-9), 3)} of it.`;
    });
    const at = (v: Variant, demos: number) => rows.find((r) => r.task === task && r.variant === v && r.demos === demos)!.heldOutStates;
    const side = scale[task].map((n) => `${n}: ${pct(at('state', n))} → ${pct(at('history', n))}`).join(', ');
    return [...per, `${task}, held-out states without and with the last ${LATENCY} commands (demonstrations: state → history): ${side}. Bench vla clones ${task} from ${C[task].demos} demonstrations.`];
  });
  const se = (p: number) => Math.sqrt((p * (1 - p)) / 100);
  const result: Record<string, number> = {};
  for (const r of rows) result[`${r.task}_${r.demos}${r.variant === 'state' ? '' : `_${r.variant}`}`] = r.heldOutStates;
  for (const [task, d] of demonstrator) result[`${task}_demonstrator`] = d;
  const lines: Series[] = chosen.flatMap((task) => VARIANTS.map(({ key }) => ({ label: `${task}, ${label(key)}`, points: rows.filter((r) => r.task === task && r.variant === key).map((r) => [r.demos, r.heldOutStates] as [number, number]) })));
  return {
    title: 'Behaviour cloning against the number of demonstrations, gap robot',
    summary: [
      `Robot = the sim under the gap profile. Per task, a Gaussian MLP over the state (128x128, the embodied trainers' policy), and its sibling over the state and the last ${LATENCY} commands sent, each cloned as bench vla clones its VLA: noise-injected demonstrations by the robust demonstrator (told the ${LATENCY}-step latency), then ${chosen.map((t) => `${t}: ${C[t].daggerRounds} DAgger rounds of ${C[t].daggerEpisodes} episodes, ${C[t].bcEpochs} epochs`).join('; ')}; the number of demonstration episodes counts DAgger's. Success of the mean action on the split's held-out start states and held-out (instruction, target region) combinations (${q ? 5 : 100} episodes each, one binomial standard error at 50%: ${fmt(100 * se(0.5), 2)} points), one seed per row.`,
      ...sentences,
    ].join('\n'),
    header: ['task', 'observation', 'demonstrations', 'labelled steps', 'final BC loss', 'held-out states', 'held-out combinations', 'clone s'],
    rows: [
      ...rows.map((r) => [r.task, label(r.variant), r.demos, r.steps, fmt(r.loss, 3), pct(r.heldOutStates), pct(r.heldOutCombinations), fmt(r.seconds, 3)]),
      ...chosen.map((t) => [t, '–', 'the demonstrator itself', '–', '–', pct(demonstrator.get(t)!), '–', '–']),
    ],
    plot: { title: 'Clone success against demonstrations, gap robot (held-out states)', xLabel: 'demonstration episodes', yLabel: 'success', lines, logX: true },
    result,
  };
}
