/**
 * Reaching a running controller's API from the CLI: its URL from `--controller URL`, else
 * `$ADV_CONTROLLER_URL`, else `<data dir>/controller.json` (written at start, with the pid that
 * says whether it still runs); the API token from `$ADV_API_TOKEN`, else `<data dir>/api-token`.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { API_TOKEN_ENV, API_TOKEN_FILE, AdvError, ErrorCode } from '../controller/index.js';
import type { Io } from './output.js';
import { defaultDataDir, resolveRepo } from './repo.js';

export interface ControllerTarget {
  url: string;
  token?: string;
  /** Where the token would be read from, for a 401's hint. */
  tokenFile: string;
}

export interface TargetOpts {
  controller?: string;
  dataDir?: string;
  repo?: string;
}

/** The data dir's running controller, or undefined when none runs there. */
export async function runningController(dataDir: string): Promise<string | undefined> {
  const info = await readFile(join(dataDir, 'controller.json'), 'utf8')
    .then((t) => JSON.parse(t) as { url?: string | null; pid?: number })
    .catch(() => undefined);
  if (!info?.pid || !info.url) return undefined;
  try {
    process.kill(info.pid, 0);
    return info.url;
  } catch {
    return undefined;
  }
}

/** The API token for a controller whose data dir is `dataDir`. */
export async function apiToken(io: Io, dataDir: string | undefined): Promise<string | undefined> {
  const fromEnv = io.env[API_TOKEN_ENV]?.trim();
  if (fromEnv || !dataDir) return fromEnv || undefined;
  return readFile(join(dataDir, API_TOKEN_FILE), 'utf8').then(
    (t) => t.trim() || undefined,
    () => undefined,
  );
}

/** Where the API token comes from, for a 401. */
export function tokenHint(tokenFile: string): string {
  return (
    `set ${API_TOKEN_ENV} to the controller's API token: the one it was started with ` +
    `(--api-token-file, or its ${API_TOKEN_ENV}); with neither it writes one to ${tokenFile} at ` +
    'start, which the CLI reads when run as the same user (pass --data-dir if it is elsewhere)'
  );
}

/** The controller to talk to; throws a usage error that says how to name one. */
export async function controllerTarget(io: Io, opts: TargetOpts): Promise<ControllerTarget> {
  const explicit = opts.controller ?? io.env.ADV_CONTROLLER_URL;
  let dataDir = opts.dataDir;
  if (!dataDir && !explicit)
    dataDir = await defaultDataDir(await resolveRepo(opts.repo, io.cwd), io.env).catch(() => undefined);
  const url = explicit ?? (dataDir ? await runningController(dataDir) : undefined);
  if (!url)
    throw new AdvError(ErrorCode.UsageError, 'no running controller found', {
      hint: 'pass --controller URL (or set ADV_CONTROLLER_URL), or --data-dir of a controller started with --http',
    });
  const token = await apiToken(io, dataDir);
  return {
    url: url.replace(/\/+$/, ''),
    ...(token ? { token } : {}),
    tokenFile: join(dataDir ?? '<data dir>', API_TOKEN_FILE),
  };
}

/** Calls the API with the token; the JSON answer, or an AdvError that says what to fix. */
export async function callController<T>(
  t: ControllerTarget,
  method: 'GET' | 'POST',
  path: string,
): Promise<T> {
  let res: Response;
  try {
    res = await fetch(t.url + path, {
      method,
      headers: t.token ? { authorization: `Bearer ${t.token}` } : {},
      signal: AbortSignal.timeout(30_000),
    });
  } catch (e) {
    throw new AdvError(
      ErrorCode.BackendError,
      `cannot reach the controller at ${t.url}: ${(e as Error).message}`,
      {
        hint: 'check that it runs with --http and that the address is right',
      },
    );
  }
  const text = await res.text();
  if (!res.ok) {
    let msg = text.trim();
    try {
      msg = (JSON.parse(text) as { error?: string }).error ?? msg;
    } catch {
      // not JSON
    }
    throw new AdvError(ErrorCode.BackendError, `controller answered ${res.status}: ${msg}`, {
      hint:
        res.status === 401
          ? tokenHint(t.tokenFile)
          : res.status === 404
            ? 'adv get agents lists the enrolled agents'
            : 'check the controller log',
    });
  }
  return JSON.parse(text) as T;
}
