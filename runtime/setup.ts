/**
 * The job's setup, run by `adv exec` on every backend before the workload: the steps the
 * controller composed into `ADV_SETUP` (Backend, then Environment, then Run) and, for a uv project,
 * the sync of its environment (`uv.ts`), all in ONE shell session that ends in `exec` of the
 * workload — so `export`, `. file` and `module load` reach it. The first failing step stops the
 * session; the workload never starts and the exit record says `SetupFailed` with the step.
 *
 * No value is pasted into the script unquoted: each step's text is one single-quoted `eval`
 * argument, and `{{ NAME }}` in it becomes the value shell-quoted. The script reaches the shell
 * in its environment (`ADV_SETUP_SCRIPT`), not its argv, which every user of the host can read.
 */
import { readFileSync, rmSync } from 'node:fs';
import { ExitReason, type ExitRecord, type SetupFailure } from './records.js';
import { redactText } from './redact.js';
import { shellQuote } from './shell.js';

/** The variables of the contract between the controller and adv exec. */
export const SETUP_VAR = 'ADV_SETUP';
export const UV_VAR = 'ADV_UV';
export const CACHE_VAR = 'ADV_CACHE_DIR';

/** One item of `ADV_SETUP`: a shell step, or variables exported at that point of the session. */
export type SetupItem = { from: string; run: string } | { from: string; env: Record<string, string> };

/** `ADV_UV`: how a uv project is synced. */
export interface UvSettings {
  groups?: string[];
  python?: string;
  /** The uv version installed when the host has none. */
  version?: string;
  /** `off`: a tree with pyproject.toml and uv.lock is not treated as a uv project. */
  project?: 'auto' | 'off';
}

/** How many lines of output the exit record keeps of a failed step. */
export const TAIL_LINES = 20;
/** How much of a step's text the exit record's message quotes. */
const COMMAND_CHARS = 300;

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Parses `ADV_SETUP`; absent or empty is no steps. Throws saying what is wrong. */
export function parseSetup(raw: string | undefined): SetupItem[] {
  if (!raw?.trim()) return [];
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch (e) {
    throw new Error(`${SETUP_VAR} is not JSON (${(e as Error).message})`);
  }
  if (!Array.isArray(v)) throw new Error(`${SETUP_VAR} must be a JSON array of setup steps`);
  return v.map((item: unknown, i) => {
    const bad = (why: string) =>
      new Error(
        `${SETUP_VAR}[${i}] ${why}: each item is {"from": "...", "run": "<shell step>"} or {"from": "...", "env": {"NAME": "value"}}`,
      );
    if (!item || typeof item !== 'object') throw bad('is not an object');
    const { from, run, env } = item as Record<string, unknown>;
    if (typeof from !== 'string') throw bad('has no "from"');
    if (typeof run === 'string' && env === undefined) return { from, run };
    if (run !== undefined || !env || typeof env !== 'object' || Array.isArray(env))
      throw bad('has neither a "run" string nor an "env" object');
    for (const [k, val] of Object.entries(env))
      if (!NAME.test(k) || typeof val !== 'string')
        throw bad(`has env ${JSON.stringify(k)} that is not NAME: "string"`);
    return { from, env: env as Record<string, string> };
  });
}

/** Parses `ADV_UV`; absent is `{project: "auto"}`. Throws saying what is wrong. */
export function parseUv(raw: string | undefined): UvSettings {
  if (!raw?.trim()) return { project: 'auto' };
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch (e) {
    throw new Error(`${UV_VAR} is not JSON (${(e as Error).message})`);
  }
  const shape = `${UV_VAR} must be {"groups"?: [string], "python"?: string, "version"?: string, "project"?: "auto"|"off"}`;
  if (!v || typeof v !== 'object' || Array.isArray(v)) throw new Error(shape);
  const { groups, python, version, project } = v as Record<string, unknown>;
  if (groups !== undefined && !(Array.isArray(groups) && groups.every((g) => typeof g === 'string')))
    throw new Error(`${shape}; groups is ${JSON.stringify(groups)}`);
  for (const [k, val] of Object.entries({ python, version }))
    if (val !== undefined && typeof val !== 'string')
      throw new Error(`${shape}; ${k} is ${JSON.stringify(val)}`);
  if (project !== undefined && project !== 'auto' && project !== 'off')
    throw new Error(`${shape}; project is ${JSON.stringify(project)}`);
  return v as UvSettings;
}

const TEMPLATE = /\{\{\s*(secrets\.)?([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g;

/**
 * `{{ NAME }}` and `{{ secrets.NAME }}` replaced by the variable's value in `env` (quoted with
 * `quote`); the secrets used are added to `secrets` so their values are masked. A name with no
 * value is returned as `missing`.
 */
export function expandTemplate(
  text: string,
  env: NodeJS.ProcessEnv,
  quote: (v: string) => string,
  secrets: Set<string>,
): { text: string } | { missing: string } {
  let missing: string | undefined;
  const out = text.replace(TEMPLATE, (whole, secret: string | undefined, name: string) => {
    const value = env[name];
    if (value === undefined) {
      missing ??= `${secret ?? ''}${name}`;
      return whole;
    }
    if (secret) secrets.add(value);
    return quote(value);
  });
  return missing === undefined ? { text: out } : { missing };
}

/** One step of the session, as the exit record names it. */
export interface SetupStep {
  from: string;
  /** What the user wrote (templates unexpanded, so no value shows). */
  command: string;
  /** Shell text run at this point of the session. */
  script: string;
}

/**
 * The steps of `items`, templates expanded against `env` (the workload's environment). A name
 * with no value fails that step before anything runs.
 */
export function setupSteps(
  items: readonly SetupItem[],
  env: NodeJS.ProcessEnv,
  secrets: Set<string>,
  of = items.length,
): { steps: SetupStep[] } | { failed: SetupFailure; why: string } {
  const steps: SetupStep[] = [];
  for (const [i, item] of items.entries()) {
    const command = 'run' in item ? item.run : `export ${Object.keys(item.env).join(' ')}`;
    let script: string;
    let missing: string | undefined;
    if ('run' in item) {
      const r = expandTemplate(item.run, env, shellQuote, secrets);
      if ('missing' in r) missing = r.missing;
      else script = `eval ${shellQuote(r.text)}`;
    } else {
      const parts: string[] = [];
      for (const [k, v] of Object.entries(item.env)) {
        const r = expandTemplate(v, env, (x) => x, secrets);
        if ('missing' in r) {
          missing ??= r.missing;
          continue;
        }
        parts.push(`${k}=${shellQuote(r.text)}`);
      }
      script = parts.length ? `export ${parts.join(' ')}` : ':';
    }
    if (missing !== undefined) {
      const failed: SetupFailure = { step: i + 1, of, from: item.from, command, exitCode: 1, tail: [] };
      return {
        failed,
        why: `: {{ ${missing} }} names no variable of the job's environment (the Run's env and secrets, and the contract's ADV_* variables); no step ran`,
      };
    }
    steps.push({ from: item.from, command, script: script! });
  }
  return { steps };
}

/** `setup step 2 of 4 (Environment cuda12@2): module load cuda/12`. */
function stepName(f: Pick<SetupFailure, 'step' | 'of' | 'from' | 'command'>): string {
  const cmd = f.command.length > COMMAND_CHARS ? `${f.command.slice(0, COMMAND_CHARS)}…` : f.command;
  return `setup step ${f.step} of ${f.of} (${f.from}): ${cmd}`;
}

/** Candidates for a `module` command (Lmod, environment-modules), tried when none is defined. */
const MODULE_INITS = [
  '/etc/profile.d/lmod.sh',
  '/etc/profile.d/modules.sh',
  '${LMOD_PKG:+"$LMOD_PKG/init/sh"}',
  '/usr/share/lmod/lmod/init/sh',
];

/**
 * The session: `sh -c 'eval "$ADV_SETUP_SCRIPT"' adv-setup ARGV...`. On a failing step (set -e,
 * or the step's own `exit`) the EXIT trap writes "<step> <exit code>" to `$ADV_SETUP_STATUS`;
 * the workload is `exec`ed in `cwd` once every step has passed. Internal names start with
 * `__adv_`, and are not exported.
 */
export function setupScript(steps: readonly SetupStep[], cwd: string): string {
  const of = steps.length;
  const lines = [
    'unset ADV_SETUP_SCRIPT',
    '__adv_status=$ADV_SETUP_STATUS',
    'unset ADV_SETUP_STATUS',
    '__adv_step=0',
    `trap '__adv_rc=$?; [ "$__adv_step" = 0 ] || printf "%s %s\\n" "$__adv_step" "$__adv_rc" >"$__adv_status"' EXIT`,
    // Lmod and environment-modules define `module` in login shells only; a batch job has none.
    'if ! command -v module >/dev/null 2>&1; then',
    `  for __adv_f in ${MODULE_INITS.join(' ')}; do`,
    '    if [ -r "$__adv_f" ]; then . "$__adv_f"; break; fi',
    '  done',
    'fi',
    'set -e',
  ];
  steps.forEach((s, i) => {
    lines.push(
      `__adv_step=${i + 1}`,
      `printf '%s\\n' ${shellQuote(`adv exec: ${stepName({ step: i + 1, of, from: s.from, command: firstLine(s.command) })}`)} >&2`,
      s.script,
    );
  });
  // A step may `cd`; the workload runs where the contract says. The trap stays: where the shell
  // runs it when `exec` fails (dash), the status says the command could not be started.
  lines.push('set +e', `cd -- ${shellQuote(cwd)}`, '__adv_step=start', 'exec "$@"');
  return lines.join('\n') + '\n';
}

function firstLine(s: string): string {
  const [first = '', ...rest] = s.split('\n');
  return rest.some((l) => l.trim()) ? `${first} …` : first;
}

/** The program `sh -c` runs: the script itself travels in the environment. */
export const SETUP_BOOT = 'eval "$ADV_SETUP_SCRIPT"';

/**
 * After the session ended: the step that failed (`start`: the workload's command could not be
 * executed), read from the status file and removed; undefined when the workload ran (or the shell
 * died of a signal: a stop).
 */
export function readSetupStatus(
  statusFile: string,
): { step: number | 'start'; exitCode: number } | undefined {
  let text: string;
  try {
    text = readFileSync(statusFile, 'utf8');
  } catch {
    return undefined;
  }
  rmSync(statusFile, { force: true });
  const m = /^(\d+|start) (\d+)/.exec(text);
  if (!m) return undefined;
  return { step: m[1] === 'start' ? 'start' : Number(m[1]), exitCode: Number(m[2]) };
}

/**
 * The exit record of a setup that failed at `failed.step`: the workload never started. `why`
 * follows the step's name in the message (" exited 1").
 */
export function setupFailedRecord(
  failed: SetupFailure,
  why: string,
  secrets: readonly string[],
  times: { startedAt: string },
): ExitRecord {
  const mask = (s: string) => redactText(s, secrets);
  const setup: SetupFailure = { ...failed, command: mask(failed.command), tail: failed.tail.map(mask) };
  const tail = setup.tail.length ? `; its last lines:\n${setup.tail.join('\n')}` : '';
  return {
    // A step that ended the shell with `exit 0` still kept the workload from starting.
    exitCode: failed.exitCode || 1,
    reason: ExitReason.SetupFailed,
    message: mask(`${stepName(setup)}${why}${tail}`),
    setup,
    startedAt: times.startedAt,
    finishedAt: new Date().toISOString(),
  };
}

/**
 * The last `max` lines of the output streams (already masked), in the order they arrived, for the
 * exit record of a failed step. Each stream keeps its own unfinished line.
 */
export class TailLines {
  private lines: string[] = [];
  private readonly partial = new Map<string, string>();

  constructor(private readonly max = TAIL_LINES) {}

  push(stream: string, b: Buffer): void {
    const parts = ((this.partial.get(stream) ?? '') + b.toString('utf8')).split('\n');
    this.partial.set(stream, (parts.pop() ?? '').slice(-4096));
    this.lines.push(...parts.map((l) => l.replace(/\r$/, '')));
    if (this.lines.length > this.max) this.lines.splice(0, this.lines.length - this.max);
  }

  get(): string[] {
    return [...this.lines, ...[...this.partial.values()].filter(Boolean)].slice(-this.max);
  }
}
