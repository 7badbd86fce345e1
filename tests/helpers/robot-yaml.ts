// Robot YAMLs the service tests host: the reach sim stand-in over rosbridge (the shipped sim-reach.yaml pointed at
// a test's port) and over MQTT, whose timings are generous enough for a loaded machine, where a stalled process must
// not pass for a dead one.
import { readFileSync } from 'node:fs';

/** The shipped launch/robots/sim-reach.yaml, renamed `name` and pointed at a stand-in's rosbridge on `port`. */
export const reachOverRosbridge = (name: string, port: number) =>
  readFileSync('launch/robots/sim-reach.yaml', 'utf8').replace('name: sim-reach', `name: ${name}`).replace('ws://127.0.0.1:9090', `ws://127.0.0.1:${port}`);

/** The reach stand-in over MQTT as robot `id` on the broker at `url`; `login`: the service's username and the variable holding its password. */
export function reachOverMqtt(o: { id: string; url: string; maxStateAgeMs: number; login?: { username: string; passwordEnv: string } }): string {
  const login = o.login ? `\n  username: ${o.login.username}\n  password_env: ${o.login.passwordEnv}` : '';
  return `name: ${o.id}
task: reach
transport: mqtt
url: ${o.url}
mqtt:
  robot_id: ${o.id}
  protocol_version: 5${login}
  max_state_age_ms: ${o.maxStateAgeMs}
joints: [shoulder, elbow]
position_limits: [[-.inf, .inf], [-2.7, 2.7]]
velocity_limits: [20, 20]
control_hz: 50
action:
  kind: normalized
  low: [-1, -1]
  high: [1, 1]
safety:
  max_command_age_ms: 2000
  watchdog_ms: 3000
  watchdog_action: hold
`;
}
