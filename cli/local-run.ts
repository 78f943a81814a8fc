/**
 * `adv run`: one attempt of a run, here and now, in the foreground, with no controller. The job is
 * composed as the controller composes an attempt (`buildJobRequest`: the spec's env and secrets,
 * the Environment's setup, the store and its credentials) and started as the local backend starts
 * one (`localExecArgs`, `localJobEnv`), so the workload gets the `adv exec` contract every backend
 * gives: ADV_* variables, restore from the store, checkpoint upload, log parts, the stop signal
 * and its grace period. The code is the work tree as it is: nothing is committed or packed.
 *
 * Attempts are numbered on from what the store holds for the run, so running again resumes from
 * the run's latest committed checkpoint. Ctrl-C is a preemption: the stop signal, the grace period
 * for a last checkpoint, its upload; a second Ctrl-C kills the workload at once.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, statSync } from 'node:fs';
import { mkdir, readdir, readFile, rm } from 'node:fs/promises';
import { constants, homedir } from 'node:os';
import { basename, join, relative, resolve } from 'node:path';
import {
  AdvError,
  CROSS_FILE_CODES,
  DatasetIndex,
  datasetInputs,
  EnvironmentIndex,
  ErrorCode,
  SpecLoader,
  WorkTreeSource,
  baseJobEnv,
  buildJobRequest,
  git,
  jobNameFor,
  loadSpecs,
  localExecArgs,
  localExecCommand,
  localJobEnv,
  storeTarget,
  urlStoreTarget,
  type Diagnostic,
  type JobRequest,
  type LoadResult,
  type Run,
  type RunSpec,
  type Storage,
} from '../controller/index.js';
import { attemptPrefix, latestCommitted } from '../runtime/checkpoint.js';
import { isSameProcessAlive } from '../runtime/proc.js';
import { EXEC_FILE, readJson, type ExecRecord } from '../runtime/records.js';
import { shellJoin } from '../runtime/shell.js';
import { openStore, type ObjectStore } from '../runtime/store/index.js';
import { parseAllDocuments, stringify } from 'yaml';
import { printableDiagnostic } from './format.js';
import { checkName } from './names.js';
import { printable, type Io } from './output.js';
import { defaultDataDir } from './repo.js';

/** What to run: a spec file, a Run of the specs repo, or a command made into a Run. */
export type RunTarget = { file: string } | { name: string } | { argv: string[] };

export interface LocalRunOptions {
  /** `--name`: the run's name instead of the spec's (or the one derived from the command). */
  name?: string;
  /** `--store URL`: instead of `$ADV_STORE`, the specs repo's Storage, or the embedded default. */
  store?: string;
  /** Seconds the workload gets after its stop signal for a last checkpoint. */
  graceSec: number;
  /** `--env K=V`, added to the spec's `env`. */
  env: readonly string[];
}

/** Where a run here keeps its job dirs, its uv cache and (with no Storage) its store. */
interface Place {
  /** The git work tree of the current dir, when it is in one. */
  root: string | undefined;
  dataDir: string;
}

/** A Run resolved for `adv run`: its name, its spec, where it starts and how to run it again. */
interface Resolved {
  run: string;
  spec: RunSpec;
  cwd: string;
  resume: string[];
}

/** Runs the target here; resolves to the workload's exit code (128 + the signal when interrupted: 130 for Ctrl-C). */
export async function localRun(target: RunTarget, opts: LocalRunOptions, io: Io): Promise<number> {
  const place = await placeOf(io);
  const specs = place.root ? await loadSpecs((await WorkTreeSource.open(place.root))!) : undefined;
  const resolved = await resolveRun(target, opts, io, place, specs);
  const storeTarget = storeFor(opts, io, place, specs);
  const store = await openStore(storeTarget.url, { ...io.env, ...storeTarget.env });
  const jobsDir = join(place.dataDir, 'run', 'jobs');
  await refuseIfRunning(jobsDir, resolved.run);
  const attempt = await nextAttempt(store, resolved.run);
  const head = place.root ? await headCommit(place.root) : undefined;
  const job = composeJob(resolved, attempt, head, storeTarget, specs, io.env);
  const jobDir = join(jobsDir, job.jobName);
  // An attempt number the store has no record of: a dir left by a run that never started.
  await rm(jobDir, { recursive: true, force: true });
  await mkdir(jobDir, { recursive: true });
  const say = (line: string) => io.stderr.write(`adv run: ${line}\n`);
  say(
    `run ${resolved.run}, attempt ${attempt}, in ${printable(resolved.cwd)}; store ${printable(store.url)}`,
  );
  const [exe, ...prefix] = localExecCommand();
  const child = spawn(
    exe!,
    [...prefix, ...localExecArgs(job, jobDir, resolved.cwd, ['--grace', String(opts.graceSec)])],
    {
      // adv exec in its own group: Ctrl-C reaches this process only, which decides what it means.
      detached: true,
      stdio: 'inherit',
      env: localJobEnv(job, baseJobEnv(io.env), join(place.dataDir, 'cache')),
    },
  );
  const stops = interruptions(child, jobDir, opts.graceSec, say);
  let code: number;
  try {
    code = await exitOf(child);
  } finally {
    stops.dispose();
  }
  if (!stops.first) return code;
  const last = await latestCommitted(store, resolved.run).catch(() => undefined);
  say(
    `interrupted; ${last ? `the latest committed checkpoint is step ${last.step}` : 'no checkpoint was committed'}. Resume with: ${printable(shellJoin(resumeLine(resolved, opts)))}`,
  );
  return 128 + constants.signals[stops.first];
}

/** The git work tree of the current dir (if any), and the data dir a run here uses. */
async function placeOf(io: Io): Promise<Place> {
  const root = await git(['rev-parse', '--show-toplevel'], { cwd: io.cwd })
    .then((b) => b.toString('utf8').trim())
    .catch(() => undefined);
  if (root) return { root, dataDir: await defaultDataDir(root, io.env) };
  // Outside git: a data dir of this directory's own, where the local controller's would be for a URL.
  const base = io.env.XDG_DATA_HOME ?? join(io.env.HOME ?? homedir(), '.local', 'share');
  const id = createHash('sha256').update(resolve(io.cwd)).digest('hex').slice(0, 16);
  return { root: undefined, dataDir: join(base, 'adventuretime', 'dirs', id) };
}

async function headCommit(root: string): Promise<string | undefined> {
  return git(['rev-parse', '--verify', '--quiet', 'HEAD^{commit}'], { cwd: root })
    .then((b) => b.toString('utf8').trim())
    .catch(() => undefined);
}

/** The Run for the target, checked like any spec (file:line for a file), with `--name` and `--env`. */
async function resolveRun(
  target: RunTarget,
  opts: LocalRunOptions,
  io: Io,
  place: Place,
  specs: LoadResult | undefined,
): Promise<Resolved> {
  let run: Run;
  let root = place.root ?? io.cwd;
  let resume: string[];
  if ('argv' in target) {
    run = {
      apiVersion: 'adventuretime.dev/v1alpha1',
      kind: 'Run',
      metadata: { name: opts.name ?? commandRunName(target.argv, io.cwd) },
      spec: { command: target.argv },
    } as Run;
    root = io.cwd;
    resume = ['--name', run.metadata.name, '--', ...target.argv];
  } else if ('file' in target) {
    run = await runOfFile(resolve(io.cwd, target.file), place, io);
    resume = ['-f', target.file];
  } else {
    run = await runOfRepo(checkName(target.name), place, specs, io);
    resume = [target.name];
  }
  const changed = withOptions(run, opts);
  // What the command line made or changed is checked as a spec too: a bad --env is said like a bad env.
  if (changed !== run || 'argv' in target)
    checkOne('argv' in target ? '(adv run -- COMMAND)' : '(adv run options)', stringify(changed), io);
  const spec = changed.spec;
  const cwd = join(root, spec.code?.path ?? '', spec.workingDir ?? '');
  if (!existsSync(cwd) || !statSync(cwd).isDirectory())
    throw new AdvError(
      ErrorCode.NotFound,
      `run ${changed.metadata.name} starts in ${cwd}, which is not a directory`,
      {
        hint: "check the run's code.path and workingDir: adv run starts them in the work tree of the current directory",
      },
    );
  return { run: changed.metadata.name, spec, cwd, resume };
}

/** `run` with `--name` and `--env` applied (the same object when neither is given). */
function withOptions(run: Run, opts: LocalRunOptions): Run {
  if (!opts.env.length && (opts.name === undefined || opts.name === run.metadata.name)) return run;
  const env: Record<string, string> = { ...run.spec.env };
  for (const kv of opts.env) {
    const at = kv.indexOf('=');
    if (at <= 0)
      throw new AdvError(ErrorCode.UsageError, `--env ${printable(kv)} is not NAME=VALUE`, {
        hint: 'write --env NAME=VALUE (once per variable)',
      });
    env[kv.slice(0, at)] = kv.slice(at + 1);
  }
  return {
    ...run,
    metadata: { ...run.metadata, name: opts.name ?? run.metadata.name },
    spec: { ...run.spec, ...(Object.keys(env).length ? { env } : {}) },
  };
}

/**
 * A stable run name for a command in a directory: a word of the command (the script it runs, else
 * the program) and a hash of the directory and every argument, so the same command here resumes its
 * run and another one (other arguments, another directory) is another run.
 */
export function commandRunName(argv: readonly string[], dir: string): string {
  const hash = createHash('sha256')
    .update(JSON.stringify([resolve(dir), ...argv]))
    .digest('hex')
    .slice(0, 8);
  // The script a interpreter runs (`python3 train.py`, `python -m lab.train`), else the program.
  const word = argv.slice(1).find((a) => /^[^-\s][^\s]*[./]/.test(a)) ?? argv[0] ?? 'run';
  const slug = basename(word)
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 40)
    .replace(/-+$/, '');
  return `${slug || 'run'}-${hash}`;
}

/** The one Run of a spec file, checked alone (the rules that need the whole repo do not apply here). */
async function runOfFile(file: string, place: Place, io: Io): Promise<Run> {
  const shown =
    place.root && !relative(place.root, file).startsWith('..') ? relative(place.root, file) : file;
  const runs = checkOne(shown, await readFile(file), io);
  if (runs.length !== 1)
    throw new AdvError(
      ErrorCode.UsageError,
      `${printable(shown)} holds ${runs.length} Runs; adv run runs one`,
      {
        hint: runs.length ? 'put the run you mean in a file of its own' : 'write a Run spec (adv schema Run)',
      },
    );
  return runs[0]!;
}

/** Checks one file's documents as `adv apply` does; its valid Runs, or SpecInvalid after printing why. */
function checkOne(file: string, bytes: Uint8Array | string, io: Io): Run[] {
  const loader = new SpecLoader();
  loader.loadFile(file, typeof bytes === 'string' ? Buffer.from(bytes) : bytes, 'adv-run');
  const result = loader.result();
  const own = (d: Diagnostic) => !CROSS_FILE_CODES.has(d.code);
  const errors = result.diagnostics.filter((d) => own(d) && d.severity === 'error');
  if (errors.length) {
    for (const d of errors) io.stderr.write(printableDiagnostic(d) + '\n');
    throw new AdvError(ErrorCode.SpecInvalid, `${printable(file)} is invalid; nothing was run`, {
      hint: 'fix what is listed above (adv validate checks a file before you run it)',
    });
  }
  const runs = result.objects.filter((o) => o.kind === 'Run').map((o) => o.object as Run);
  // Held back only by rules of the whole repo (a Backend named elsewhere): runnable here. Such a
  // document passed the schema, so it reads as the loader read it.
  const heldBack = new Set(
    result.invalid.filter((d) => d.kind === 'Run' && d.diagnostics.every((x) => !own(x))).map((d) => d.name),
  );
  if (heldBack.size)
    for (const doc of parseAllDocuments(Buffer.from(bytes).toString('utf8'))) {
      const value = doc.toJS() as Run | null;
      if (value?.kind === 'Run' && heldBack.has(value.metadata?.name)) runs.push(value);
    }
  return runs;
}

/** Run `name` of the specs repo's work tree as it is now. */
async function runOfRepo(name: string, place: Place, specs: LoadResult | undefined, io: Io): Promise<Run> {
  if (!place.root || !specs)
    throw new AdvError(ErrorCode.UsageError, `${printable(io.cwd)} is not inside a git repository`, {
      hint: 'run adv run NAME inside your specs repo, or adv run -f FILE, or adv run -- COMMAND',
    });
  const found = specs.objects.find((o) => o.kind === 'Run' && o.name === name);
  if (found) {
    const run = found.object as Run;
    if (run.spec.code?.repo)
      throw new AdvError(
        ErrorCode.UsageError,
        `run ${name} takes its code from ${printable(run.spec.code.repo)}, not from this work tree`,
        {
          hint: `cd into your checkout of that repository and run adv run -f ${join(place.root, found.file)}`,
        },
      );
    return run;
  }
  const invalid = specs.invalid.find((d) => d.kind === 'Run' && d.name === name);
  if (invalid) {
    // Checked as its file alone: what only the repo as a whole decides (the Backends it names)
    // is about where the controller runs it, not about running it here.
    const run = checkOne(invalid.file, await readFile(join(place.root, invalid.file)), io).find(
      (r) => r.metadata.name === name,
    );
    if (run) {
      for (const d of invalid.diagnostics)
        io.stderr.write(`adv run: not in the way here: ${printableDiagnostic(d)}\n`);
      return checkedCodeRepo(run, name, place.root, invalid.file);
    }
  }
  const names = [...specs.objects, ...specs.invalid].filter((o) => o.kind === 'Run').map((o) => o.name);
  throw new AdvError(ErrorCode.NotFound, `no Run ${name} in the specs of ${printable(place.root)}`, {
    hint: names.length
      ? `the runs there: ${names.slice(0, 20).join(', ')}${names.length > 20 ? ', …' : ''}`
      : 'adv run -f FILE runs a spec file; adv run -- COMMAND runs a command',
  });
}

/** `run`, unless its code is in another repository than this work tree. */
function checkedCodeRepo(run: Run, name: string, root: string, file: string): Run {
  if (!run.spec.code?.repo) return run;
  throw new AdvError(
    ErrorCode.UsageError,
    `run ${name} takes its code from ${printable(run.spec.code.repo)}, not from this work tree`,
    { hint: `cd into your checkout of that repository and run adv run -f ${join(root, file)}` },
  );
}

/** `--store`/`$ADV_STORE`, else the specs repo's Storage, else the embedded default (a file store in the data dir). */
function storeFor(
  opts: LocalRunOptions,
  io: Io,
  place: Place,
  specs: LoadResult | undefined,
): ReturnType<typeof storeTarget> {
  const explicit = opts.store ?? io.env.ADV_STORE;
  if (explicit) return urlStoreTarget(explicit, io.env);
  const storage = specs?.objects.find((o) => o.kind === 'Storage')?.object as Storage | undefined;
  return storeTarget(storage?.spec ?? { type: 'file' }, place.dataDir, io.env);
}

/**
 * Two attempts of one run at once would write the same checkpoints: one that still runs here (its
 * adv exec alive, by its job dir's exec.json) is said, and nothing starts.
 */
async function refuseIfRunning(jobsDir: string, run: string): Promise<void> {
  for (const job of await readdir(jobsDir).catch(() => [])) {
    const exec = readJson<ExecRecord>(join(jobsDir, job), EXEC_FILE);
    if (exec?.run === run && isSameProcessAlive(exec.pid, exec.startTicks))
      throw new AdvError(
        ErrorCode.Conflict,
        `run ${run} is running here already (attempt ${exec.attempt}, adv exec pid ${exec.pid})`,
        {
          hint: 'wait for it to end, or stop it (Ctrl-C where it runs) and run adv run again to resume it',
        },
      );
  }
}

/** The attempt after the highest the store holds a record of for the run. */
async function nextAttempt(store: ObjectStore, run: string): Promise<number> {
  const prefix = attemptPrefix(run, 0).replace(/0\/$/, '');
  const ns = (await store.listFolders(prefix))
    .map((f) => Number(f.slice(prefix.length).replace(/\/$/, '')))
    .filter((n) => Number.isInteger(n) && n > 0);
  return Math.max(0, ...ns) + 1;
}

/** The job as the controller composes an attempt: secrets from this shell's environment, no Backend. */
function composeJob(
  r: Resolved,
  attempt: number,
  head: string | undefined,
  store: ReturnType<typeof storeTarget>,
  specs: LoadResult | undefined,
  env: NodeJS.ProcessEnv,
): JobRequest {
  const environment = r.spec.environment
    ? new EnvironmentIndex(specs?.objects ?? []).resolve(r.spec.environment)
    : undefined;
  if (r.spec.environment && !environment)
    throw new AdvError(
      ErrorCode.NotFound,
      `run ${r.run} names Environment ${printable(r.spec.environment)}, which is not in the specs here`,
      {
        hint: 'run adv run inside the specs repo that defines it, or drop spec.environment',
      },
    );
  const datasets = datasetInputs(r.spec, new DatasetIndex(specs?.objects ?? []));
  if (datasets.missing.length)
    throw new AdvError(
      ErrorCode.NotFound,
      `run ${r.run} names Dataset ${printable(datasets.missing.join(', '))}, which is not in the specs here`,
      { hint: 'run adv run inside the specs repo that defines it (adv dataset push DIR NAME adds one)' },
    );
  try {
    return buildJobRequest(
      r.run,
      // The code is the work tree as it is; its HEAD is recorded for a person reading request.json.
      { n: attempt, jobName: jobNameFor(r.run, attempt), codeCommit: head ?? 'work-tree' },
      r.spec,
      {
        secrets: { get: (n) => env[n], where: 'your environment' },
        controllerEnv: {},
        passEnv: [],
        store,
        ...(environment ? { environment } : {}),
        ...(datasets.inputs.length ? { datasets: datasets.inputs } : {}),
      },
    );
  } catch (e) {
    // The controller's wording (adv reconcile, the controller's environment) does not fit here.
    const what = e instanceof AdvError ? e.message : String(e);
    throw new AdvError(ErrorCode.UsageError, what, {
      hint: 'export what is missing in this shell (or fix the spec), then run adv run again',
    });
  }
}

/** How to run it again (and so resume), as a command line. */
function resumeLine(r: Resolved, opts: LocalRunOptions): string[] {
  const store = opts.store ? ['--store', opts.store] : [];
  const env = opts.env.flatMap((kv) => ['--env', kv]);
  const named = opts.name !== undefined && r.resume[0] !== '--name' ? ['--name', r.run] : [];
  return ['adv', 'run', ...store, ...env, ...named, ...r.resume];
}

/** Resolves to adv exec's exit code (the workload's own); 128 + N when it was killed by signal N. */
function exitOf(child: ChildProcess): Promise<number> {
  return new Promise((resolveCode, reject) => {
    child.once('error', reject);
    child.once('exit', (code, signal) => resolveCode(code ?? 128 + (signal ? constants.signals[signal] : 0)));
  });
}

/**
 * Ctrl-C (and SIGTERM, SIGHUP: a closed terminal) while the run is on. The first is a preemption:
 * adv exec gives the workload its stop signal and the grace period for a last checkpoint, then
 * uploads it. The second kills the workload now (adv exec still records how it ended); a third
 * kills adv exec too.
 */
function interruptions(
  child: ChildProcess,
  jobDir: string,
  graceSec: number,
  say: (line: string) => void,
): { readonly first: NodeJS.Signals | undefined; dispose(): void } {
  let count = 0;
  let first: NodeJS.Signals | undefined;
  const onStop = (sig: NodeJS.Signals) => {
    count++;
    first ??= sig;
    if (count === 1) {
      say(`${sig}: stopping the run, ${graceSec}s for a last checkpoint (Ctrl-C again to kill it now)`);
      child.kill(sig === 'SIGHUP' ? 'SIGTERM' : sig);
    } else if (count === 2) {
      say('killing the workload now');
      const exec = readJson<ExecRecord>(jobDir, EXEC_FILE);
      if (exec?.childPid && isSameProcessAlive(exec.childPid, exec.childStartTicks)) killGroup(exec.childPid);
    } else {
      say('killing adv exec');
      if (child.pid) killGroup(child.pid);
    }
  };
  const signals: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];
  for (const s of signals) process.on(s, onStop);
  return {
    get first() {
      return first;
    },
    dispose: () => signals.forEach((s) => process.off(s, onStop)),
  };
}

function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // already gone
  }
}
