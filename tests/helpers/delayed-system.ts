// A one-dimensional system whose action acts `delay` control steps late: x' = x + gain·a(t − delay) (nothing
// before the start) + noise·N(0, 1), reward −|x'|; uniform random actions and start.
import * as nn from '../../nn/index.js';

export function delayedEpisodes(n: number, T: number, seed: number, delay: number, o: { gain?: number; noise?: number } = {}): Array<{ states: Float32Array; actions: Float32Array; rewards: Float32Array; success: Float32Array }> {
  const rng = new nn.Rng(seed);
  const gain = o.gain ?? 0.5, noise = o.noise ?? 0;
  return Array.from({ length: n }, () => {
    const states = new Float32Array(T + 1), actions = new Float32Array(T), rewards = new Float32Array(T);
    states[0] = rng.uniform(-1, 1);
    for (let t = 0; t < T; t++) {
      actions[t] = rng.uniform(-1, 1);
      states[t + 1] = states[t]! + gain * (t >= delay ? actions[t - delay]! : 0) + (noise > 0 ? noise * rng.normal() : 0);
      rewards[t] = -Math.abs(states[t + 1]!);
    }
    return { states, actions, rewards, success: new Float32Array(T) };
  });
}
