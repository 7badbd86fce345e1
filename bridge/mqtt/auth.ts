// Who may use the embedded broker, and for what. Three roles:
//   service        everything (it dispatches jobs, commands robots, takes episodes);
//   worker         takes rollout jobs (wmrl/jobs/rollout, plain or $share) and answers on wmrl/jobs/results;
//   robot:{id}     its own wmrl/robots/{id}/… topics only.
// Credentials are made at first start and kept beside the service's access token, readable by its
// owner only (0600). A robot's password is derived from `robotKey` (HMAC-SHA256 of its id), so any
// robot id has one without editing the file: `printf %s ID | openssl dgst -sha256 -hmac ROBOTKEY`.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadOrCreateSecretFile } from '../../common/secret-file.js';
import { JOBS_TOPIC, RESULTS_TOPIC, ROOT, checkRobotId } from './topics.js';

export interface MqttLogin {
  username: string;
  password: string;
}

export interface MqttCredentials {
  service: MqttLogin;
  worker: MqttLogin;
  /** Secret from which each robot's password is derived. */
  robotKey: string;
}

export type MqttIdentity = { role: 'service' } | { role: 'worker' } | { role: 'robot'; robotId: string };

export const SERVICE_USER = 'wmrl-service';
export const WORKER_USER = 'wmrl-worker';
const ROBOT_PREFIX = 'robot:';
const SECRET = /^[0-9a-f]{64}$/;

const secret = () => randomBytes(32).toString('hex');

/** Fresh credentials, not written anywhere (tests, or a caller that stores them itself). */
export function generateMqttCredentials(): MqttCredentials {
  return { service: { username: SERVICE_USER, password: secret() }, worker: { username: WORKER_USER, password: secret() }, robotKey: secret() };
}

export function robotLogin(creds: MqttCredentials, robotId: string): MqttLogin {
  checkRobotId(robotId);
  return { username: `${ROBOT_PREFIX}${robotId}`, password: createHmac('sha256', creds.robotKey).update(robotId).digest('hex') };
}

export interface CredentialsFile {
  credentials: MqttCredentials;
  file: string;
  created: boolean;
}

/** `{dataDir}/mqtt-credentials.json`: read it, or make it (mode 0600, never overwriting one made meanwhile). */
export function loadOrCreateMqttCredentials(dataDir: string): CredentialsFile {
  const file = join(dataDir, 'mqtt-credentials.json');
  const { text, created } = loadOrCreateSecretFile(file, () => {
    const doc = {
      ...generateMqttCredentials(),
      robots: 'robot {id}: username "robot:{id}", password = hex HMAC-SHA256(robotKey, id): printf %s ID | openssl dgst -sha256 -hmac ROBOTKEY',
    };
    return JSON.stringify(doc, null, 2) + '\n';
  });
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    throw new Error(`${file}: not valid JSON (${(e as Error).message}); delete it to make new MQTT credentials`);
  }
  return { credentials: checkCredentials(parsed, file), file, created };
}

/** The service's credentials file as a robot or worker machine holds a copy of it: read and checked, never made. */
export function readMqttCredentials(file: string): MqttCredentials {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new Error(`cannot read the MQTT credentials ${file}: ${(e as Error).message}`, { cause: e });
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    throw new Error(`${file}: not valid JSON (${(e as Error).message})`, { cause: e });
  }
  return checkCredentials(parsed, file);
}

function checkCredentials(v: unknown, file: string): MqttCredentials {
  const o = v as Partial<MqttCredentials> | null;
  const login = (l: MqttLogin | undefined, user: string, key: string): MqttLogin => {
    if (!l || l.username !== user || typeof l.password !== 'string' || !SECRET.test(l.password)) {
      throw new Error(`${file}: ${key} must be {"username": "${user}", "password": <64 hex digits>}; delete the file to make new MQTT credentials`);
    }
    return { username: l.username, password: l.password };
  };
  if (!o || typeof o !== 'object') throw new Error(`${file}: not an MQTT credentials object; delete it to make new ones`);
  if (typeof o.robotKey !== 'string' || !SECRET.test(o.robotKey)) throw new Error(`${file}: robotKey must be 64 hex digits; delete the file to make new MQTT credentials`);
  return { service: login(o.service, SERVICE_USER, 'service'), worker: login(o.worker, WORKER_USER, 'worker'), robotKey: o.robotKey };
}

const same = (given: Buffer, expected: string): boolean => {
  const e = Buffer.from(expected);
  return given.length === e.length && timingSafeEqual(given, e);
};

/** The identity a CONNECT's username and password prove, or null. */
export function identify(creds: MqttCredentials, username: string | undefined, password: Buffer | undefined): MqttIdentity | null {
  if (username === undefined || password === undefined) return null;
  if (username === creds.service.username) return same(password, creds.service.password) ? { role: 'service' } : null;
  if (username === creds.worker.username) return same(password, creds.worker.password) ? { role: 'worker' } : null;
  if (username.startsWith(ROBOT_PREFIX)) {
    const robotId = username.slice(ROBOT_PREFIX.length);
    try {
      checkRobotId(robotId);
    } catch {
      return null; // not a robot id, so no robot's credentials
    }
    return same(password, robotLogin(creds, robotId).password) ? { role: 'robot', robotId } : null;
  }
  return null;
}

/** The topic patterns a role may use; publishes and subscriptions must stay inside them. */
function patterns(who: MqttIdentity): { publish: string[]; subscribe: string[] } {
  switch (who.role) {
    case 'service':
      return { publish: ['#'], subscribe: ['#'] };
    case 'worker':
      return { publish: [RESULTS_TOPIC], subscribe: [JOBS_TOPIC] };
    case 'robot': {
      const own = `${ROOT}/robots/${who.robotId}/+`;
      return { publish: [own], subscribe: [own] };
    }
  }
}

/** Whether every topic `filter` matches also matches `pattern` (both MQTT filters). */
export function filterWithin(filter: string, pattern: string): boolean {
  const f = filter.split('/');
  const p = pattern.split('/');
  for (let i = 0; i < f.length; i++) {
    if (p[i] === '#') return true;
    if (p[i] === undefined || f[i] === '#') return false;
    if (p[i] === '+') continue;
    if (f[i] !== p[i]) return false;
  }
  return f.length === p.length;
}

const SHARE_RE = /^\$share\/([^/+#]+)\/(.+)$/;

export function mayPublish(who: MqttIdentity, topic: string): boolean {
  if (topic.startsWith('$')) return false; // $SYS and friends are the broker's
  return patterns(who).publish.some((p) => filterWithin(topic, p));
}

/** A `$share/{group}/{filter}` subscription is judged by its inner filter. */
export function maySubscribe(who: MqttIdentity, filter: string): boolean {
  const share = SHARE_RE.exec(filter);
  const inner = share ? share[2]! : filter;
  if (inner.startsWith('$') && who.role !== 'service') return false;
  return patterns(who).subscribe.some((p) => filterWithin(inner, p));
}
