/**
 * The agent hub's write-ahead log: one JSON line per change (an agent enrolled, an attempt queued,
 * claimed, ended…), appended and flushed to disk before the change is answered, so a restarted
 * controller knows who holds what and hands nothing out twice. Replayed at start and rewritten
 * compact when it has grown well past what it describes.
 */
import {
  closeSync,
  existsSync,
  fdatasyncSync,
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

  constructor(private readonly file: string) {}

  /** Every entry written so far, oldest first; a torn last line (a crash mid-write) is dropped. */
  replay(): E[] {
    if (!existsSync(this.file)) return [];
    const out: E[] = [];
    for (const line of readFileSync(this.file, 'utf8').split('\n')) {
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
    writeSync(this.fd, entries.map((e) => JSON.stringify(e) + '\n').join(''));
    fdatasyncSync(this.fd);
    this.lines += entries.length;
  }

  /** Lines in the file now. */
  get length(): number {
    return this.lines;
  }

  /** Replaces the file with `entries` (a snapshot of the state), atomically. */
  rewrite(entries: E[]): void {
    const tmp = `${this.file}.tmp-${process.pid}`;
    mkdirSync(dirname(this.file), { recursive: true });
    const fd = openSync(tmp, 'w', 0o600);
    writeSync(fd, entries.map((e) => JSON.stringify(e) + '\n').join(''));
    fdatasyncSync(fd);
    closeSync(fd);
    this.close();
    renameSync(tmp, this.file);
    this.lines = entries.length;
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
