// A reporter that names, at the very end of the output, every test file that did not pass: a worker that dies
// mid-file ("Worker exited unexpectedly") is otherwise reported without the file it was running.
import type { Reporter, TestModule } from 'vitest/node';

export default class UnfinishedReporter implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>): void {
    const bad = modules.filter((m) => m.state() !== 'passed' && m.state() !== 'skipped');
    if (bad.length === 0) return;
    const lines = bad.map((m) => {
      const counts: Record<string, number> = {};
      for (const t of m.children.allTests()) counts[t.result().state] = (counts[t.result().state] ?? 0) + 1;
      const tally = Object.entries(counts).map(([k, v]) => `${v} ${k}`).join(', ') || 'no test collected';
      return `  ${m.relativeModuleId}: ${m.state()} (${tally})`;
    });
    process.stderr.write(`\nTest files that did not pass (a file whose tests are still pending had its worker die):\n${lines.join('\n')}\n`);
  }
}
