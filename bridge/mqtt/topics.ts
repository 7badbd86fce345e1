// Topic layout of the MQTT transport. One place builds and parses topics, so a typo cannot
// silently route a command nowhere.

export const ROOT = 'wmrl';

/** Per-robot channels: wmrl/robots/{robotId}/{channel}. */
export type RobotChannel = 'state' | 'outcome' | 'cmd' | 'reply' | 'spec' | 'episodes' | 'ack';
export const ROBOT_CHANNELS: readonly RobotChannel[] = ['state', 'outcome', 'cmd', 'reply', 'spec', 'episodes', 'ack'];

export const JOBS_TOPIC = `${ROOT}/jobs/rollout`;
/** Results travel back on one topic; the service subscribes to it without sharing. */
export const RESULTS_TOPIC = `${ROOT}/jobs/results`;

// MQTT forbids these in a topic level; a robot id is one level.
const BAD_ID = /[/+#]/;
const badLevel = (s: string): boolean => BAD_ID.test(s) || s.includes('\0');

export function checkRobotId(robotId: string): void {
  if (robotId.length === 0 || robotId.length > 128 || badLevel(robotId)) {
    throw new Error(`invalid robot id ${JSON.stringify(robotId)}: 1-128 chars, no '/', '+', '#' or NUL`);
  }
}

export function robotTopic(robotId: string, channel: RobotChannel): string {
  checkRobotId(robotId);
  return `${ROOT}/robots/${robotId}/${channel}`;
}

/** Subscription filter for one channel of every robot. */
export function allRobotsFilter(channel: RobotChannel): string {
  return `${ROOT}/robots/+/${channel}`;
}

/** MQTT 5 shared subscription: each message goes to one member of the group. */
export function sharedJobsFilter(group: string): string {
  if (group.length === 0 || badLevel(group)) throw new Error(`invalid share group ${JSON.stringify(group)}`);
  return `$share/${group}/${JOBS_TOPIC}`;
}

export type ParsedTopic =
  | { kind: 'robot'; robotId: string; channel: RobotChannel }
  | { kind: 'jobs' }
  | { kind: 'results' };

export function parseTopic(topic: string): ParsedTopic | undefined {
  if (topic === JOBS_TOPIC) return { kind: 'jobs' };
  if (topic === RESULTS_TOPIC) return { kind: 'results' };
  const parts = topic.split('/');
  if (parts.length !== 4 || parts[0] !== ROOT || parts[1] !== 'robots' || parts[2].length === 0) return undefined;
  const channel = parts[3] as RobotChannel;
  if (!ROBOT_CHANNELS.includes(channel)) return undefined;
  return { kind: 'robot', robotId: parts[2], channel };
}
