// Tasks by name (or a user's robot by its mapping file), and the makeEnv factory.
import { loadCustomTask } from './custom.js';
import { envForTask, resolveProfile } from './env.js';
import type { HardwareProfile } from './profiles.js';
import type { TaskDef } from './task.js';
import { pick } from './tasks/pick.js';
import { push } from './tasks/push.js';
import { reach } from './tasks/reach.js';
import type { Env } from './types.js';

export const TASKS = new Map<string, TaskDef>([reach, push, pick].map((t) => [t.name, t]));

export interface MakeEnvOptions {
  /** A built-in task (reach, push, pick) or the path of a user's robot mapping (*.yaml, *.yml). */
  task: string;
  /** Profile name (sim/profiles/<name>.yaml), a path to a YAML file, or a parsed profile. Default 'nominal'. */
  profile?: string | HardwareProfile;
  seed?: number;
  /** Side of the square RGB image observation in pixels; omit for none. */
  image?: number;
  /** Report the last this many commands sent as observation features (sim/env.ts EnvOptions.commandHistory); default 0. */
  commandHistory?: number;
}

/** A path ending in .yaml or .yml names a user's robot mapping; anything else a built-in task. */
export const isMappingFile = (task: string): boolean => /\.ya?ml$/i.test(task);

export function taskDef(name: string): TaskDef {
  if (isMappingFile(name)) return loadCustomTask(name);
  const t = TASKS.get(name);
  if (!t) throw new Error(`unknown task '${name}' (known: ${[...TASKS.keys()].join(', ')}, or a robot mapping file *.yaml)`);
  return t;
}

export { envForTask, resolveProfile };

export async function makeEnv(o: MakeEnvOptions): Promise<Env> {
  return envForTask(taskDef(o.task), o);
}
