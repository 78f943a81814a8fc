/**
 * `adv agent`: this host pulls work from a controller that cannot reach it (docs/backends.md#agent).
 * `adv agent drain|resume|revoke NAME` and `adv get agents` are the operator's side, over the
 * controller's API with its API token.
 */
import type { Command } from 'commander';
import { hostname, homedir } from 'node:os';
import { join } from 'node:path';
import { readFile } from 'node:fs/promises';
import { AdvError, ErrorCode, age } from '../../controller/index.js';
import { Agent, AgentFatal } from '../../runtime/agent/agent.js';
import { detectCapabilities } from '../../runtime/agent/capabilities.js';
import {
  AGENT_LIMITS,
  AGENTS_ADMIN_API,
  LABEL_KEY,
  LABEL_VALUE,
  type AgentCapabilities,
  type AgentPolicy,
  type AgentSummary,
} from '../../runtime/agent/protocol.js';
import { callController, controllerTarget, type TargetOpts } from '../controller-api.js';
import { renderTable } from '../format.js';
import { makeLogger } from '../logger.js';
import { printable, type Io } from '../output.js';

interface AgentOpts {
  controller?: string;
  enrollTokenFile?: string;
  name?: string;
  stateDir?: string;
  pool: string[];
  label: string[];
  acceptRun: string[];
  denyRun: string[];
  acceptLabel: string[];
  denyLabel: string[];
  slots: string;
  wait: string;
  logLevel: string;
}

const collect = (v: string, prev: string[]) => [...prev, v];

/** `k=v` pairs → a map; a malformed one (or too many) is a usage error naming the flag. */
function pairs(list: string[], flag: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const item of list) {
    const at = item.indexOf('=');
    const [k, v] = [item.slice(0, at), item.slice(at + 1)];
    if (at < 0 || !LABEL_KEY.test(k) || !LABEL_VALUE.test(v))
      throw new AdvError(ErrorCode.UsageError, `${flag} "${printable(item)}" is not key=value`, {
        hint: `write ${flag} team=vision (letters, digits, . _ - /; a value of at most 63)`,
      });
    out[k] = v;
  }
  if (Object.keys(out).length > AGENT_LIMITS.labels)
    throw new AdvError(ErrorCode.UsageError, `at most ${AGENT_LIMITS.labels} ${flag} are accepted`);
  return out;
}

/** Run-name globs as the controller accepts them (it refuses a claim with more or longer ones). */
function globs(list: string[], flag: string): string[] {
  const long = list.find((g) => g.length > AGENT_LIMITS.globLength);
  if (list.length > AGENT_LIMITS.globs || long !== undefined)
    throw new AdvError(
      ErrorCode.UsageError,
      long !== undefined
        ? `${flag} "${printable(long.slice(0, 40))}…" is longer than ${AGENT_LIMITS.globLength} characters`
        : `at most ${AGENT_LIMITS.globs} ${flag} are accepted`,
      { hint: 'run names are at most 63 characters; one glob with * covers many' },
    );
  return list;
}

/** This host's name as an agent name: a DNS label. */
function defaultName(): string {
  return (
    hostname()
      .toLowerCase()
      .split('.')[0]!
      .replace(/[^a-z0-9-]/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, 63) || 'agent'
  );
}

async function enrollToken(io: Io, file: string | undefined): Promise<string | undefined> {
  if (file) {
    const t = await readFile(file, 'utf8').catch((e: NodeJS.ErrnoException) => {
      throw new AdvError(
        ErrorCode.UsageError,
        `--enroll-token-file ${file}: ${e.code === 'ENOENT' ? 'no such file' : e.message}`,
        {
          hint: "put the value of the agent Backend's tokenSecret there (chmod 600)",
        },
      );
    });
    return t.trim() || undefined;
  }
  return io.env.ADV_AGENT_ENROLL_TOKEN?.trim() || undefined;
}

/** A cell from whatever a summary holds: a controller (or an agent's record) may lack a field or send another type. */
const cell = (v: unknown): string =>
  v === undefined || v === null || v === '' ? '-' : Array.isArray(v) ? v.map(cell).join(',') : String(v);

/** One agent's row: each cell built on its own, so one odd record never breaks the operators' view. */
function agentRow(a: AgentSummary, wide: boolean): string[] {
  const c: Partial<Record<keyof AgentCapabilities, unknown>> = a.capabilities ?? {};
  const gpus = Array.isArray(c.gpus) ? (c.gpus as { name?: unknown; vramGiB?: unknown }[]) : [];
  const labels = typeof a.labels === 'object' && a.labels !== null ? Object.entries(a.labels) : [];
  return [
    cell(a.name),
    cell(a.state),
    cell(a.pools),
    cell(c.hostname),
    cell(c.cores),
    c.ramGiB === undefined ? '-' : `${cell(c.ramGiB)} GiB`,
    gpus.length ? `${gpus.length}× ${cell(gpus[0]?.name)} (${cell(gpus[0]?.vramGiB)} GiB)` : 'none',
    cell(c.cuda),
    typeof a.lastSeen === 'string' ? age(a.lastSeen) : 'never',
    cell(a.jobs),
    ...(wide
      ? [cell(c.os), cell(c.python), cell(c.torch), cell(labels.map(([k, v]) => `${k}=${cell(v)}`))]
      : []),
  ];
}

/** The agents as a table (`-o wide`: OS, Python, torch and labels too), JSON or names. */
export function showAgents(io: Io, agents: AgentSummary[], output: string): void {
  if (output === 'json') return void io.stdout.write(JSON.stringify({ agents }, null, 2) + '\n');
  if (output === 'name') return void io.stdout.write(agents.map((a) => `agent/${cell(a.name)}\n`).join(''));
  const wide = output === 'wide';
  const headers = ['NAME', 'STATE', 'POOLS', 'HOST', 'CPUS', 'MEMORY', 'GPUS', 'CUDA', 'LAST SEEN', 'JOBS'];
  io.stdout.write(
    renderTable(
      wide ? [...headers, 'OS', 'PYTHON', 'TORCH', 'LABELS'] : headers,
      agents.map((a) => agentRow(a ?? {}, wide).map(printable)),
    ),
  );
}

/** `adv get agents [NAME]`: the enrolled agents as the running controller sees them. */
export async function getAgents(
  io: Io,
  name: string | undefined,
  opts: TargetOpts & { output: string },
): Promise<void> {
  const t = await controllerTarget(io, opts);
  let { agents } = await callController<{ agents: AgentSummary[] }>(t, 'GET', AGENTS_ADMIN_API);
  if (name) {
    agents = agents.filter((a) => a.name === name);
    if (!agents.length)
      throw new AdvError(ErrorCode.NotFound, `no agent named "${printable(name)}" is enrolled`, {
        hint: 'adv get agents lists them',
      });
  }
  if (!agents.length && opts.output !== 'json') return void io.stderr.write('No agents enrolled.\n');
  showAgents(io, agents, opts.output);
}

/** The command line of `adv agent`, checked before anything is detected or logged. */
function agentSettings(
  io: Io,
  opts: AgentOpts,
): { controller: string; name: string; slots: number; wait: number; policy: AgentPolicy } {
  const controller = opts.controller ?? io.env.ADV_CONTROLLER_URL;
  if (!controller || !/^https?:\/\/[^\s/]+/.test(controller))
    throw new AdvError(
      ErrorCode.UsageError,
      controller ? `--controller ${printable(controller)} is not an http(s) URL` : 'no controller URL',
      {
        hint: 'pass --controller http://HOST:PORT (the controller’s --http address) or set ADV_CONTROLLER_URL',
      },
    );
  const slots = Number(opts.slots);
  const wait = Number(opts.wait);
  if (!Number.isInteger(slots) || slots < 1 || !Number.isFinite(wait) || wait < 0 || wait > 50)
    throw new AdvError(ErrorCode.UsageError, '--slots takes a whole number ≥ 1 and --wait 0–50 seconds');
  const name = opts.name ?? defaultName();
  if (!/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(name))
    throw new AdvError(ErrorCode.UsageError, `--name "${printable(name)}" is not a DNS label`, {
      hint: 'use lowercase letters, digits and -, at most 63',
    });
  const policy: AgentPolicy = {
    ...(opts.acceptRun.length ? { runs: globs(opts.acceptRun, '--accept-run') } : {}),
    ...(opts.denyRun.length ? { denyRuns: globs(opts.denyRun, '--deny-run') } : {}),
    ...(opts.acceptLabel.length ? { labels: pairs(opts.acceptLabel, '--accept-label') } : {}),
    ...(opts.denyLabel.length ? { denyLabels: pairs(opts.denyLabel, '--deny-label') } : {}),
  };
  return { controller, name, slots, wait, policy };
}

/** `adv agent`: enrolls, then claims and runs attempts until SIGTERM or SIGINT. */
async function runAgent(io: Io, opts: AgentOpts): Promise<void> {
  const { controller, name, slots, wait, policy } = agentSettings(io, opts);
  const labels = pairs(opts.label, '--label'); // refused before anything is detected or logged
  const logger = makeLogger(io, opts.logLevel);
  const token = await enrollToken(io, opts.enrollTokenFile);
  const capabilities = await detectCapabilities(io.env);
  logger.info({ agent: name, capabilities }, 'capabilities detected');
  const a = new Agent({
    controller,
    name,
    stateDir: opts.stateDir ?? join(io.env.HOME ?? homedir(), '.adventuretime', 'agent'),
    ...(token ? { enrollToken: token } : {}),
    labels,
    ...(opts.pool.length ? { pools: opts.pool } : {}),
    policy,
    slots,
    waitSec: wait,
    capabilities,
    logger,
    env: io.env,
  });
  const stop = () => a.stop();
  process.once('SIGTERM', stop).once('SIGINT', stop);
  try {
    await a.run();
  } catch (e) {
    if (e instanceof AgentFatal)
      throw new AdvError(e.refused ? ErrorCode.Refused : ErrorCode.UsageError, e.message);
    throw e;
  } finally {
    process.off('SIGTERM', stop).off('SIGINT', stop);
  }
}

export function registerAgent(program: Command, io: Io): void {
  const agent = program
    .command('agent')
    .description('Run this host as a pull agent: claim attempts from a controller that cannot reach it')
    .option('--controller <url>', 'the controller’s URL (default: $ADV_CONTROLLER_URL)')
    .option(
      '--enroll-token-file <file>',
      'the enrollment token, needed once (default: $ADV_AGENT_ENROLL_TOKEN)',
    )
    .option('--name <name>', 'this agent’s name (default: the host name)')
    .option('--state-dir <dir>', 'its token and job dirs (default: ~/.adventuretime/agent)')
    .option('--pool <pool>', 'only these pools (repeat); default: every pool the token opens', collect, [])
    .option(
      '--label <key=value>',
      'a label of this host, for Backends’ selectors (repeat; fixed at enrollment)',
      collect,
      [],
    )
    .option('--accept-run <glob>', 'only runs whose name matches (repeat; * wildcard)', collect, [])
    .option('--deny-run <glob>', 'never runs whose name matches (repeat)', collect, [])
    .option('--accept-label <key=value>', 'only runs with this label (repeat)', collect, [])
    .option('--deny-label <key=value>', 'never runs with this label (repeat)', collect, [])
    .option('--slots <n>', 'attempts run at once', '1')
    .option('--wait <seconds>', 'long-poll length', '30')
    .option('--log-level <level>', 'trace, debug, info, warn, error', 'info')
    .addHelpText(
      'after',
      `
Examples:
  adv agent --controller https://adv.lab.example --enroll-token-file ~/.adv-enroll --label room=b12
  adv agent drain desk-3       # no new work; what it runs finishes
  adv agent revoke desk-3      # its token stops working at once
  adv get agents`,
    )
    .action((opts: AgentOpts) => runAgent(io, opts));
  registerAgentVerbs(agent, io);
}

/** `adv agent drain|resume|revoke NAME`: asks the controller to change one agent. */
function registerAgentVerbs(agent: Command, io: Io): void {
  for (const [verb, what] of [
    ['drain', 'stop giving an agent new work (what it runs finishes)'],
    ['resume', 'give a drained agent work again'],
    ['revoke', 'invalidate an agent’s token now (its claims end; the attempts resume elsewhere)'],
  ] as const)
    agent
      .command(verb)
      .description(what)
      .argument('<name>', 'the agent')
      .option(
        '--controller <url>',
        'the controller’s URL (default: $ADV_CONTROLLER_URL, else the data dir’s)',
      )
      .option('--data-dir <dir>', 'the controller’s data dir, to find it and its API token')
      .option('--repo <url|path>', 'specs repo (to find the default data dir)')
      .action(async (name: string, opts: TargetOpts) => {
        // `--controller` after the verb is parsed as the parent's option (commander): take it from there.
        const controller = opts.controller ?? (agent.opts() as AgentOpts).controller;
        const t = await controllerTarget(io, { ...opts, ...(controller ? { controller } : {}) });
        const a = await callController<AgentSummary>(
          t,
          'POST',
          `${AGENTS_ADMIN_API}/${encodeURIComponent(name)}/${verb}`,
        );
        io.stdout.write(
          `agent/${a.name}: ${a.state}${a.jobs.length ? ` (running ${a.jobs.join(', ')})` : ''}\n`,
        );
      });
}
