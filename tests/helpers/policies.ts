// Policy wrappers for comparisons.
import type { Policy } from '../../policies/types.js';

/** `policy` without its encoder split (Policy.encoderSplit): a policy-gradient update of it runs the whole policy in every minibatch. */
export function withoutEncoderSplit<P extends Policy>(policy: P): P {
  return new Proxy(policy, { get: (t, p) => (p === 'encoderSplit' ? undefined : Reflect.get(t, p)) });
}
