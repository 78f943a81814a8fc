/**
 * The worker side of the metric contract (metrics.ts): `adv exec` follows the file the workload
 * appends its metric lines to (`$ADV_METRICS_FILE`) and ships its complete lines as immutable
 * parts under `metricsPrefix(run, attempt)`, as it ships output under `logs/`.
 *
 * The file is read from where the last read ended, never whole: a long run's file may be large.
 * A part holds complete lines only; a last line without its newline waits for it, and is shipped
 * as it is once the attempt has ended. The file is one file, appended to: rotation (a rename and a
 * new file, or truncation) is not supported — it is said in adv exec's log, and the new content
 * is shipped from its start.
 */
import { open, stat } from 'node:fs/promises';
import { metricsPrefix } from './metrics.js';
import type { ObjectStore } from './store/types.js';

/** Name of the metrics file in the job dir. */
export const METRICS_FILE_NAME = 'metrics.jsonl';
/** Pending bytes past which a part is shipped before the timer says so. */
export const METRICS_PART_BYTES = 256 * 1024;
/** The most one read (and so one part) takes; a line longer than this is skipped. */
export const MAX_METRICS_READ_BYTES = 1024 * 1024;

const NL = 0x0a;

/**
 * Reads a file that is being appended to, in chunks of complete lines, each read starting where
 * the last ended. Not safe for concurrent calls (MetricsShipper serialises them).
 */
export class LineTail {
  private offset = 0;
  private ino: number | undefined;
  /** Inside a line too long to ship: bytes are dropped up to its newline. */
  private skipping = false;

  constructor(
    readonly file: string,
    private readonly o: { maxReadBytes?: number; log: (line: string) => void },
  ) {}

  /** Where the next read starts. */
  get position(): number {
    return this.offset;
  }

  /** Bytes written past the last read (0 while the file does not exist). */
  async pending(): Promise<number> {
    const s = await stat(this.file).catch(() => undefined);
    if (!s) return 0;
    if (s.ino !== this.ino && this.ino !== undefined) return s.size;
    return Math.max(0, s.size - this.offset);
  }

  /**
   * The next chunk of complete lines (at most `maxReadBytes`), or undefined when there is none yet.
   * With `final` (the writer has ended), a last line without its newline is returned as it is.
   */
  async next(final = false): Promise<Buffer | undefined> {
    const max = this.o.maxReadBytes ?? MAX_METRICS_READ_BYTES;
    const fh = await open(this.file, 'r').catch((e: NodeJS.ErrnoException) => {
      if (e.code === 'ENOENT') return undefined;
      throw e;
    });
    if (!fh) return undefined;
    try {
      const s = await fh.stat();
      this.checkSameFile(s.ino, s.size);
      for (;;) {
        const want = Math.min(max, s.size - this.offset);
        if (want <= 0) return undefined;
        const buf = Buffer.allocUnsafe(want);
        const { bytesRead } = await fh.read(buf, 0, want, this.offset);
        const got = buf.subarray(0, bytesRead);
        if (!bytesRead) return undefined;
        if (this.skipping) {
          const nl = got.indexOf(NL);
          this.offset += nl < 0 ? bytesRead : nl + 1;
          if (nl >= 0) this.skipping = false;
          continue;
        }
        const last = got.lastIndexOf(NL);
        if (last >= 0) {
          this.offset += last + 1;
          return got.subarray(0, last + 1);
        }
        if (bytesRead === max) {
          this.o.log(
            `warning: a line of ${this.file} at byte ${this.offset} is longer than ${max} bytes: skipped (one metric event per line)`,
          );
          this.offset += bytesRead;
          this.skipping = true;
          continue;
        }
        if (!final) return undefined;
        this.offset += bytesRead;
        return got;
      }
    } finally {
      await fh.close();
    }
  }

  /** A file replaced (rotated) or truncated under us is read again from its start. */
  private checkSameFile(ino: number, size: number): void {
    const replaced = this.ino !== undefined && ino !== this.ino;
    if (replaced || size < this.offset) {
      this.o.log(
        `warning: ${this.file} was ${replaced ? 'replaced' : 'truncated'} while the workload ran: rotating or truncating the metrics file is not supported (append to it); shipping the new content from its start`,
      );
      this.offset = 0;
      this.skipping = false;
    }
    this.ino = ino;
  }
}

export interface MetricsShipperOptions {
  store: ObjectStore;
  run: string;
  attempt: number;
  file: string;
  /** Secret values: a line holding one verbatim is dropped, never shipped. */
  secrets?: readonly string[];
  /** Pending bytes past which `poll` ships at once. Default METRICS_PART_BYTES. */
  partBytes?: number;
  /** The most one part holds. Default MAX_METRICS_READ_BYTES. */
  maxReadBytes?: number;
  log: (line: string) => void;
}

/** Ships the workload's metric lines as parts `metrics/part-NNNNNN`, one flush after another. */
export class MetricsShipper {
  private readonly tail: LineTail;
  private part = 0;
  private flushing: Promise<void> = Promise.resolve();
  private shipped = 0;

  constructor(private readonly o: MetricsShipperOptions) {
    this.tail = new LineTail(o.file, {
      log: o.log,
      ...(o.maxReadBytes ? { maxReadBytes: o.maxReadBytes } : {}),
    });
  }

  /** Lines shipped so far. */
  get lines(): number {
    return this.shipped;
  }

  /** Ships now when the pending bytes reach the threshold (cheap otherwise: one stat). */
  async poll(): Promise<void> {
    if ((await this.tail.pending()) >= (this.o.partBytes ?? METRICS_PART_BYTES)) await this.flush();
  }

  /**
   * Ships every complete line written so far (with `final`, the last partial one too), after any
   * flush under way. A failed put is logged and its lines are not shipped again: parts stay
   * immutable and in order, and output goes the same way (`Worker.flushLogs`).
   */
  flush(final = false): Promise<void> {
    this.flushing = this.flushing.then(() =>
      this.shipAll(final).catch((e: Error) => this.o.log(`warning: cannot ship metrics: ${e.message}`)),
    );
    return this.flushing;
  }

  private async shipAll(final: boolean): Promise<void> {
    let dropped = 0;
    for (let chunk = await this.tail.next(final); chunk; chunk = await this.tail.next(final)) {
      const { body, lines, secretLines } = this.withoutSecrets(chunk);
      dropped += secretLines;
      if (!body.length) continue;
      const key = `${metricsPrefix(this.o.run, this.o.attempt)}part-${String(this.part++).padStart(6, '0')}`;
      await this.o.store.put(key, body);
      this.shipped += lines;
    }
    if (dropped)
      this.o.log(
        `warning: ${dropped} metric line(s) held a secret value and were not shipped (a metric line carries names and numbers only)`,
      );
  }

  /** The chunk less the lines that hold a secret value (names are not scanned; values are numbers). */
  private withoutSecrets(chunk: Buffer): { body: Buffer; lines: number; secretLines: number } {
    const secrets = this.o.secrets ?? [];
    let lines = 0;
    let secretLines = 0;
    if (!secrets.length) {
      for (let at = chunk.indexOf(NL); at >= 0; at = chunk.indexOf(NL, at + 1)) lines++;
      return { body: chunk, lines: lines + (chunk.at(-1) === NL ? 0 : 1), secretLines };
    }
    const keep: string[] = [];
    for (const line of chunk.toString('utf8').split(/(?<=\n)/)) {
      if (secrets.some((s) => line.includes(s))) secretLines++;
      else {
        keep.push(line);
        lines++;
      }
    }
    return { body: Buffer.from(keep.join('')), lines, secretLines };
  }
}
