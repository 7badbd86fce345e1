// A robot's control thread (started by control-worker.ts): connects to the robot behind its safety layer and
// watchdog, answers the service's calls, runs a deployed policy's episodes (handing each step to the service's
// thread, which records it), and reports its applied steps, control ticks and state to the service's thread.
import { getPriority, setPriority } from 'node:os';
import { allowedCpus, pinThisThread } from './cpu-affinity.js';
import { parentPort, workerData } from 'node:worker_threads';
import type { EpisodeRecorder, EpisodeSink } from '../episodes/store/store.js';
import { validateMeta } from '../episodes/store/validate.js';
import type { EpisodeMeta } from '../episodes/types.js';
import { SafetyStop } from '../hardware/safety.js';
import { EstopFlag, toWire, type FromThread, type ThreadData, type ThreadOp, type ThreadOps, type ThreadState, type ToThread } from './control-worker.js';
import { policySession, type SessionContext } from './jobs.js';
import { LocalRobotHost, type ThreadPriority } from './robot-host.js';

/** How often the thread reports its state when nothing else does, ms (a robot's link status shows within this). */
const STATE_MS = 200;

const port = parentPort!;
const data = workerData as ThreadData;
const post = (m: FromThread) => port.postMessage(m);
/** This thread's clock minus the service thread's, ms. */
const offset = performance.timeOrigin - data.timeOrigin;
const flag = new EstopFlag(data.estop);

let host: LocalRobotHost | null = null;
/** The robot's confirmation of the latest e-stop taken from the flag (its error, or null). */
let estopping: Promise<Error | null> = Promise.resolve(null);

/** Latches the e-stop of a raise not taken yet (synchronously: the layer latches before it asks the robot); true when one was. */
function takeEstop(): boolean {
  const reason = flag.take();
  if (reason === null || !host) return false;
  estopping = host.estop(reason).then(
    () => null,
    (e: Error) => e,
  );
  return true;
}

/** The episode store as the thread sees it: each call handed to the service's thread, which commits it in order. */
class HandedOverStore implements EpisodeSink {
  /** Why the service could not record an episode, by id: its next step fails with it. */
  private readonly faults = new Map<string, string>();

  fault(episode: string, message: string): void {
    this.faults.set(episode, message);
  }

  begin(meta: EpisodeMeta): EpisodeRecorder {
    // Checked here too, so that a bad episode fails where it starts, as with the store itself.
    validateMeta(meta);
    post({ t: 'record', op: 'begin', meta });
    const id = meta.id;
    return {
      id,
      append: (step) => {
        const fault = this.faults.get(id);
        if (fault !== undefined) throw new Error(fault);
        post({ t: 'record', op: 'append', id, step });
        return { inserted: true };
      },
      finish: (outcome = {}) => this.finish(id, outcome),
    };
  }

  finish(id: string, outcome: { success?: boolean; status?: 'complete' | 'partial' } = {}): void {
    this.faults.delete(id);
    post({ t: 'record', op: 'finish', id, outcome });
  }
}

function state(): ThreadState {
  const h = host!;
  return { connected: h.connected, estopped: h.safety.isEstopped, estopGen: flag.taken, counts: { ...h.safety.counts }, position: h.positions(), restoredLatch: h.restoredLatch };
}

// Asked before the robot's link and the policy's runtime start their threads, which take this thread's priority.
const priority: ThreadPriority = { asked: data.nice, nice: 0, refused: null, cpu: null };
if (data.nice !== null) {
  try {
    setPriority(data.nice);
  } catch (e) {
    // Not an error of the robot's: the service says it runs at its own priority, and why (ready's `priority`).
    priority.refused = (e as Error).message;
  }
}
priority.nice = getPriority();
if (data.cpu !== null) {
  const refused = pinThisThread(data.cpu);
  priority.cpu = { asked: data.cpu, allowed: allowedCpus(), refused };
}

const store = new HandedOverStore();
try {
  host = await LocalRobotHost.connect({
    id: data.id,
    config: data.config,
    ...(data.source !== undefined ? { source: data.source } : {}),
    ...(data.urdf !== undefined ? { urdf: data.urdf } : {}),
    watchdog: data.watchdog,
    ...(data.latchFile !== null ? { latch: { file: data.latchFile, onError: (e) => post({ t: 'latchFault', message: e.message }) } } : {}),
    onIntervention: (e) => post({ t: 'intervention', e }),
    onTick: (tick) => post({ t: 'tick', tick: { ...tick, at: tick.at + offset } }),
    guard: () => {
      if (takeEstop()) throw new SafetyStop('estop', `${data.config.spec.name}: e-stop latched; the command was not sent`);
    },
  });
} catch (e) {
  post({ t: 'failed', error: toWire(e) });
  port.close();
}

if (host) {
  const h = host;
  let last = '';
  const report = (status: boolean) => {
    const s = state();
    const text = JSON.stringify(s);
    if (!status && text === last) return;
    last = text;
    post({ t: 'state', state: s, status });
  };
  h.events.on('step', (step) => post({ t: 'step', step }));
  h.events.on('status', () => report(true));
  const timer = setInterval(() => report(false), STATE_MS);

  let job: { abort: AbortController; done: Promise<unknown> } | null = null;

  const ops: { [K in ThreadOp]: (arg: ThreadOps[K][0]) => Promise<ThreadOps[K][1]> } = {
    observe: () => h.safety.observe(),
    act: (a) => h.safety.act(a.action, a.stamp === undefined ? {} : { stamp: a.stamp - offset }),
    reset: async (options) => {
      const obs = await h.safety.reset(options);
      return { obs, physics: h.physicsState() };
    },
    outcome: async () => {
      const score = h.scorer();
      if (!score) throw new Error(`robot '${h.id}' reports no outcome of its steps`);
      return score();
    },
    estop: async () => {
      takeEstop();
      const e = await estopping;
      if (e) throw e;
    },
    resetRobot: () => h.reset(),
    runPolicy: async ({ runId, dir, request }) => {
      if (job) throw new Error(`robot '${h.id}': a policy already runs in its control thread`);
      const abort = new AbortController();
      const ctx: SessionContext = {
        runId,
        signal: abort.signal,
        emit: (ev) => post({ t: 'job', ev }),
        progress: (done, total, phase) => post({ t: 'progress', done, total, ...(phase !== undefined ? { phase } : {}) }),
        robot: () => h,
        fleet: [h],
        // One inference thread: a tick then never waits on a pool thread the OS has not scheduled.
        control: { inferenceThreads: 1 },
        // The service's run manager claimed the robot before the run came here.
        claim: () => {},
        store,
        dir,
        policyPath: (id) => {
          throw new Error(`robot '${h.id}': the control thread runs only the deployed policy it was given, not '${id}'`);
        },
      };
      const done = policySession(h, request, ctx);
      job = { abort, done };
      try {
        return await done;
      } finally {
        job = null;
      }
    },
    close: async () => {
      clearInterval(timer);
      if (job) {
        job.abort.abort(new Error('the service is closing'));
        // Its outcome, an error included, goes to the service with the run's own reply.
        await job.done.catch(() => undefined);
      }
      await h.dispose();
    },
  };

  port.on('message', (m: ToThread) => {
    if (m.t === 'abort') {
      job?.abort.abort(new Error('stopped'));
      return;
    }
    if (m.t === 'recordFault') {
      store.fault(m.episode, m.message);
      return;
    }
    // A raise is taken before any call runs, whatever the call.
    takeEstop();
    void answer(m.id, m.op, m.arg);
  });

  /** Runs a call and posts its reply: its value, or its error (one that cannot be sent included). */
  const answer = async (id: number, op: ThreadOp, arg: unknown): Promise<void> => {
    try {
      const value = await (ops[op] as (arg: unknown) => Promise<unknown>)(arg);
      post({ t: 'reply', id, ok: true, value, state: state() });
    } catch (e) {
      post({ t: 'reply', id, ok: false, error: toWire(e), state: state() });
    } finally {
      if (op === 'close') port.close();
    }
  };

  post({
    t: 'ready',
    info: {
      kind: h.kind, spec: h.spec, task: h.task, profile: h.profile, urdf: h.urdf, commandHistory: h.commandHistory, seededResets: h.seededResets,
      scene: h.scene, horizon: h.horizon, scored: h.scorer() !== null, module: import.meta.url, priority, state: state(),
    },
  });
}
