import { describe, expect, it } from 'vitest';
import { phaseStyle, renderTable } from './format.js';
import { colours } from './output.js';

describe('renderTable', () => {
  const rows = [
    ['a', 'Succeeded', '1'],
    ['long-name', 'Failed', '2'],
  ];
  it('colours PHASE cells on a terminal, measured on the plain text', () => {
    const out = renderTable(['NAME', 'PHASE', 'N'], rows, phaseStyle(colours({ isTTY: true }, {})));
    const plain = out.replaceAll('\x1b[32m', '').replaceAll('\x1b[31m', '').replaceAll('\x1b[0m', '');
    expect(plain).toBe(renderTable(['NAME', 'PHASE', 'N'], rows));
    expect(out).toContain('\x1b[32mSucceeded\x1b[0m');
    expect(out).toContain('\x1b[31mFailed   \x1b[0m');
    expect(out.split('\n')[0]).not.toContain('\x1b[');
  });
  it('is plain text when the output is not a terminal, or NO_COLOR is set', () => {
    for (const [tty, env] of [
      [false, {}],
      [true, { NO_COLOR: '1' }],
    ] as const)
      expect(
        renderTable(['NAME', 'PHASE', 'N'], rows, phaseStyle(colours({ isTTY: tty }, env))),
      ).not.toContain('\x1b[');
  });
});
