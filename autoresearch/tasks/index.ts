// The built-in research tasks by name.
import type { ResearchTask } from '../task.js';
import { classifierTask } from './classifier.js';
import { controllerTask } from './controller.js';

export const RESEARCH_TASKS: ReadonlyMap<string, ResearchTask> = new Map([
  ['classifier', classifierTask],
  ['controller', controllerTask],
]);
