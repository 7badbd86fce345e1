// bench vla's child process: one task's run (bench/vla.ts runTask), its progress and its result sent to the parent
// over IPC. Arguments: the task, 'quick' or 'full', the RL rows' seed, and the RL rows to train (comma-separated), or
// `part:NAME` to build and cache that part of the task's setup (buildSetupPart) instead.
import { RL_ROWS, SETUP_PARTS, TASKS, buildSetupPart, runTask, type TaskMessage } from '../vla.js';

const [task, scale, seedArg, rowsArg] = process.argv.slice(2);
const seed = Number(seedArg);
if (!process.send) throw new Error('bench/lib/vla-task.ts runs as bench vla\'s child process (an IPC channel), not alone');
const send = (m: TaskMessage) => new Promise<void>((resolve, reject) => process.send!(m, undefined, {}, (e) => (e ? reject(e) : resolve())));
try {
  const t = TASKS.find((x) => x === task);
  if (!t) throw new Error(`vla task process: task '${task}' is not one of ${TASKS.join(', ')}`);
  if (scale !== 'quick' && scale !== 'full') throw new Error(`vla task process: scale '${scale}' is not 'quick' or 'full'`);
  if (!(Number.isInteger(seed) && seed >= 0)) throw new Error(`vla task process: seed '${seedArg}' is not a non-negative integer`);
  if (rowsArg?.startsWith('part:')) {
    const part = SETUP_PARTS.find((x) => `part:${x}` === rowsArg);
    if (!part) throw new Error(`vla task process: '${rowsArg}' is not one of ${SETUP_PARTS.map((x) => `part:${x}`).join(', ')}`);
    await buildSetupPart(t, scale === 'quick', part, (label) => void send({ kind: 'progress', done: 0, label }));
    await send({ kind: 'part' });
    process.exit();
  }
  const rows = (rowsArg ?? '').split(',').map((r) => {
    const row = RL_ROWS.find((x) => x === r);
    if (!row) throw new Error(`vla task process: row '${r}' is not one of ${RL_ROWS.join(', ')}`);
    return row;
  });
  const result = await runTask(t, scale === 'quick', (done, label) => void send({ kind: 'progress', done, label }), seed, rows, (print) => void send({ kind: 'setup', print }));
  await send({ kind: 'result', result });
} catch (e) {
  await send({ kind: 'error', error: e instanceof Error ? (e.stack ?? e.message) : String(e) });
  process.exitCode = 1;
}
// The parent has the result; onnxruntime and other handles must not keep this process alive.
process.exit();
