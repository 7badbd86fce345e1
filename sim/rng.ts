// sim/ draws its randomness from the project's one PRNG (nn/rng.ts), whose state envs save and restore.
export { Rng, type RngState } from '../nn/rng.js';
