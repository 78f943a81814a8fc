/**
 * `adv submit --follow`: the run's phase changes, read from the status branch as `adv get` reads
 * them, and its output, read from the object store as `adv logs -f` reads it, until the run ends.
 * Nothing here talks to the controller or a backend: git and the store are the whole interface.
 */
import { ErrorCode, type AdvError, type Attempt, type RunStatusDoc } from '../controller/index.js';
import { logsPrefix } from '../runtime/checkpoint.js';
import type { ObjectStore } from '../runtime/store/index.js';
import { printable, safe, type Io } from './output.js';
import { openStatus, type StatusReader } from './status-reader.js';
import { openCommandStore } from './store.js';

export interface FollowOpts {
  repo?: string;
  branch: string;
  store?: string;
  dataDir?: string;
  /** How often git and the store are read again. Default 1 s. */
  intervalMs?: number;
}

const ENDED = new Set(['Succeeded', 'Failed', 'Cancelled']);

/**
 * Prints until run `name` ends, or stalls on something a person must fix; resolves to 0 when it
 * succeeded, else its command's exit code (1 when it has none, or stalled).
 */
export async function followRun(io: Io, name: string, opts: FollowOpts): Promise<number> {
  const every = opts.intervalMs ?? 1000;
  let reader: StatusReader | undefined;
  let store: ObjectStore | null | undefined;
  let said = '';
  const printed = new Set<string>();
  let shownAttempt = 0;
  io.stderr.write(`following run/${name} (Ctrl-C stops following; the run goes on)\n`);
  try {
    for (;;) {
      reader ??= await openStatus(opts, io).catch((e: unknown) => {
        if ((e as AdvError).code === ErrorCode.NotFound) return undefined; // no status branch yet
        throw e;
      });
      let doc: RunStatusDoc | undefined;
      if (reader) {
        await reader.repo.refresh();
        await reader.store.load();
        doc = reader.store.get<RunStatusDoc>('Run', name);
      }
      const st = doc?.status;
      const latest = st?.attempts.at(-1);
      const line = st
        ? phaseLine(st.phase, latest, st.reason, st.message)
        : 'waiting for the controller to take it';
      if (line !== said) io.stderr.write(`${new Date().toISOString().slice(11, 19)} run/${name}: ${line}\n`);
      said = line;

      if (latest && latest.phase !== 'Submitting' && latest.phase !== 'Queued') {
        store ??= await openCommandStore(opts, io).catch((e: unknown) => {
          io.stderr.write(`(no logs: ${printable((e as Error).message)}; pass --store URL to see them)\n`);
          return null;
        });
        if (store) {
          if (latest.n !== shownAttempt && shownAttempt)
            io.stderr.write(`--- attempt ${latest.n} on ${printable(latest.backend)} ---\n`);
          shownAttempt = latest.n;
          await printNewParts(io, store, logsPrefix(name, latest.n, 0), printed);
        }
      }
      // A run a person must fix (a spec error, a code ref that names nothing) does not end by itself.
      const stuck = st?.conditions?.find(
        (x) => (x.type === 'Stalled' && x.status === 'True') || (x.type === 'Valid' && x.status === 'False'),
      );
      if (stuck) {
        io.stderr.write(safe`run/${name} waits for a fix (${stuck.reason}): ${stuck.message}\n`);
        io.stderr.write(`stopped following; adv describe run ${name} shows it all\n`);
        return 1;
      }
      if (st && ENDED.has(st.phase)) {
        if (st.phase === 'Succeeded') return 0;
        const code = latest?.exitCode;
        return typeof code === 'number' && code > 0 && code < 256 ? code : 1;
      }
      await new Promise((r) => setTimeout(r, every));
    }
  } finally {
    await reader?.close();
  }
}

function phaseLine(phase: string, a: Attempt | undefined, reason?: string, message?: string): string {
  const where = a ? ` (attempt ${a.n} on ${a.backend})` : '';
  const why =
    ENDED.has(phase) && phase !== 'Succeeded' ? `: ${reason ?? ''}${message ? ` — ${message}` : ''}` : '';
  return safe`${phase}${where}${why}`;
}

/** Writes the log parts under `prefix` not printed yet, in order (`adv logs -f` and `--follow`). */
export async function printNewParts(
  io: Io,
  store: ObjectStore,
  prefix: string,
  printed: Set<string>,
): Promise<void> {
  const parts: string[] = [];
  for await (const o of store.list(prefix)) if (!printed.has(o.key)) parts.push(o.key);
  for (const key of parts.sort()) {
    const body = await store.get(key);
    if (body) io.stdout.write(Buffer.from(body));
    printed.add(key);
  }
}
