// Tasks by name, and the makeEnv factory.
import { MjEnv, loadTaskModel } from './env.js';
import { loadProfile, type HardwareProfile } from './profiles.js';
import type { TaskDef } from './task.js';
import { pick } from './tasks/pick.js';
import { push } from './tasks/push.js';
import { reach } from './tasks/reach.js';
import type { Env } from './types.js';

export const TASKS = new Map<string, TaskDef>([reach, push, pick].map((t) => [t.name, t]));

export interface MakeEnvOptions {
  task: string;
  /** Profile name (sim/profiles/<name>.yaml), a path to a YAML file, or a parsed profile. Default 'nominal'. */
  profile?: string | HardwareProfile;
  seed?: number;
  /** Side of the square RGB image observation in pixels; omit for none. */
  image?: number;
}

export function taskDef(name: string): TaskDef {
  const t = TASKS.get(name);
  if (!t) throw new Error(`unknown task '${name}' (known: ${[...TASKS.keys()].join(', ')})`);
  return t;
}

export function resolveProfile(p: string | HardwareProfile | undefined): HardwareProfile {
  return typeof p === 'object' ? p : loadProfile(p ?? 'nominal');
}

export async function makeEnv(o: MakeEnvOptions): Promise<Env> {
  return envForTask(taskDef(o.task), o);
}

/** Compiles a task's model under a profile and wraps it in an Env; the model is freed if that fails. */
export async function envForTask(task: TaskDef, o: Omit<MakeEnvOptions, 'task'>): Promise<Env> {
  const profile = resolveProfile(o.profile);
  const model = await loadTaskModel(task, profile);
  try {
    return new MjEnv(task, model, profile, { seed: o.seed, image: o.image });
  } catch (e) {
    model.dispose();
    throw e;
  }
}
