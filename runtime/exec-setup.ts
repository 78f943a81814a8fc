/**
 * The setup session of one `adv exec` run, planned before the workload starts and judged after it
 * ends: what `setup.ts` and `uv.ts` generate, wired to the job's environment and its exit record.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ExitReason, type ExitRecord } from './records.js';
import { MIN_SECRET_CHARS, redactText } from './redact.js';
import {
  parseSetup,
  parseUv,
  readSetupStatus,
  SETUP_BOOT,
  SETUP_VAR,
  setupFailedRecord,
  setupScript,
  setupSteps,
  TailLines,
  UV_VAR,
  type SetupStep,
} from './setup.js';
import { isUvProject, uvStep } from './uv.js';

/** A workload wrapped in its setup session. */
export interface Session {
  /** What to spawn instead of the workload's own argv. */
  argv: string[];
  /** The workload's environment plus the script; without ADV_SETUP and ADV_UV. */
  env: NodeJS.ProcessEnv;
  steps: SetupStep[];
  statusFile: string;
  /** A temporary dir of ours to remove at the end, when there was no job dir. */
  tmpDir?: string;
  /** The last lines of output, fed by the caller. */
  tail: TailLines;
}

/**
 * The session for `argv` in `cwd`, undefined when there is nothing to set up (no steps, no uv
 * project), or the exit record when setup cannot even start (bad ADV_SETUP, an unknown template
 * name). `secrets` gains the values of `{{ secrets.NAME }}` used, so they are masked.
 */
export function planSession(o: {
  argv: readonly string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
  jobDir: string | undefined;
  secrets: string[];
  startedAt: string;
}): Session | { record: ExitRecord } | undefined {
  const fail = (reason: ExitReason, message: string): { record: ExitRecord } => ({
    record: {
      exitCode: 1,
      reason,
      message: redactText(message, o.secrets),
      startedAt: o.startedAt,
      finishedAt: new Date().toISOString(),
    },
  });
  let items, uv;
  try {
    items = parseSetup(o.env[SETUP_VAR]);
    uv = parseUv(o.env[UV_VAR]);
  } catch (e) {
    return fail(
      ExitReason.StartFailed,
      `the job's setup is malformed (a controller bug): ${(e as Error).message}`,
    );
  }
  const project = isUvProject(o.cwd, uv);
  if (!items.length && !project) return undefined;
  const used = new Set<string>();
  const planned = setupSteps(items, o.env, used, items.length + (project ? 1 : 0));
  addSecrets(o.secrets, used);
  if ('failed' in planned) return { record: setupFailedRecord(planned.failed, planned.why, o.secrets, o) };
  const steps = planned.steps;
  if (project) {
    try {
      steps.push(uvStep(o.cwd, uv, o.env));
    } catch (e) {
      return fail(
        ExitReason.SetupFailed,
        `the uv project in ${o.cwd} cannot be synced: ${(e as Error).message}`,
      );
    }
  }
  const tmpDir = o.jobDir ? undefined : mkdtempSync(join(tmpdir(), 'adv-setup-'));
  const statusFile = join(o.jobDir ?? tmpDir!, 'setup-status');
  rmSync(statusFile, { force: true });
  const env: NodeJS.ProcessEnv = {
    ...o.env,
    ADV_SETUP_SCRIPT: setupScript(steps, o.cwd),
    ADV_SETUP_STATUS: statusFile,
  };
  delete env[SETUP_VAR];
  delete env[UV_VAR];
  return {
    argv: ['/bin/sh', '-c', SETUP_BOOT, 'adv-setup', ...o.argv],
    env,
    steps,
    statusFile,
    ...(tmpDir ? { tmpDir } : {}),
    tail: new TailLines(),
  };
}

/** Adds `values` to the masked secrets, longest first as `secretValues` orders them. */
function addSecrets(secrets: string[], values: Set<string>): void {
  for (const v of values) if (v.length >= MIN_SECRET_CHARS && !secrets.includes(v)) secrets.push(v);
  secrets.sort((a, b) => b.length - a.length);
}

/**
 * How the session ended when it never reached the workload: the exit record of the failed step,
 * or of a command that could not be executed. Undefined when the workload ran (its own end
 * decides) or the shell was stopped by a signal.
 */
export function sessionOutcome(
  s: Session,
  cmd: string,
  secrets: readonly string[],
  times: { startedAt: string },
): ExitRecord | undefined {
  const status = readSetupStatus(s.statusFile);
  if (s.tmpDir) rmSync(s.tmpDir, { recursive: true, force: true });
  if (!status) return undefined;
  const tail = s.tail.get();
  if (status.step === 'start')
    return {
      exitCode: status.exitCode,
      reason: ExitReason.StartFailed,
      message: redactText(
        `cannot start ${JSON.stringify(cmd)} after setup: ${tail.at(-1) ?? `exit ${status.exitCode}`}`,
        secrets,
      ),
      startedAt: times.startedAt,
      finishedAt: new Date().toISOString(),
    };
  const step = s.steps[status.step - 1];
  if (!step) return undefined;
  const why =
    status.exitCode === 0
      ? ' ended the setup shell (exit 0) before the workload'
      : ` exited ${status.exitCode}`;
  return setupFailedRecord(
    {
      step: status.step,
      of: s.steps.length,
      from: step.from,
      command: step.command,
      exitCode: status.exitCode,
      tail,
    },
    why,
    secrets,
    times,
  );
}
