/** A one-line progress bar for long transfers, drawn only on a terminal, at most 10 times a second. */
export function progressBar(out: NodeJS.WriteStream): (label: string, bytes: number, total: number) => void {
  let last = 0;
  return (label, bytes, total) => {
    const now = Date.now();
    const done = total > 0 && bytes >= total;
    if (!done && now - last < 100) return;
    last = now;
    const width = 30;
    const frac = total > 0 ? Math.min(1, bytes / total) : 0;
    const bar = '#'.repeat(Math.round(frac * width)).padEnd(width, '.');
    const mib = (n: number) => (n / 2 ** 20).toFixed(1);
    out.write(
      `\r${label.padEnd(14)} [${bar}] ${(frac * 100).toFixed(0).padStart(3)}% ${mib(bytes)}/${mib(total)} MiB${done ? '\n' : ''}`,
    );
  };
}
