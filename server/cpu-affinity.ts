// CPU affinity on Linux, set through util-linux's taskset (Node has no call for it): a robot's control thread runs on
// a CPU of its own and every other thread of the service on the rest, so serving never takes the control loop's CPU.
import { spawnSync } from 'node:child_process';
import { readFileSync, readlinkSync } from 'node:fs';

/** Parses a Linux CPU list ("0-2,5") into ascending CPU numbers. */
export function parseCpuList(list: string): number[] {
  const cpus = new Set<number>();
  for (const part of list.trim().split(',')) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part);
    if (!m) throw new Error(`not a CPU list: '${list}'`);
    for (let c = Number(m[1]); c <= Number(m[2] ?? m[1]); c++) cpus.add(c);
  }
  return [...cpus].sort((a, b) => a - b);
}

/** The CPUs a task may run on (`task`: a /proc path; this thread by default), from its status file. */
export function allowedCpus(task = '/proc/thread-self'): number[] {
  const m = /^Cpus_allowed_list:\s*(.+)$/m.exec(readFileSync(`${task}/status`, 'utf8'));
  if (!m) throw new Error(`${task}/status has no Cpus_allowed_list`);
  return parseCpuList(m[1]!);
}

function taskset(args: string[]): string | null {
  const r = spawnSync('taskset', args, { encoding: 'utf8' });
  if (r.error) return `taskset could not run (${r.error.message}; util-linux provides it)`;
  return r.status === 0 ? null : `taskset ${args.join(' ')}: ${r.stderr.trim() || `exit status ${r.status}`}`;
}

/** How isolation splits this process's CPUs: the last for the robots' control threads, the others for everything else. */
export interface CpuSplit {
  control: number;
  serving: number[];
}

/** The split, or why there is none (not Linux; fewer than two CPUs to split). */
export function cpuSplit(): CpuSplit | string {
  if (process.platform !== 'linux') return `CPU affinity is set on Linux only, not ${process.platform}`;
  const cpus = allowedCpus('/proc/self');
  if (cpus.length < 2) return `the service may run on ${cpus.length} CPU, none to give the control threads alone`;
  return { control: cpus.at(-1)!, serving: cpus.slice(0, -1) };
}

/** Moves every thread this process has now onto `cpus` (threads started later take their starter's); the problem, or null. */
export const pinProcess = (cpus: readonly number[]): string | null => taskset(['-apc', cpus.join(','), String(process.pid)]);

/** Moves the calling thread alone onto `cpu`; the problem, or null. */
export function pinThisThread(cpu: number): string | null {
  const tid = readlinkSync('/proc/thread-self').split('/').at(-1)!;
  return taskset(['-pc', String(cpu), tid]);
}
