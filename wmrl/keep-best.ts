// Do no harm: a run with an evaluation measures its starting policy before update 1, keeps the parameters of one of its
// evaluations (the start's included) — its latest, unless that measured worse than its best by more than the noise —
// and hands those back as its final policy, so updates that make the policy worse by the robot's own measurement are
// never what a run exports. The mechanics every embodied trainer shares
// (train_standard.ts and its siblings): each calls `KeepBest.begin` before its loop, `observe` at each evaluation,
// `save` before each checkpoint and `restore` when the loop ends, however it ends.
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { readTensorFile, writeTensorFile } from '../nn/index.js';
import type { Policy } from '../policies/types.js';
import type { Evaluation, RobotClock } from './embodied.js';
import type { EvalPoint, RunHooks, RunRow, RunState } from './run-state.js';

/**
 * `prefer: 'latest'`: the latest evaluation is kept unless the best so far beats it by more than `margin` standard
 * errors of their difference; then the best is (the latest of equals). `prefer: 'best'`: a later evaluation replaces
 * the kept one only where it beats the kept one by more than `margin` standard errors (0: any gain; ties keep the
 * earlier, fewer updates).
 */
export interface KeepBestConfig {
  prefer: 'latest' | 'best';
  margin: number;
}

/** The latest evaluation within one standard error of the best: a measured maximum over noisy evaluations is biased upward (docs/decisions.md, 2026-12-07: the keep rule). */
export const DEFAULT_KEEP_BEST: KeepBestConfig = { prefer: 'latest', margin: 1 };

/** The evaluation noise: the binomial standard error √(p(1−p)/n) of a success rate p over n episodes. */
export function successSe(success: number, episodes: number): number {
  if (!(Number.isInteger(episodes) && episodes >= 1)) throw new Error(`keep best: an evaluation needs at least one episode, got ${episodes}`);
  return Math.sqrt((success * (1 - success)) / episodes);
}

export function evalPoint(update: number, ev: Evaluation): EvalPoint {
  return { update, success: ev.success, meanReturn: ev.meanReturn, episodes: ev.episodes, se: successSe(ev.success, ev.episodes) };
}

/** Whether `next` replaces `kept`: its success beats the kept one's by more than `margin` standard errors of the difference. */
export function beats(next: EvalPoint, kept: EvalPoint, margin: number): boolean {
  return next.success > kept.success + margin * Math.hypot(next.se, kept.se);
}

const KEPT = /^kept-(\d+)\.safetensors$/;
const keptFile = (dir: string, update: number) => join(dir, `kept-${update}.safetensors`);

export class KeepBest {
  /** The kept parameters, in the order of policy.paramNames(); null where the run keeps nothing (no evaluation, or off). */
  private params: Float32Array[] | null = null;
  /** The best evaluation's parameters (prefer 'latest': what the run falls back to). */
  private bestParams: Float32Array[] | null = null;
  /** The kept and best updates the checkpoint on disk points at (their files stay until the next checkpoint points elsewhere). */
  private saved: number[];

  private constructor(private readonly policy: Policy, private readonly state: RunState, private readonly config: KeepBestConfig | false, private readonly outDir: string | undefined) {
    this.saved = [state.kept?.update, state.best?.update].filter((u): u is number => u !== undefined);
  }

  /**
   * Before the run's first update (or a resumed run's next one): with an evaluation and keep-best on, a run that has
   * not measured its starting policy yet evaluates it now (charged to the robot clock where the evaluation runs on the
   * robot), records it as `state.start` and keeps it; a resumed run reads its kept parameters back from `outDir`.
   */
  static async begin(run: { policy: Policy; evaluate?: (policy: Policy) => Promise<Evaluation>; outDir?: string; hooks?: RunHooks }, state: RunState, config: KeepBestConfig | false | undefined): Promise<KeepBest> {
    const c = config ?? DEFAULT_KEEP_BEST;
    if (c && !(c.margin >= 0 && Number.isFinite(c.margin))) throw new Error(`keep best: margin must be a number ≥ 0 (standard errors), got ${c.margin}`);
    if (c && c.prefer !== 'latest' && c.prefer !== 'best') throw new Error(`keep best: prefer must be 'latest' or 'best', got ${String(c.prefer)}`);
    const keep = new KeepBest(run.policy, state, c, run.outDir);
    if (!c || !run.evaluate) return keep;
    if (state.kept) {
      if (!run.outDir) throw new Error('keep best: a run that kept an evaluation resumes from its folder');
      keep.params = keep.load(run.outDir, state.kept.update);
      if (c.prefer === 'latest') {
        state.best ??= state.kept;
        keep.bestParams = state.best.update === state.kept.update ? keep.params : keep.load(run.outDir, state.best.update);
      }
      return keep;
    }
    const start = evalPoint(state.update, await run.evaluate(run.policy));
    state.start ??= start;
    state.kept = start;
    keep.params = keep.snapshot();
    if (c.prefer === 'latest') {
      state.best = start;
      keep.bestParams = keep.params;
    }
    run.hooks?.onStart?.(start);
    return keep;
  }

  /**
   * Records the evaluation of the policy after `row.update` updates on its row (success, return, the update kept after
   * it) and keeps its parameters where it beats the kept one. `clock`: the row's robot time is read again after it, for
   * an evaluation that runs on the robot.
   */
  observe(row: RunRow, ev: Evaluation, clock: RobotClock): void {
    row.evalSuccess = ev.success;
    row.evalReturn = ev.meanReturn;
    row.robotSeconds = clock.robotSeconds;
    row.robotWallSeconds = clock.wallSeconds;
    row.robotEpisodes = clock.episodes;
    if (!this.config || !this.params || !this.state.kept) return;
    const next = evalPoint(row.update, ev);
    if (this.config.prefer === 'best') {
      if (beats(next, this.state.kept, this.config.margin)) {
        this.state.kept = next;
        this.params = this.snapshot();
      }
    } else if (this.state.best && this.bestParams) {
      const now = this.snapshot();
      if (next.success >= this.state.best.success) {
        this.state.best = next;
        this.bestParams = now;
      }
      const fallBack = beats(this.state.best, next, this.config.margin);
      this.state.kept = fallBack ? this.state.best : next;
      this.params = fallBack ? this.bestParams : now;
    }
    row.keptUpdate = this.state.kept.update;
  }

  /** Before a checkpoint: writes the kept (and best) parameters the checkpoint will point at, and drops those no checkpoint points at. */
  save(): void {
    const dir = this.outDir, kept = this.state.kept, best = this.state.best;
    if (!dir || !this.params || !kept) return;
    const names = this.policy.paramNames();
    const write = (update: number, params: Float32Array[]) => {
      if (!existsSync(keptFile(dir, update))) writeTensorFile(keptFile(dir, update), names.map((n, i) => [n, { shape: [...this.policy.store.get(n).shape], data: params[i]! }]), { update: String(update) });
    };
    write(kept.update, this.params);
    if (best && this.bestParams && best.update !== kept.update) write(best.update, this.bestParams);
    const keep = new Set([kept.update, best?.update ?? kept.update, ...this.saved]);
    for (const f of readdirSync(dir)) {
      const m = KEPT.exec(f);
      if (m && !keep.has(Number(m[1]))) rmSync(join(dir, f));
    }
    this.saved = [kept.update, best?.update ?? kept.update];
  }

  /** The run's final policy: the kept parameters back into the policy (nothing where the run kept none). */
  restore(): void {
    if (!this.params) return;
    this.policy.paramNames().forEach((n, i) => this.policy.store.set(n, this.params![i]!));
  }

  private snapshot(): Float32Array[] {
    return this.policy.paramNames().map((n) => Float32Array.from(this.policy.store.get(n).data));
  }

  private load(dir: string, update: number): Float32Array[] {
    const file = keptFile(dir, update);
    if (!existsSync(file)) throw new Error(`resume: ${dir} has no kept-${update}.safetensors, the parameters of the evaluation the run keeps`);
    const { tensors } = readTensorFile(file);
    return this.policy.paramNames().map((n) => {
      const v = tensors.get(n), cur = this.policy.store.get(n);
      if (!v) throw new Error(`resume: ${file} lacks the policy's parameter '${n}'`);
      if (v.data.length !== cur.data.length) throw new Error(`resume: ${file}: '${n}' has ${v.data.length} values, the policy's ${cur.data.length}`);
      return Float32Array.from(v.data);
    });
  }
}
