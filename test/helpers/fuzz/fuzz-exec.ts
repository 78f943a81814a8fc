/**
 * The execution layer of the injection fuzz suite: hostile strings packed into Runs whose command
 * dumps, byte for byte, the argv and environment it was given; the Runs pushed through a real
 * controller in waves; and the dumps compared with what the spec said.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join, posix } from 'node:path';
import type { Controller } from '../../../controller/controller.js';
import { bootstrapScript, envFile } from '../../../controller/backends/remote/bootstrap.js';
import { shellJoin } from '../../../controller/internal/shell.js';
import { MAX_ARGV_ENV_BYTES } from '../../../controller/spec/rules.js';
import { TERMINAL_PHASES } from '../../../controller/status/phases.js';
import { yamlQuote, type Hostile } from './hostile.js';
import type { WorkTree } from '../git/specs-repo.js';
import { waitFor } from '../wait.js';

/** The workload: writes its argv, its `FZ_*` variables and its cwd, as hex bytes, to dump.json. */
export const DUMP = [
  'import json, os, sys',
  'env = {k.decode(): v.hex() for k, v in os.environb.items() if k.startswith(b"FZ_")}',
  'argv = [os.fsencode(a).hex() for a in sys.argv[1:]]',
  'd = {"argv": argv, "env": env, "cwd": os.fsencode(os.getcwd()).hex()}',
  'json.dump(d, open(os.path.join(os.environ["ADV_ARTIFACT_DIR"], "dump.json"), "w"))',
].join('\n');

/** One Run of the execution layer: hostile strings as argv elements, env values, or its working dir. */
export interface FuzzRun {
  name: string;
  backend: string;
  argv: Hostile[];
  env: Hostile[];
  workingDir?: Hostile;
}

const hex = (s: string): string => Buffer.from(s, 'utf8').toString('hex');
const envOf = (r: FuzzRun): Record<string, string> =>
  Object.fromEntries(r.env.map((h) => [`FZ_${h.n}`, h.text]));
const argvOf = (r: FuzzRun): string[] => ['python3', '-c', DUMP, ...r.argv.map((h) => h.text)];

/** The Run's spec file: one line per value, every value a YAML double-quoted scalar. */
export function fuzzRunYaml(r: FuzzRun): string {
  const env = r.env.map((h) => `    FZ_${h.n}: ${yamlQuote(h.text)}\n`).join('');
  return (
    `apiVersion: adventuretime.dev/v1alpha1\nkind: Run\nmetadata:\n  name: ${r.name}\nspec:\n` +
    `  command:\n${argvOf(r)
      .map((a) => `    - ${yamlQuote(a)}\n`)
      .join('')}` +
    (r.env.length ? `  env:\n${env}` : '') +
    (r.workingDir ? `  workingDir: ${yamlQuote(r.workingDir.text)}\n` : '') +
    `  code: {path: code}\n  policy: {maxAttempts: 1}\n  backendSelector: {order: [${r.backend}]}\n`
  );
}

/** What the argument rules count (each argument and `NAME=value`, plus one byte). */
const ruleBytes = (r: FuzzRun): number =>
  argvOf(r).reduce((n, a) => n + Buffer.byteLength(a) + 1, 0) +
  Object.entries(envOf(r)).reduce((n, [k, v]) => n + Buffer.byteLength(`${k}=${v}`) + 1, 0);

/**
 * The bytes of the one SSH command that writes the job's env file and run.sh on an ssh host (both
 * quoted again as arguments of `sh -c`): sshd hands it to the login shell as one argument.
 */
export const sshLaunchBytes = (r: FuzzRun): number =>
  Buffer.byteLength(
    shellJoin([envFile(envOf(r)), bootstrapScript({ jobName: `adv-${r.name}-1`, argv: argvOf(r) })]),
  ) + 4096;

/** A batch fits: within the argument rules, a spec file the loader reads, ≤ 250 strings a sink. */
export const fitsRules = (r: FuzzRun): boolean =>
  ruleBytes(r) <= MAX_ARGV_ENV_BYTES - 4096 &&
  Buffer.byteLength(fuzzRunYaml(r)) <= 900_000 &&
  r.argv.length <= 250 &&
  r.env.length <= 250;

/**
 * Packs strings into Runs, in order, while `fits` holds; a string that does not fit even alone gets
 * a Run of its own (and shows what happens to it).
 */
export function packRuns(
  prefix: string,
  backend: string,
  items: { sink: 'argv' | 'env'; h: Hostile }[],
  fits: (r: FuzzRun) => boolean,
): FuzzRun[] {
  const runs: FuzzRun[] = [];
  let cur: FuzzRun | undefined;
  for (const { sink, h } of items) {
    const next: FuzzRun = cur
      ? { ...cur, [sink]: [...cur[sink], h] }
      : { name: `${prefix}-${runs.length}`, backend, argv: [], env: [], [sink]: [h] };
    if (!cur || fits(next)) cur = next;
    else {
      runs.push(cur);
      cur = { name: `${prefix}-${runs.length}`, backend, argv: [], env: [], [sink]: [h] };
    }
  }
  if (cur) runs.push(cur);
  return runs;
}

/**
 * Groups ssh Runs into waves whose launch commands together stay under `bytes`, so that however
 * the host batches a wave's launches, no command is over sshd's limit unless one Run alone is.
 */
export function sshWaves(runs: readonly FuzzRun[], bytes: number): FuzzRun[][] {
  const waves: FuzzRun[][] = [];
  let cur: FuzzRun[] = [];
  let size = 0;
  for (const r of runs) {
    const n = sshLaunchBytes(r);
    if (cur.length && size + n > bytes) {
      waves.push(cur);
      cur = [];
      size = 0;
    }
    cur.push(r);
    size += n;
  }
  if (cur.length) waves.push(cur);
  return waves;
}

/**
 * The working dirs to run: names a code tree can hold (not empty, components ≤ 200 bytes, no
 * `.git`), option-like ones first, then payloads, fragments and combinations; at most 40.
 */
export function workingDirSample(accepted: readonly Hostile[]): Hostile[] {
  const ok = (h: Hostile) =>
    h.text !== '' &&
    Buffer.byteLength(h.text) <= 1024 &&
    h.text.split('/').every((p) => Buffer.byteLength(p) <= 200 && p.toLowerCase() !== '.git');
  const rank = (h: Hostile) =>
    h.text.startsWith('-') ? 0 : h.family === 'payload' ? 1 : h.family === 'fragment' ? 2 : 3;
  return accepted
    .filter(ok)
    .sort((a, b) => rank(a) - rank(b) || a.n - b.n)
    .slice(0, 40);
}

/** How one Run ended and, when it ran, what its workload was given. */
export interface Outcome {
  run: FuzzRun;
  phase: string;
  message: string;
  dump?: { argv: string[]; env: Record<string, string>; cwd: string };
  /** The job's exit record, as the controller reads it. */
  exit?: { reason: string; message?: string };
  jobDir?: string;
}

const readJson = <T>(file: string | undefined): T | undefined =>
  file && existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as T) : undefined;

/** One string's fate in one Run: delivered byte for byte, or not (and why). */
export interface Delivery {
  h: Hostile;
  sink: 'argv' | 'env' | 'workingDir';
  run: string;
  literal: boolean;
  why?: string;
}

/** Compares a Run's dump with its spec; `work` is where its code was extracted. */
export function deliveries(o: Outcome): Delivery[] {
  const out: Delivery[] = [];
  const base = { run: o.run.name };
  const why = o.dump ? undefined : `no dump: ${o.phase} ${o.message}`.slice(0, 300);
  o.run.argv.forEach((h, i) => {
    const got = o.dump?.argv[i];
    const literal = got === hex(h.text) && o.dump!.argv.length === o.run.argv.length;
    out.push({ ...base, h, sink: 'argv', literal, ...(literal ? {} : { why: why ?? `argv[${i}] differs` }) });
  });
  for (const h of o.run.env) {
    const literal = o.dump?.env[`FZ_${h.n}`] === hex(h.text);
    out.push({ ...base, h, sink: 'env', literal, ...(literal ? {} : { why: why ?? `FZ_${h.n} differs` }) });
  }
  const wd = o.run.workingDir;
  if (wd && o.jobDir) {
    const want = posix.join(o.jobDir, 'work', wd.text).replace(/(.)\/$/, '$1');
    const literal = o.dump?.cwd === hex(want);
    const got = o.dump ? Buffer.from(o.dump.cwd, 'hex').toString() : undefined;
    out.push({
      ...base,
      h: wd,
      sink: 'workingDir',
      literal,
      ...(literal ? {} : { why: why ?? `cwd ${JSON.stringify(got)}` }),
    });
  }
  return out;
}

/** The status of a Run that is over for this suite: ended, or refused by its backend at submission. */
function settled(
  c: Controller,
  name: string,
): { phase: string; message: string; jobName?: string } | undefined {
  const st = c.runStatus(name)?.status;
  if (!st) return undefined;
  const a = st.attempts.at(-1);
  const stalled = st.conditions.some((x) => x.type === 'Stalled' && x.status === 'True');
  const over = TERMINAL_PHASES.has(st.phase) || st.reason === 'SubmitFailed' || stalled;
  if (!over) return undefined;
  return {
    phase: st.reason === 'SubmitFailed' || stalled ? `${st.phase}/${st.reason}` : st.phase,
    message: st.message ?? a?.message ?? '',
    ...(a ? { jobName: a.jobName } : {}),
  };
}

/**
 * Pushes the Runs through the controller: `background` Runs with the first wave (left in place
 * until they end), then each wave alone (its spec files removed once it settled, so no Run of one
 * wave is ever launched together with another's). `rootOf` is the backend root of a Run.
 */
export async function runWaves(
  c: Controller,
  wt: WorkTree,
  background: readonly FuzzRun[],
  waves: readonly (readonly FuzzRun[])[],
  rootOf: (r: FuzzRun) => string,
  timeoutMs: number,
): Promise<Outcome[]> {
  const outcomes = new Map<string, Outcome>();
  const collect = (runs: readonly FuzzRun[]) => {
    for (const r of runs) {
      if (outcomes.has(r.name)) continue;
      const s = settled(c, r.name);
      if (!s) continue;
      const jobDir = s.jobName ? join(rootOf(r), 'work', s.jobName) : undefined;
      const dump = readJson<Outcome['dump']>(jobDir && join(jobDir, 'artifacts', 'dump.json'));
      const exit = readJson<Outcome['exit']>(jobDir && join(jobDir, 'exit.json'));
      outcomes.set(r.name, {
        run: r,
        phase: s.phase,
        message: s.message,
        ...(dump ? { dump } : {}),
        ...(exit ? { exit } : {}),
        ...(jobDir ? { jobDir } : {}),
      });
    }
  };
  const settle = (runs: readonly FuzzRun[], what: string) =>
    waitFor(
      async () => {
        await c.pass();
        collect([...runs, ...background]);
        return runs.every((r) => outcomes.has(r.name));
      },
      {
        what,
        timeoutMs,
        everyMs: 200,
        detail: () =>
          runs.filter((r) => !outcomes.has(r.name)).map((r) => [r.name, c.runStatus(r.name)?.status]),
      },
    );
  let previous: readonly FuzzRun[] = [];
  for (const [i, wave] of [...waves, []].entries()) {
    for (const r of previous) await wt.remove(`runs/${r.name}.yaml`);
    for (const r of [...wave, ...(i === 0 ? background : [])])
      await wt.write(`runs/${r.name}.yaml`, fuzzRunYaml(r));
    await wt.commit(`fuzz wave ${i}`);
    c.requestFetch('fuzz wave');
    await settle(wave, `fuzz wave ${i} (${wave.map((r) => r.name).join(', ')})`);
    previous = wave;
  }
  await settle(background, 'the background runs');
  return [...outcomes.values()];
}
