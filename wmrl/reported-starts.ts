// Start states the robot reported: the first observation of every complete episode of the task in the robot's store
// (calibration's, anchor groups'; not the trainer's measurements, which select among policies), what WMRL imagines from instead of the sim's seeded
// resets, since a real robot's start is known only once it has reported it.
import { buildObservation, type ObservationLayout } from '../common/layout.js';
import type { EpisodeStore } from '../episodes/store/store.js';
import type { Rng } from '../nn/index.js';

/** The policy version prefix of a trainer's measurement episodes (wmrl/embodied.ts robotEvaluation). */
export const MEASUREMENT_VERSION = 'eval-';

export interface ReportedStart {
  /** The observation vector (the layout's) at the episode's first step. */
  obs: Float32Array;
  instruction: string;
}

export class ReportedStarts {
  private readonly seen = new Set<string>();
  private readonly all: ReportedStart[] = [];
  private readonly byInstruction = new Map<string, ReportedStart[]>();

  /** `task`: only episodes of this task count (undefined: those recorded without one). */
  constructor(private readonly store: EpisodeStore, private readonly layout: ObservationLayout, private readonly task: string | undefined) {}

  get size(): number {
    return this.all.length;
  }

  /** Takes in the episodes recorded since the last call; those whose observation has another layout's shape are not this robot's starts. */
  refresh(): number {
    const nj = this.layout.joints.length, nf = this.layout.features.length;
    let added = 0;
    for (const s of this.store.list({ status: 'complete' })) {
      if (this.seen.has(s.meta.id) || s.steps === 0) continue;
      this.seen.add(s.meta.id);
      // A trainer's measurement (robotEvaluation's `eval-*` episodes) chooses between policies on its start states: not a start to train on.
      if (s.meta.task !== this.task || s.meta.policyVersion.startsWith(MEASUREMENT_VERSION)) continue;
      const first = this.store.stream(s.meta.id, 1).steps[Symbol.iterator]().next();
      if (first.done) continue;
      const o = first.value.obs;
      if (o.position.length !== nj || o.velocity.length !== nj || (o.features?.length ?? 0) !== nf) continue;
      const start = { obs: buildObservation(this.layout, o), instruction: o.instruction ?? s.meta.instruction ?? '' };
      this.all.push(start);
      const same = this.byInstruction.get(start.instruction) ?? [];
      same.push(start);
      this.byInstruction.set(start.instruction, same);
      added++;
    }
    return added;
  }

  /** A reported start drawn uniformly, among those of `instruction` where the robot reported any; null before the robot reported one. */
  draw(instruction: string, rng: Rng): ReportedStart | null {
    const from = this.byInstruction.get(instruction) ?? this.all;
    return from.length ? from[rng.int(from.length)]! : null;
  }
}
