/**
 * The `adv exec` command line, parsed with Node's own `util.parseArgs` and checked: each bad
 * value gets a message that says what is wrong and what is accepted. No I/O.
 */
import { parseArgs } from 'node:util';
import { topologyFrom } from './dist-env.js';
import type { ExecOptions } from './exec.js';
import { isRunName, RUN_NAME_MAX } from './names.js';
import { CkptMode } from './restore-barrier.js';
import { STOP_SIGNALS, type StopSignal } from './supervise.js';
import { FINISH_TIMEOUT_MS, RESTORE_WAIT_MS } from './worker.js';

export type ParsedExec =
  | { help: true }
  | { error: string; usage?: boolean }
  | { opts: Omit<ExecOptions, 'store' | 'progress'>; storeUrl: string | undefined };

const OPTIONS = {
  run: { type: 'string' },
  attempt: { type: 'string' },
  process: { type: 'string' },
  processes: { type: 'string' },
  'ckpt-mode': { type: 'string' },
  'ckpt-dir': { type: 'string' },
  'restore-wait': { type: 'string' },
  'stop-signal': { type: 'string' },
  'job-dir': { type: 'string' },
  cwd: { type: 'string' },
  grace: { type: 'string' },
  store: { type: 'string' },
  'commit-mode': { type: 'string' },
  heartbeat: { type: 'string' },
  'finish-timeout': { type: 'string' },
  code: { type: 'string' },
  workdir: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

type Values = ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>['values'];

export function parseExecArgs(args: readonly string[], env: NodeJS.ProcessEnv): ParsedExec {
  let parsed;
  try {
    parsed = parseArgs({ args: [...args], allowPositionals: true, strict: true, options: OPTIONS });
  } catch (e) {
    return { error: (e as Error).message, usage: true };
  }
  const { values: v, positionals } = parsed;
  if (v.help) return { help: true };
  const run = v.run ?? env.ADV_RUN;
  if (!run || positionals.length === 0)
    return {
      error: !run ? 'no run name: pass --run NAME or set ADV_RUN' : 'no command given after --',
      usage: true,
    };
  if (!isRunName(run))
    return {
      error: `${JSON.stringify(run)} is not a valid run name: a DNS-1123 subdomain of at most ${RUN_NAME_MAX} characters (lowercase letters, digits, '-' and '.')`,
    };
  const storeUrl = v.store ?? env.ADV_STORE;
  const numbers = parseNumbers(v, env);
  if (typeof numbers === 'string') return { error: numbers };
  const ckpt = parseCkpt(v, env, storeUrl);
  if (typeof ckpt === 'string') return { error: ckpt };
  const other = parseOther(v);
  if (typeof other === 'string') return { error: other };
  let topology;
  try {
    topology = topologyFrom({ process: v.process, processes: v.processes }, env);
  } catch (e) {
    return { error: (e as Error).message };
  }
  return {
    storeUrl,
    opts: {
      run,
      argv: positionals,
      topology,
      ...numbers,
      ...ckpt,
      ...other,
      ...(v['job-dir'] ? { jobDir: v['job-dir'] } : {}),
      ...(v.cwd ? { cwd: v.cwd } : {}),
      ...(v.code ? { code: { key: v.code, ...(v.workdir ? { workdir: v.workdir } : {}) } } : {}),
    },
  };
}

function parseNumbers(
  v: Values,
  env: NodeJS.ProcessEnv,
):
  | Pick<ExecOptions, 'attempt' | 'graceSec' | 'finishTimeoutSec' | 'heartbeatSec' | 'restoreWaitSec'>
  | string {
  const attempt = Number(v.attempt ?? env.ADV_ATTEMPT ?? 1);
  const grace = Number(v.grace ?? 30);
  const finish = Number(v['finish-timeout'] ?? FINISH_TIMEOUT_MS / 1000);
  const wait = Number(v['restore-wait'] ?? RESTORE_WAIT_MS / 1000);
  if (!Number.isInteger(attempt) || attempt < 1 || !Number.isFinite(grace) || grace < 0)
    return '--attempt takes a whole number ≥ 1 and --grace a number of seconds ≥ 0';
  if (!Number.isFinite(finish) || finish <= 0)
    return `--finish-timeout takes a number of seconds > 0, not ${JSON.stringify(v['finish-timeout'])}`;
  if (v['restore-wait'] !== undefined && (!/^\d+(\.\d+)?$/.test(v['restore-wait'].trim()) || wait <= 0))
    return `--restore-wait takes a number of seconds > 0 (how long process K > 0 waits for process 0's restore choice), not ${JSON.stringify(v['restore-wait'])}`;
  return {
    attempt,
    graceSec: grace,
    finishTimeoutSec: finish,
    restoreWaitSec: wait,
    ...(v.heartbeat ? { heartbeatSec: Number(v.heartbeat) } : {}),
  };
}

function parseCkpt(
  v: Values,
  env: NodeJS.ProcessEnv,
  storeUrl: string | undefined,
): Pick<ExecOptions, 'ckptMode' | 'ckptDir'> | string {
  const mode = v['ckpt-mode'] ?? CkptMode.PerProcess;
  if (!(Object.values(CkptMode) as string[]).includes(mode))
    return `--ckpt-mode takes per-process, shared or store, not ${JSON.stringify(mode)}`;
  const dir = v['ckpt-dir'];
  if (dir !== undefined && !dir.trim()) return '--ckpt-dir takes a directory, not an empty string';
  if (mode === CkptMode.Shared && !dir && !env.ADV_CKPT_DIR)
    return '--ckpt-mode shared needs --ckpt-dir DIR: the one checkpoint dir every process of the attempt sees (a cluster filesystem, a ReadWriteMany volume)';
  if (mode === CkptMode.Store && !storeUrl)
    return '--ckpt-mode store needs a store (--store URL or $ADV_STORE): the workload writes its checkpoints there';
  if (mode === CkptMode.Store && dir)
    return '--ckpt-dir does not go with --ckpt-mode store: the workload writes to $ADV_CKPT_URI, in the store';
  return { ckptMode: mode as CkptMode, ...(dir ? { ckptDir: dir } : {}) };
}

function parseOther(v: Values): Pick<ExecOptions, 'stopSignal' | 'commitMode'> | string {
  const raw = (v['stop-signal'] ?? 'SIGTERM').trim().toUpperCase();
  const sig = (raw.startsWith('SIG') ? raw : `SIG${raw}`) as StopSignal;
  if (!STOP_SIGNALS.includes(sig))
    return `--stop-signal takes ${STOP_SIGNALS.join(', ')}, not ${JSON.stringify(v['stop-signal'])}`;
  const mode = v['commit-mode'] ?? 'auto';
  if (mode !== 'auto' && mode !== 'marker')
    return `--commit-mode takes auto or marker, not ${JSON.stringify(mode)}`;
  if (v.cwd !== undefined && v.code)
    return '--cwd and --code do not go together: with --code, use --workdir DIR of the code';
  if (v.workdir !== undefined && !v.code)
    return '--workdir goes with --code (the working dir of the fetched code)';
  return { stopSignal: sig, commitMode: mode };
}
