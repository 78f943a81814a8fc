import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { reportError } from './exit.js';
import { renderTable } from './format.js';
import { makeLogger } from './logger.js';
import { printableLines, safe } from './output.js';
import { AdvError, ErrorCode } from '../controller/index.js';

// eslint-disable-next-line no-control-regex
const RAW = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;
// eslint-disable-next-line no-control-regex
const COLOUR = /\u001b\[\d+m/g;
const H = 'a\u001b[2Jb\rforged\u0007\u009b\u202eevil\u2028x\ny';

function sink(tty = false) {
  const chunks: string[] = [];
  const stream = Object.assign(
    new Writable({
      write(chunk, _enc, cb) {
        chunks.push(String(chunk));
        cb();
      },
    }),
    { isTTY: tty },
  );
  return { stream, text: () => chunks.join('') };
}

describe('spec-controlled text on a terminal', () => {
  it('safe`` escapes what is interpolated, not the template', () => {
    expect(safe`Name:\t${H}\n`).toBe('Name:\ta\\x1b[2Jb\\x0dforged\\x07\\x9b\\u202eevil\\u2028x\\x0ay\n');
  });

  it('printableLines keeps line breaks and escapes the rest', () => {
    expect(printableLines('one\u001b[2J\ntwo\r')).toBe('one\\x1b[2J\ntwo\\x0d');
  });

  it('a table cell cannot forge a row or repaint the screen', () => {
    const out = renderTable(['NAME', 'MESSAGE'], [[H, H]]);
    expect(out.trimEnd().split('\n')).toHaveLength(2);
    expect(out.replace(/\n/g, '')).not.toMatch(RAW);
  });

  it('errors quoting names are printable, their line breaks kept', () => {
    const err = sink();
    expect(
      reportError(new AdvError(ErrorCode.NotFound, `run "${H}" has no status`, { hint: H }), err.stream),
    ).toBe(3);
    expect(err.text()).toContain('a\\x1b[2Jb');
    expect(err.text().replace(/\n/g, '')).not.toMatch(RAW);
  });

  it('the controller log on a terminal is printable', () => {
    const err = sink(true);
    const io = { stdout: err.stream, stderr: err.stream, env: { NO_COLOR: '1' }, cwd: '/' };
    makeLogger(io, 'info').info({ run: H, nested: { m: H } }, `summary ${H}`);
    expect(err.text()).toContain('summary a\\x1b[2Jb');
    // Colour codes are pino-pretty's own; nothing else is raw.
    const plain = err.text().replaceAll(COLOUR, '').replace(/\n/g, '');
    expect(plain).not.toMatch(RAW);
  });
});
