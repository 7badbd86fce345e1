// An outcome world model served by an external LLM over an OpenAI-compatible HTTP API
// (`POST {baseUrl}/chat/completions`: OpenAI, vLLM, llama.cpp server, Ollama's /v1, ...). The
// judge is asked for the proposal's expected score several times at a temperature above 0; the
// samples' mean is its prediction and their variance its uncertainty. A sample without a number
// in its answer is dropped; a judgement with no usable sample is null (unscored), never 0.
import type { Score } from '../wmrl/advantages.js';
import type { WorldModelScorer, WorldModelScores } from '../wmrl/corrector.js';

export interface LlmJudgeOptions {
  /** e.g. http://127.0.0.1:8000/v1 */
  baseUrl: string;
  model: string;
  /** Sent as `Authorization: Bearer …` when given. */
  apiKey?: string;
  /** Independent samples per judgement (separate requests: not every server honours `n`). */
  samples: number;
  temperature: number;
  /** Per request. */
  timeoutMs: number;
  /** The system prompt: what the task is and how the score is measured. */
  system: string;
  /** Requests in flight at most, over all judgements. */
  concurrency: number;
}

export const DEFAULT_JUDGE: Omit<LlmJudgeOptions, 'baseUrl' | 'model' | 'system'> = { samples: 4, temperature: 0.7, timeoutMs: 30_000, concurrency: 8 };

export interface Judgement {
  mean: number;
  variance: number;
  samples: number[];
}

/** The first number in an answer: `{"score": 0.7}`, "Score: 0.7", "0.7". */
export function parseScore(text: string): number | null {
  const m = /-?\d+(?:\.\d+)?(?:e[-+]?\d+)?/i.exec(text);
  if (!m) return null;
  const x = Number(m[0]);
  return Number.isFinite(x) ? x : null;
}

export class LlmJudge {
  readonly opts: LlmJudgeOptions;
  private active = 0;
  private readonly waiters: Array<() => void> = [];

  constructor(opts: Partial<LlmJudgeOptions> & Pick<LlmJudgeOptions, 'baseUrl' | 'model' | 'system'>) {
    this.opts = { ...DEFAULT_JUDGE, ...opts };
    if (!(Number.isInteger(this.opts.samples) && this.opts.samples >= 1)) throw new Error(`judge samples ${this.opts.samples} must be a positive integer`);
    new URL(this.opts.baseUrl); // throws on a malformed URL, naming it
  }

  /**
   * Judges one proposal (its text: a description, code, or structured fields as JSON). Null when no
   * sample gave a number. HTTP failures (status ≠ 2xx, timeouts, refused connections) reject: the
   * judge being down is the caller's fault to handle, not an unscored proposal.
   */
  async judge(proposal: string): Promise<Judgement | null> {
    const answers = await Promise.all(Array.from({ length: this.opts.samples }, () => this.limited(() => this.ask(proposal))));
    const samples = answers.map(parseScore).filter((x): x is number => x !== null);
    if (samples.length === 0) return null;
    const mean = samples.reduce((a, b) => a + b, 0) / samples.length;
    const variance = samples.length > 1 ? samples.reduce((a, b) => a + (b - mean) ** 2, 0) / (samples.length - 1) : 0;
    return { mean, variance, samples };
  }

  private async ask(proposal: string): Promise<string> {
    const url = `${this.opts.baseUrl.replace(/\/+$/, '')}/chat/completions`;
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(this.opts.apiKey ? { authorization: `Bearer ${this.opts.apiKey}` } : {}) },
      body: JSON.stringify({
        model: this.opts.model,
        temperature: this.opts.temperature,
        messages: [
          { role: 'system', content: this.opts.system },
          { role: 'user', content: `Proposal:\n${proposal}\n\nAnswer with the expected score as one number.` },
        ],
      }),
      signal: AbortSignal.timeout(this.opts.timeoutMs),
    });
    if (!res.ok) throw new Error(`LLM judge ${url}: HTTP ${res.status} ${(await res.text()).slice(0, 200)}`);
    const body = (await res.json()) as { choices?: Array<{ message?: { content?: unknown } }> };
    const content = body.choices?.[0]?.message?.content;
    if (typeof content !== 'string') throw new Error(`LLM judge ${url}: the reply has no choices[0].message.content`);
    return content;
  }

  private async limited<T>(f: () => Promise<T>): Promise<T> {
    while (this.active >= this.opts.concurrency) await new Promise<void>((r) => this.waiters.push(r));
    this.active++;
    try {
      return await f();
    } finally {
      this.active--;
      this.waiters.shift()?.();
    }
  }
}

/** The judge as the Corrector's world-model scorer: `describe` turns a rollout into the text judged. */
export function judgeScorer<R>(judge: LlmJudge, describe: (r: R) => string): WorldModelScorer<R> {
  return {
    async score(groups: ReadonlyArray<readonly R[]>): Promise<WorldModelScores[]> {
      return Promise.all(groups.map(async (g) => {
        const js = await Promise.all(g.map((r) => judge.judge(describe(r))));
        return { scores: js.map((j): Score => j?.mean ?? null), variance: js.map((j): Score => j?.variance ?? null) };
      }));
    },
  };
}
