// The module resolution hook hook.mjs registers: `rclnodejs` is the stand-in next to this file.
import { URL } from 'node:url';

export async function resolve(specifier, context, next) {
  if (specifier === 'rclnodejs') return { url: new URL('./rclnodejs.mjs', import.meta.url).href, shortCircuit: true };
  return next(specifier, context);
}
