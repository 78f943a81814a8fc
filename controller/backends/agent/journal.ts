/**
 * The agent hub's write-ahead log: one JSON line per change (an agent enrolled, an attempt queued,
 * claimed, ended…), appended and flushed to disk before the change is answered, so a restarted
 * controller knows who holds what and hands nothing out twice. Replayed at start; its owner
 * rewrites it compact (`rewrite`) when it has grown well past what it describes, at start or while
 * running. A crash at any point leaves either the old file or the new one, each complete.
 */
import {
  closeSync,
  existsSync,
  fdatasyncSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  writeSync,
} from 'node:fs';
import { dirname } from 'node:path';

export class Journal<E> {
  private fd: number | undefined;
  private lines = 0;
  private size = 0;

  constructor(private readonly file: string) {}

  /** Every entry written so far, oldest first; a torn last line (a crash mid-write) is dropped. */
  replay(): E[] {
    if (!existsSync(this.file)) return [];
    const out: E[] = [];
    const text = readFileSync(this.file, 'utf8');
    this.size = Buffer.byteLength(text);
    for (const line of text.split('\n')) {
      if (!line) continue;
      try {
        out.push(JSON.parse(line) as E);
      } catch {
        // only the last line can be torn; anything after it was never acknowledged
      }
    }
    this.lines = out.length;
    return out;
  }

  /** Appends entries and flushes them to disk: once this returns, they survive a crash. */
  append(...entries: E[]): void {
    if (!entries.length) return;
    this.fd ??= this.open();
    const text = entries.map((e) => JSON.stringify(e) + '\n').join('');
    writeSync(this.fd, text);
    fdatasyncSync(this.fd);
    this.lines += entries.length;
    this.size += Buffer.byteLength(text);
  }

  /** Lines in the file now. */
  get length(): number {
    return this.lines;
  }

  /** Bytes in the file now. */
  get bytes(): number {
    return this.size;
  }

  /**
   * Replaces the file with `entries` (a snapshot of the state), atomically: written and flushed
   * aside, renamed over the journal, and the rename flushed too (the directory), so that an
   * acknowledged entry is never lost to a crash during or after the rewrite.
   */
  rewrite(entries: E[]): void {
    const tmp = `${this.file}.tmp-${process.pid}`;
    mkdirSync(dirname(this.file), { recursive: true, mode: 0o700 });
    const text = entries.map((e) => JSON.stringify(e) + '\n').join('');
    const fd = openSync(tmp, 'w', 0o600);
    writeSync(fd, text);
    fdatasyncSync(fd);
    closeSync(fd);
    this.close();
    renameSync(tmp, this.file);
    const dir = openSync(dirname(this.file), 'r');
    try {
      fsyncSync(dir);
    } finally {
      closeSync(dir);
    }
    this.lines = entries.length;
    this.size = Buffer.byteLength(text);
  }

  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }

  private open(): number {
    mkdirSync(dirname(this.file), { recursive: true, mode: 0o700 });
    return openSync(this.file, 'a', 0o600);
  }
}
