/**
 * Parts of a run's outputs, shipped while the run goes on. The workload commits a part by renaming
 * a finished dir into `$ADV_ARTIFACT_DIR/<output>/parts/<part>/` (a rename is atomic, so a part is
 * whole once it is visible; names starting with `.` are its work in progress). Process 0's adv exec
 * uploads each new part on every heartbeat and once more when the workload ends, however it ends:
 * a preempted rollout keeps what it committed.
 *
 * Before the workload starts, the parts earlier attempts committed are downloaded into the same
 * place, so the workload sees what is done and they are not shipped again.
 */
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { downloadParts, PART_NAME, PARTS, PartExistsError, uploadPart } from './artifacts.js';
import type { ObjectStore } from './store/types.js';

export interface PartShipperOptions {
  store: ObjectStore;
  run: string;
  attempt: number;
  artifactDir: string;
  outputs: readonly string[];
  log: (line: string) => void;
  /** How often new parts are looked for (the heartbeat's period). */
  everyMs: number;
}

export class PartShipper {
  /**
   * `<output>/<part>` already in the store (shipped, restored) or refused, by the identity of its
   * dir (inode and ctime: a rename sets the ctime, and inode numbers are reused): not looked at
   * again until it changes — another dir renamed in under that name, or a file added to it — and
   * then checked against the committed part, refused unless the same.
   */
  private readonly done = new Map<string, string>();
  private timer: NodeJS.Timeout | undefined;
  private shipping: Promise<void> = Promise.resolve();

  constructor(private readonly o: PartShipperOptions) {}

  /** Before the workload: every committed part of every output into its `parts/` dir, verified. */
  async restore(): Promise<void> {
    for (const output of this.o.outputs) {
      const dir = this.partsDir(output);
      const { parts: names, replaced } = await downloadParts(this.o.store, this.o.run, output, dir);
      for (const n of names) await this.remember(output, n);
      for (const n of replaced)
        this.o.log(`warning: ${join(dir, n)} differed from the committed part ${n}: replaced by it`);
      if (names.length)
        this.o.log(
          `output ${output}: ${names.length} committed part(s) of earlier attempts in ${this.partsDir(output)}`,
        );
    }
  }

  /** While the workload runs: ship new parts every `everyMs`. */
  start(): void {
    this.timer = setInterval(() => void this.ship(), this.o.everyMs);
    this.timer.unref();
  }

  /** Once the workload has ended: a last look, and every upload under way, finished. */
  async finish(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.ship();
  }

  /** Looks for new parts after the look before it has ended (two never upload the same part). */
  ship(): Promise<void> {
    this.shipping = this.shipping.then(() => this.shipNew());
    return this.shipping;
  }

  private partsDir(output: string): string {
    return join(this.o.artifactDir, output, PARTS);
  }

  private async shipNew(): Promise<void> {
    for (const output of this.o.outputs) {
      const entries = await readdir(this.partsDir(output), { withFileTypes: true }).catch(() => []);
      for (const e of entries) {
        const key = `${output}/${e.name}`;
        if (e.name.startsWith('.')) continue;
        const ino = await this.inode(output, e.name);
        if (ino === undefined || this.done.get(key) === ino) continue;
        if (!e.isDirectory() || !PART_NAME.test(e.name)) {
          this.done.set(key, ino);
          this.o.log(
            `warning: ${join(this.partsDir(output), e.name)} is not a part (a part is a directory named like ${PART_NAME.source}); it is not published`,
          );
          continue;
        }
        await this.shipOne(output, e.name, ino);
      }
    }
  }

  private async inode(output: string, part: string): Promise<string | undefined> {
    const st = await stat(join(this.partsDir(output), part)).catch(() => undefined);
    return st && `${st.ino}:${st.ctimeMs}`;
  }

  private async remember(output: string, part: string): Promise<void> {
    const ino = await this.inode(output, part);
    if (ino !== undefined) this.done.set(`${output}/${part}`, ino);
  }

  private async shipOne(output: string, part: string, ino: string): Promise<void> {
    const key = `${output}/${part}`;
    try {
      const r = await uploadPart(this.o.store, {
        run: this.o.run,
        output,
        part,
        attempt: this.o.attempt,
        dir: join(this.partsDir(output), part),
      });
      this.done.set(key, ino);
      if (r.uploaded)
        this.o.log(
          `output ${output}: part ${part} committed (${r.manifest.files.length} files, ${r.manifest.totalBytes} bytes)`,
        );
    } catch (e) {
      // Refused for good; any other failure (the store) is tried again on the next look.
      if (e instanceof PartExistsError) {
        this.done.set(key, ino);
        this.o.log(`error: ${e.message}`);
      } else
        this.o.log(
          `warning: output ${output}: part ${part} not uploaded yet (${(e as Error).message}); trying again`,
        );
    }
  }
}
