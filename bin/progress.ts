// A terminal progress bar: redrawn in place on a TTY, a line per tenth otherwise (CI logs).

export type Progress = (done: number, total: number, label: string) => void;

export function progressBar(stream: NodeJS.WriteStream = process.stderr, width = 30): Progress {
  // Off a terminal: the tenth last printed, per total (a new total or a step back starts over), so progress
  // reported at irregular counts still prints about ten lines.
  let last = { total: -1, done: -1, tenth: 0 };
  return (done, total, label) => {
    const frac = Math.min(1, done / Math.max(total, 1));
    const filled = Math.round(frac * width);
    const bar = `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total} ${label}`;
    if (stream.isTTY) {
      stream.write(`\r${bar.padEnd(100)}${done >= total ? '\n' : ''}`);
      return;
    }
    if (total !== last.total || done < last.done) last = { total, done: -1, tenth: 0 };
    const tenth = Math.floor(10 * frac);
    if (done === 0 || done === total || tenth > last.tenth) stream.write(`${bar}\n`);
    last = { total, done, tenth: Math.max(tenth, last.tenth) };
  };
}
