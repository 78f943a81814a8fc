/**
 * uv projects, synced by `adv exec` as the last step of the setup session (`setup.ts`): a work dir
 * with `pyproject.toml` and `uv.lock` gets an environment per host per lock, in
 * `$ADV_CACHE_DIR/uv/envs/<key>`, synced once (`uv sync --frozen`) and activated for the workload,
 * so `python` and `entry:` resolve to it. The project itself is not installed there (its code
 * changes every attempt, its lock does not): PYTHONPATH gains the work dir and its `src/`.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { accessSync, constants, existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import { CACHE_VAR, type SetupStep, type UvSettings } from './setup.js';
import { shellQuote } from './shell.js';

/** The uv installed on a host that has none, unless the Backend pins another (`uv.version`). */
export const UV_VERSION = '0.13.9';

/** Written into an environment once its sync has finished: the next attempt on the host skips it. */
export const SYNCED_MARKER = '.adv-synced';

/** The host's cache root: `$ADV_CACHE_DIR`, else `$XDG_CACHE_HOME/adventuretime`, else `~/.cache/adventuretime`. */
export function cacheRoot(env: NodeJS.ProcessEnv): string {
  if (env[CACHE_VAR]) return env[CACHE_VAR];
  return join(env.XDG_CACHE_HOME || join(env.HOME || homedir(), '.cache'), 'adventuretime');
}

/** Whether `cwd` is a uv project adv exec syncs: a lock beside a pyproject, unless switched off. */
export function isUvProject(cwd: string, settings: UvSettings): boolean {
  return (
    settings.project !== 'off' && existsSync(join(cwd, 'pyproject.toml')) && existsSync(join(cwd, 'uv.lock'))
  );
}

/** The first executable `name` on `path`. */
export function findOnPath(name: string, path: string | undefined): string | undefined {
  for (const dir of (path ?? '').split(delimiter)) {
    if (!dir) continue;
    const p = join(dir, name);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** `uv --version` of the binary at `bin` ("0.13.9"), or undefined when it does not answer. */
function versionOf(bin: string): string | undefined {
  const r = spawnSync(bin, ['--version'], { encoding: 'utf8', timeout: 30_000 });
  return /^uv (\S+)/.exec(r.stdout ?? '')?.[1];
}

/** Which uv runs the sync, and whether it must be installed first. */
export interface UvBinary {
  path: string;
  version: string;
  /** Not on the host: installed into `path`'s dir first. */
  install: boolean;
}

/** The uv on the job's PATH, else the one adv exec installed (or will install) in the cache. */
export function locateUv(env: NodeJS.ProcessEnv, settings: UvSettings, cache: string): UvBinary {
  const onPath = findOnPath('uv', env.PATH);
  const version = onPath && versionOf(onPath);
  if (onPath && version) return { path: onPath, version, install: false };
  const pinned = settings.version ?? UV_VERSION;
  const path = join(cache, 'uv', 'bin', pinned, 'uv');
  return { path, version: pinned, install: !existsSync(path) };
}

/**
 * The environment's key: the lock's bytes, the Python asked for, the groups, the uv version and
 * the platform. Same key on a host = same environment, synced once.
 */
export function envKey(lock: Buffer, settings: UvSettings, uvVersion: string): string {
  const material = JSON.stringify({
    lock: createHash('sha256').update(lock).digest('hex'),
    python: settings.python ?? '',
    groups: [...(settings.groups ?? [])].sort(),
    uv: uvVersion,
    platform: `${process.platform}-${process.arch}`,
  });
  return createHash('sha256').update(material).digest('hex').slice(0, 32);
}

/** The session's uv step for the project in `cwd`: install uv if missing, sync once, activate. */
export function uvStep(cwd: string, settings: UvSettings, env: NodeJS.ProcessEnv): SetupStep {
  const cache = cacheRoot(env);
  const uv = locateUv(env, settings, cache);
  const key = envKey(readFileSync(join(cwd, 'uv.lock')), settings, uv.version);
  const envDir = join(cache, 'uv', 'envs', key);
  const args = [
    'sync',
    '--frozen',
    '--no-install-project',
    ...(settings.groups ?? []).flatMap((g) => ['--group', g]),
    ...(settings.python ? ['--python', settings.python] : []),
  ];
  const q = shellQuote;
  const env_ = q(envDir);
  const marker = q(join(envDir, SYNCED_MARKER));
  const cached = q(`adv exec: uv environment ${key} cached`);
  const pythonPath = [cwd, ...(existsSync(join(cwd, 'src')) ? [join(cwd, 'src')] : [])].join(':');
  const script = [
    `__adv_uv=${q(uv.path)}`,
    ...(uv.install ? installUv(uv) : []),
    `cd -- ${q(cwd)}`,
    `if [ -e ${marker} ] && [ -x ${q(join(envDir, 'bin', 'python'))} ]; then printf '%s\\n' ${cached} >&2`,
    'else',
    `  mkdir -p ${q(join(cache, 'uv', 'envs'))}`,
    // One sync per key on a host at a time; flock's lock goes with the process that held it.
    `  if command -v flock >/dev/null 2>&1; then exec 9>${q(`${envDir}.lock`)}; flock 9; fi`,
    `  if [ -e ${marker} ]; then printf '%s\\n' ${cached} >&2`,
    '  else',
    `    printf '%s\\n' ${q(`adv exec: uv sync into ${envDir}`)} >&2`,
    // uv downloads a Python only when the spec names one; otherwise it uses the host's.
    `    __adv_cache=${q(join(cache, 'uv', 'cache'))}`,
    `    UV_CACHE_DIR="\${UV_CACHE_DIR:-$__adv_cache}" UV_PROJECT_ENVIRONMENT=${env_}${settings.python ? '' : ' UV_PYTHON_DOWNLOADS="${UV_PYTHON_DOWNLOADS:-never}"'} "$__adv_uv" ${args.map(q).join(' ')}`,
    `    : >${marker}`,
    '  fi',
    '  exec 9>&-',
    'fi',
    `VIRTUAL_ENV=${env_}; UV_PROJECT_ENVIRONMENT=${env_}; PATH=${q(join(envDir, 'bin'))}:$PATH`,
    `PYTHONPATH=${q(pythonPath)}\${PYTHONPATH:+:$PYTHONPATH}`,
    'export VIRTUAL_ENV UV_PROJECT_ENVIRONMENT PATH PYTHONPATH',
    'unset PYTHONHOME',
  ].join('\n');
  return { from: 'uv', command: `uv ${args.join(' ')} (environment ${key})`, script };
}

/**
 * Installs uv at `uv.version` into its dir in the cache: with pip when the host has it (which
 * honours PIP_INDEX_URL, PIP_FIND_LINKS, PIP_NO_INDEX: installable offline from a wheel dir),
 * else with astral's installer. Into a temporary dir first, then renamed: two attempts installing
 * at once each leave a whole binary.
 */
function installUv(uv: UvBinary): string[] {
  const q = shellQuote;
  const dir = join(uv.path, '..');
  const url = `https://astral.sh/uv/${uv.version}/install.sh`;
  return [
    'if [ ! -x "$__adv_uv" ]; then',
    `  printf '%s\\n' ${q(`adv exec: no uv on PATH; installing uv ${uv.version} into ${dir}`)} >&2`,
    `  mkdir -p ${q(dir)}`,
    `  __adv_tmp=$(mktemp -d ${q(join(dir, '.install-XXXXXX'))})`,
    '  if python3 -m pip --version >/dev/null 2>&1; then',
    `    python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$__adv_tmp" ${q(`uv==${uv.version}`)}`,
    '    mv -f "$__adv_tmp/bin/uv" "$__adv_uv"',
    '  elif command -v curl >/dev/null 2>&1; then',
    `    curl -LsSf ${q(url)} | env UV_UNMANAGED_INSTALL="$__adv_tmp" sh`,
    '    mv -f "$__adv_tmp/uv" "$__adv_uv"',
    '  else',
    `    printf '%s\\n' ${q(`adv exec: cannot install uv ${uv.version}: the host has neither pip (python3 -m pip) nor curl; install uv there, or put it on PATH in a setup step`)} >&2`,
    '    exit 127',
    '  fi',
    '  rm -rf "$__adv_tmp"',
    'fi',
  ];
}
