// The instruction tokenizer: lower-case words over a vocabulary built from the task's instructions.
// Id 0 pads, id 1 is a word the vocabulary lacks, word k of the vocabulary is id k + 2. The vocabulary
// travels in the exported artifact, so a robot tokenizes exactly as training did.

export const PAD = 0;
export const UNKNOWN = 1;

export const words = (text: string): string[] => text.toLowerCase().split(/[^a-z0-9]+/).filter((w) => w.length > 0);

/** Sorted distinct words of the instructions. */
export function buildVocabulary(instructions: readonly string[]): string[] {
  return [...new Set(instructions.flatMap(words))].sort();
}

/** Token ids of each text, padded or cut to `maxTokens`: N x maxTokens int64. */
export function tokenize(texts: readonly string[], vocabulary: readonly string[], maxTokens: number): BigInt64Array {
  const index = new Map(vocabulary.map((w, i) => [w, i + 2]));
  const out = new BigInt64Array(texts.length * maxTokens);
  texts.forEach((t, r) => {
    words(t).slice(0, maxTokens).forEach((w, k) => {
      out[r * maxTokens + k] = BigInt(index.get(w) ?? UNKNOWN);
    });
  });
  return out;
}
