// A ROS 2 graph and robot in the process, behind the rclnodejs calls this project makes (tests only). Set through
// the environment: WMRL_STANDIN_ROBOT (JSON: joints, features topic and count, rate) — joint states and features
// published at that rate, a controller manager that switches as ros2_control's does, a trajectory topic that moves
// the joints to a trajectory's end; WMRL_STANDIN_CALLS (JSON list of Trigger services to call, in order, once they
// are all offered, then SIGTERM to this process); WMRL_STANDIN_STOP_AFTER (JSON {topic, count}: SIGTERM once that
// many messages were published on the topic); WMRL_STANDIN_REPORT (a file: what was published, offered and
// answered, written at exit).
import { writeFileSync } from 'node:fs';
import process from 'node:process';
import { clearInterval, setImmediate, setInterval, setTimeout } from 'node:timers';

const clone = (v) => globalThis.structuredClone(v);

const robot = JSON.parse(process.env.WMRL_STANDIN_ROBOT ?? '{}');
const calls = JSON.parse(process.env.WMRL_STANDIN_CALLS ?? '[]');
const stopAfter = JSON.parse(process.env.WMRL_STANDIN_STOP_AFTER ?? 'null');
const report = { published: {}, offered: [], answers: [], switches: [] };
const subs = new Map();
const services = new Map();
const joints = robot.joints ?? [];
const q = joints.map(() => 0.3);
const active = new Set(robot.controllers ?? []);
let timer;

process.on('exit', () => {
  if (process.env.WMRL_STANDIN_REPORT) writeFileSync(process.env.WMRL_STANDIN_REPORT, JSON.stringify(report));
});

function deliver(topic, msg) {
  for (const cb of subs.get(topic) ?? []) setImmediate(() => cb(clone(msg)));
}

function tick() {
  const t = Date.now() / 1000;
  deliver(robot.stateTopic ?? '/joint_states', { header: { stamp: { sec: Math.floor(t), nanosec: Math.round((t % 1) * 1e9) }, frame_id: '' }, name: joints, position: [...q], velocity: joints.map(() => 0), effort: [] });
  if (robot.featuresTopic) deliver(robot.featuresTopic, { layout: { dim: [], data_offset: 0 }, data: new Array(robot.features ?? 0).fill(0.1) });
}

// The robot's own controller manager and trajectory controller.
services.set('/controller_manager/switch_controller', (req, response) => {
  report.switches.push(req);
  const bad = [...req.deactivate_controllers.filter((c) => !active.has(c)), ...req.activate_controllers.filter((c) => active.has(c))];
  if (req.strictness === 2 && bad.length) return response.send({ ok: false, message: `cannot switch ${bad.join(', ')}` });
  req.deactivate_controllers.forEach((c) => active.delete(c));
  req.activate_controllers.forEach((c) => active.add(c));
  response.send({ ok: true, message: '' });
});
if (robot.trajectoryTopic) {
  subs.set(robot.trajectoryTopic, [(m) => {
    const end = m.points.at(-1);
    m.joint_names.forEach((n, i) => (q[joints.indexOf(n)] = end.positions[i]));
  }]);
}

async function runCalls() {
  for (const name of calls) {
    const answer = await new Promise((send) => services.get(name)({}, { send }));
    report.answers.push({ service: name, ...answer });
  }
  process.kill(process.pid, 'SIGTERM');
}

const node = {
  createPublisher: (_type, topic) => ({
    publish: (msg) => {
      report.published[topic] = (report.published[topic] ?? 0) + 1;
      if (stopAfter?.topic === topic && report.published[topic] === stopAfter.count) process.kill(process.pid, 'SIGTERM');
      deliver(topic, msg);
    },
  }),
  createSubscription: (_type, topic, _options, cb) => {
    subs.set(topic, [...(subs.get(topic) ?? []), cb]);
    return {};
  },
  createClient: (_type, name) => ({
    waitForService: async () => services.has(name),
    sendRequest: (req, cb) => setImmediate(() => services.get(name)(clone(req), { send: cb })),
  }),
  createService: (_type, name, _options, cb) => {
    services.set(name, cb);
    report.offered.push(name);
    if (calls.length && calls.every((c) => services.has(c))) setTimeout(() => void runCalls(), 50);
    return {};
  },
  destroy: () => {},
};

class ActionClient {
  async waitForServer() {
    return false;
  }
  destroy() {}
}

export default {
  init: async () => {
    timer = setInterval(tick, 1000 / (robot.hz ?? 50));
  },
  createNode: () => node,
  spin: () => {},
  shutdown: () => clearInterval(timer),
  ActionClient,
};
