// wmrl/ draws its randomness from the project's one PRNG (nn/rng.ts); its state is saved with the run.
export { Rng, type RngState } from '../nn/rng.js';
