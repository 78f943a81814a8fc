/** kubectl-like presentation: tables and coloured phases (ages are the barrel's `age`, shared with the dashboard). */
import { formatDiagnostic, type Diagnostic } from '../controller/index.js';
import { printable } from './output.js';

/** A diagnostic for a terminal: its file name, path, message and hint made printable. */
export function printableDiagnostic(d: Diagnostic): string {
  return formatDiagnostic({
    ...d,
    file: printable(d.file),
    path: printable(d.path),
    message: printable(d.message),
    ...(d.hint !== undefined ? { hint: printable(d.hint) } : {}),
  });
}

/**
 * A kubectl-style table. Every cell is made `printable` (a cell holding a newline, CR or an escape
 * sequence cannot forge a row or repaint the screen). `style` may decorate a cell after it is
 * padded (colour on a terminal): widths are measured on the plain text.
 */
export function renderTable(
  headers: string[],
  raw: string[][],
  style?: (header: string, cell: string, plain: string) => string,
): string {
  const rows = raw.map((r) => r.map((c) => printable(c)));
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[], isHeader = false) =>
    cells
      .map((c, i) => {
        const padded = i === cells.length - 1 ? c : c.padEnd(widths[i]!);
        return style && !isHeader ? style(headers[i]!, padded, c) : padded;
      })
      .join('   ')
      .trimEnd();
  return [line(headers, true), ...rows.map((r) => line(r))].join('\n') + '\n';
}

/** Colours a PHASE cell: green done, red failed, yellow in flight, dim cancelled or waiting. */
export function phaseStyle(c: {
  red: (s: string) => string;
  green: (s: string) => string;
  yellow: (s: string) => string;
  dim: (s: string) => string;
}): (header: string, cell: string, plain: string) => string {
  return (header, cell, plain) => {
    if (header !== 'PHASE') return cell;
    if (plain === 'Succeeded') return c.green(cell);
    if (plain === 'Failed') return c.red(cell);
    if (['Pending', 'Scheduling', 'Queued', 'Running'].includes(plain)) return c.yellow(cell);
    return c.dim(cell);
  };
}
