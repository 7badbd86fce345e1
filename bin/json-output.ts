// `--json` on the verbs that end with a table: one JSON document on stdout in place of the table, and every
// other line (the verb's messages, whatever a library prints with console.log) on stderr, so stdout parses.

export const JSON_HELP = 'print the result as one JSON document on stdout, in place of the table (messages and progress go to stderr)';

/** From here on console.log writes to stderr, leaving stdout to the document. */
export function routeLogsToStderr(): void {
  console.log = (...args: unknown[]) => console.error(...args);
}

/** The verb's result, one JSON document on stdout. */
export function printJson(doc: unknown): void {
  process.stdout.write(`${JSON.stringify(doc, null, 2)}\n`);
}
