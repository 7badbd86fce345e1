// Task (2): controller research. A proposal is a joint-space PD controller (gains kp, kd, and how
// far ahead of the arm the inverse-kinematics target is placed) driving the MuJoCo `reach` task on
// the `gap` hardware profile (the reality gap: latency, friction, weaker motors), where the
// scripted expert's own gains mostly fail. Score: success rate over a fixed set of episodes minus
// an effort penalty (mean squared torque command per step).
import { fileURLToPath } from 'node:url';
import { ik, pd } from '../../sim/tasks/arm.js';
import { makeEnv } from '../../sim/index.js';
import type { ExecutionInput, ExecutionOutput, ResearchTask } from '../task.js';

export const EFFORT_PENALTY = 0.2;
export const EPISODES = 8;

export const controllerTask: ResearchTask = {
  name: 'reach-controller',
  fields: [
    { name: 'kp', choices: [1, 2, 4, 6, 10, 16, 25] },
    { name: 'kd', choices: [0, 0.1, 0.2, 0.4, 0.8, 1.6] },
    { name: 'reachScale', choices: [0.9, 1, 1.1] },
  ],
  program: { kind: 'module', path: fileURLToPath(import.meta.url), export: 'runController' },
  metric: `success rate on reach (gap profile, ${EPISODES} episodes) minus ${EFFORT_PENALTY} x mean squared torque command`,
  limits: { timeoutMs: 30_000, memoryMb: 1024, maxProcs: 4 },
  seeds: 3,
};

/** The executor: runs the proposed controller for EPISODES episodes from seeds 1000·seed + i. */
export async function runController(input: ExecutionInput): Promise<ExecutionOutput> {
  const kp = Number(input.proposal.kp), kd = Number(input.proposal.kd), scale = Number(input.proposal.reachScale);
  const env = await makeEnv({ task: 'reach', profile: 'gap' });
  try {
    let successes = 0, effort = 0, steps = 0;
    for (let ep = 0; ep < EPISODES; ep++) {
      let obs = env.reset(1000 * input.seed + ep);
      for (;;) {
        const s = obs.state;
        // The goal's one-hot (entries 12..14) picks its target (entries 6..11), as the expert reads it.
        let g = 0;
        for (let i = 1; i < 3; i++) if (s[12 + i]! > s[12 + g]!) g = i;
        const target = ik(scale * s[6 + 2 * g]!, scale * s[7 + 2 * g]!, s[1]!);
        const a = pd([s[0]!, s[1]!], [s[2]!, s[3]!], target, kp, kd);
        effort += a[0]! * a[0]! + a[1]! * a[1]!;
        steps++;
        const r = env.step(a);
        obs = r.obs;
        if (r.terminated || r.truncated) {
          if (r.info.success) successes++;
          break;
        }
      }
    }
    const successRate = successes / EPISODES;
    const meanEffort = effort / steps;
    return { score: successRate - EFFORT_PENALTY * meanEffort, successRate, meanEffort };
  } finally {
    env.dispose();
  }
}
