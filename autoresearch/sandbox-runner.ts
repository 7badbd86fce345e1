// The sandbox's child process: reads one job (JSON) from stdin, runs the program on its input and
// writes `{ok, value}` or `{ok: false, error}` as one JSON line to fd 3, which the pool reads. The
// program's own stdout and stderr are left to it (the pool keeps their tails for diagnostics).
//
// Run by sandbox.ts (bundled, or under tsx) inside its bwrap sandbox: cwd, HOME and TMPDIR are a
// private /tmp. Having answered it waits to be killed, so that the pool sees what the program left
// running at that moment.
import { randomUUID } from 'node:crypto';
import { closeSync, readFileSync, readdirSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { SandboxProgram } from './sandbox.js';

interface RunnerJob {
  program: SandboxProgram;
  input: unknown;
}

const RESULT_FD = 3;

/** Sends the answer with the CPU time this process has used so far (user + system, every thread), ms. */
function reply(msg: Record<string, unknown>): void {
  const cpu = process.cpuUsage();
  writeSync(RESULT_FD, JSON.stringify({ ...msg, cpuMs: (cpu.user + cpu.system) / 1000 }) + '\n');
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function load(p: SandboxProgram): Promise<(input: unknown) => unknown> {
  let mod: Record<string, unknown>;
  let name: string;
  if (p.kind === 'module') {
    mod = (await import(pathToFileURL(p.path).href)) as Record<string, unknown>;
    name = p.export;
  } else {
    // Source code is written to a private file so that it is a real ES module (imports work); once loaded it is removed.
    // Its name is random: in a PID namespace every runner has the same pid, so pid and clock alone collide between two
    // slots started in the same millisecond (the first to load removed the other's file).
    const file = join(tmpdir(), `wmrl-sandbox-${process.pid}-${randomUUID()}.mjs`);
    writeFileSync(file, p.code, { mode: 0o600 });
    try {
      mod = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
    } finally {
      rmSync(file, { force: true });
    }
    name = 'default';
  }
  const fn = mod[name];
  if (typeof fn !== 'function') throw new Error(`program has no function export '${name}'`);
  return fn as (input: unknown) => unknown;
}

/**
 * Closes the descriptors this process inherited beyond stdio and the result pipe: bwrap passes on
 * whatever the pool's process held without close-on-exec (a pipe from its parent shell, ...).
 * Node's own descriptors all have close-on-exec, so they are left alone.
 */
function closeInheritedFds(): void {
  const O_CLOEXEC = 0o2000000;
  for (const name of readdirSync('/proc/self/fdinfo')) {
    const fd = Number(name);
    if (fd <= RESULT_FD) continue;
    let info: string;
    try {
      info = readFileSync(`/proc/self/fdinfo/${name}`, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') continue; // the listing's own descriptor, closed since
      throw e;
    }
    const flags = /^flags:\s+([0-7]+)$/m.exec(info);
    if (!flags) throw new Error(`sandbox runner: /proc/self/fdinfo/${name} has no flags line`);
    if ((parseInt(flags[1]!, 8) & O_CLOEXEC) === 0) closeSync(fd);
  }
}

try {
  closeInheritedFds();
  const job = JSON.parse(await readStdin()) as RunnerJob;
  const fn = await load(job.program);
  const value = await fn(job.input);
  reply({ ok: true, value });
} catch (e) {
  reply({ ok: false, error: e instanceof Error ? `${e.name}: ${e.message}` : String(e) });
}
// The pool kills the run on its answer; this exit is for a pool that is gone.
setTimeout(() => process.exit(0), 10_000);
