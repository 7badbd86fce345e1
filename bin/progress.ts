// A terminal progress bar: redrawn in place on a TTY, a line per tenth otherwise (CI logs).

export type Progress = (done: number, total: number, label: string) => void;

export function progressBar(stream: NodeJS.WriteStream = process.stderr, width = 30): Progress {
  return (done, total, label) => {
    const frac = Math.min(1, done / Math.max(total, 1));
    const filled = Math.round(frac * width);
    const bar = `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total} ${label}`;
    if (stream.isTTY) stream.write(`\r${bar.padEnd(100)}${done >= total ? '\n' : ''}`);
    else if (done === total || done % Math.max(1, Math.floor(total / 10)) === 0) stream.write(`${bar}\n`);
  };
}
