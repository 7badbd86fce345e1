// @foxglove/ws-protocol ships CommonJS whose exports Node's ESM loader cannot name statically
// (getters), so its classes are taken from the default export when Node gives one.
import * as fx from '@foxglove/ws-protocol';

const mod = ((fx as unknown as { default?: typeof fx }).default ?? fx) as typeof fx;
export const FoxgloveServer = mod.FoxgloveServer;
export const FoxgloveClient = mod.FoxgloveClient;
