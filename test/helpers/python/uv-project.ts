/**
 * A small uv project that needs no network: its one dependency is a LOCAL wheel (built here with
 * Python's zipfile, byte-identical every time) named in `[tool.uv.sources]`, locked with
 * `uv lock --offline`. Its `fingerprint.py` prints one line that says which interpreter runs it
 * (inside the synced environment or not), the dependency's value and the variables a test names:
 * the same line on every backend when the environment is the same.
 *
 * The project also carries an Lmod-like module system (`lmod/init.sh` defines a `module` shell
 * function; `module load fp` exports MODULE_VAR), so a setup step can source it from the work dir
 * on any host, or, with MODULEPATH set to its `lmod/modulefiles`, from wherever a host keeps it.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO } from '../paths.js';

/** The uv version `requirements/ci.txt` pins (adv exec installs the same when a host has none). */
export const UV_PIN =
  /^uv==(\S+)$/m.exec(readFileSync(join(REPO, 'requirements', 'ci.txt'), 'utf8'))?.[1] ?? 'unpinned';
/** What the local wheel's module says (`advfp_dep.VALUE`). */
export const DEP_VALUE = 'advfp-dep 1.0.0 from a local wheel';
/** What `module load fp` exports as MODULE_VAR. */
export const MODULE_VAR_VALUE = 'fp-module-1';
/** The Run's `entry:` that prints the fingerprint. */
export const FINGERPRINT_ENTRY = 'fingerprint.py:main';
/** The variables the fingerprint always reports, in this order. */
export const FINGERPRINT_VARS = ['ADV_FP_VAR', 'MODULE_VAR'] as const;
const WHEEL = 'advfp_dep-1.0.0-py3-none-any.whl';

/** The real uv (`requirements/ci.txt` installs it into the project's .venv). */
export function uvBinary(): string {
  const uv = join(REPO, '.venv', 'bin', 'uv');
  if (!existsSync(uv))
    throw new Error(
      `no uv at ${uv}: build the project's .venv (.ci/run does: python3 -m venv .venv && .venv/bin/pip install -r requirements/ci.txt)`,
    );
  return uv;
}

/** What `createUvProject` made. Paths are relative to `dir` unless said otherwise. */
export interface UvProject {
  /** The project's dir (absolute). */
  dir: string;
  /** The local wheel the lock points at. */
  wheel: string;
  /** The file a setup step sources (`. ./lmod/init.sh`) to get a `module` function. */
  moduleInit: string;
}

/**
 * Creates the project in `dir` (made if missing) and locks it offline with the real uv and the
 * host's python3 (no Python is downloaded). Synchronous: a few hundred ms.
 */
export function createUvProject(dir: string): UvProject {
  mkdirSync(join(dir, 'wheels'), { recursive: true });
  buildWheel(join(dir, 'wheels', WHEEL), 'advfp_dep', '1.0.0', {
    'advfp_dep/__init__.py': { text: `VALUE = ${JSON.stringify(DEP_VALUE)}\n` },
  });
  writeFileSync(
    join(dir, 'pyproject.toml'),
    `[project]
name = "adv-fingerprint"
version = "0.1.0"
requires-python = ">=3.8"
dependencies = ["advfp-dep"]

[tool.uv.sources]
advfp-dep = { path = "wheels/${WHEEL}" }
`,
  );
  writeFileSync(join(dir, 'fingerprint.py'), FINGERPRINT_PY);
  mkdirSync(join(dir, 'lmod', 'modulefiles'), { recursive: true });
  writeFileSync(join(dir, 'lmod', 'init.sh'), LMOD_INIT);
  writeFileSync(join(dir, 'lmod', 'modulefiles', 'fp.sh'), `export MODULE_VAR=${MODULE_VAR_VALUE}\n`);
  // A cache of its own, outside the project, so nothing but the project lands in `dir`.
  const cache = mkdtempSync(join(tmpdir(), 'adv-uv-lock-'));
  try {
    execFileSync(uvBinary(), ['lock', '--offline', '--python', 'python3', '--quiet'], {
      cwd: dir,
      env: { ...process.env, UV_PYTHON_DOWNLOADS: 'never', UV_CACHE_DIR: cache },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } finally {
    rmSync(cache, { recursive: true, force: true });
  }
  return { dir, wheel: `wheels/${WHEEL}`, moduleInit: 'lmod/init.sh' };
}

/**
 * The line `fingerprint.py` prints when it runs inside the project's synced environment with the
 * given variables (unset ones print `<unset>`); `extra` names further variables, as the script's
 * arguments do.
 */
export function expectedFingerprint(
  vars: Partial<Record<(typeof FINGERPRINT_VARS)[number] | string, string>>,
  extra: readonly string[] = [],
): string {
  const names = [...FINGERPRINT_VARS, ...extra];
  return `fingerprint python=venv/bin/python dep=${DEP_VALUE} ${names.map((n) => `${n}=${vars[n] ?? '<unset>'}`).join(' ')}`;
}

/**
 * The setup steps (ADV_SETUP items, `from: "Run"`) that export ADV_FP_VAR=`value`, source the
 * project's module system and load its module: what the fingerprint reports as ADV_FP_VAR and
 * MODULE_VAR.
 */
export function fingerprintSetup(value: string): { from: string; run: string }[] {
  return [
    { from: 'Run', run: `export ADV_FP_VAR='${value.replace(/'/g, `'\\''`)}'` },
    { from: 'Run', run: '. ./lmod/init.sh' },
    { from: 'Run', run: 'module load fp' },
  ];
}

/**
 * A wheel dir holding uv `version` built around the real uv binary, so `pip install uv==VERSION`
 * works offline from it (PIP_FIND_LINKS=dir, PIP_NO_INDEX=1): the install-when-missing path.
 */
export function buildUvWheelDir(dir: string, version = UV_PIN): string {
  mkdirSync(dir, { recursive: true });
  buildWheel(join(dir, `uv-${version}-py3-none-any.whl`), 'uv', version, {
    [`uv-${version}.data/scripts/uv`]: { file: uvBinary(), mode: 0o755 },
  });
  return dir;
}

type WheelFile = { text: string; mode?: number } | { file: string; mode?: number };

/** A minimal wheel (METADATA, WHEEL, RECORD), byte-identical for the same input. */
function buildWheel(out: string, dist: string, version: string, files: Record<string, WheelFile>): void {
  const spec = JSON.stringify({ out, dist, name: dist.replace(/_/g, '-'), version, files });
  execFileSync('python3', ['-c', BUILD_WHEEL_PY], { input: spec, stdio: ['pipe', 'pipe', 'pipe'] });
}

const BUILD_WHEEL_PY = `
import base64, hashlib, json, sys, zipfile
s = json.load(sys.stdin)
info = "%s-%s.dist-info" % (s["dist"], s["version"])
entries = []
for path, f in s["files"].items():
    data = f["text"].encode() if "text" in f else open(f["file"], "rb").read()
    entries.append((path, data, f.get("mode", 0o644)))
entries.append((info + "/METADATA", ("Metadata-Version: 2.1\\nName: %s\\nVersion: %s\\n" % (s["name"], s["version"])).encode(), 0o644))
entries.append((info + "/WHEEL", b"Wheel-Version: 1.0\\nGenerator: adventuretime-tests\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n", 0o644))
record = ""
for path, data, _ in entries:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record += "%s,sha256=%s,%d\\n" % (path, digest, len(data))
record += info + "/RECORD,,\\n"
entries.append((info + "/RECORD", record.encode(), 0o644))
with zipfile.ZipFile(s["out"], "w") as z:
    for path, data, mode in entries:
        zi = zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0))
        zi.external_attr = (0o100000 | mode) << 16
        zi.compress_type = zipfile.ZIP_STORED if len(data) > 1 << 20 else zipfile.ZIP_DEFLATED
        z.writestr(zi, data)
`;

const FINGERPRINT_PY = `"""Prints one line that says what environment this runs in (see test/helpers/python/uv-project.ts)."""
import os
import sys

NAMES = ["ADV_FP_VAR", "MODULE_VAR"]


def line(extra=()):
    venv = os.environ.get("VIRTUAL_ENV", "")
    exe = sys.executable
    inside = (
        venv
        and os.path.realpath(sys.prefix) == os.path.realpath(venv)
        and os.path.dirname(exe) == os.path.join(venv, "bin")
        and os.path.basename(exe).startswith("python")
    )
    where = "venv/bin/python" if inside else "outside-venv:" + exe
    import advfp_dep

    names = NAMES + list(extra)
    return " ".join(
        ["fingerprint", "python=" + where, "dep=" + advfp_dep.VALUE]
        + ["%s=%s" % (n, os.environ.get(n, "<unset>")) for n in names]
    )


def main():
    print(line(sys.argv[1:]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
`;

/**
 * `module load NAME` sources `NAME.sh` in MODULEPATH (one dir), else in the sourcing dir's
 * lmod/modulefiles, as Lmod's shell function evaluates a module.
 */
const LMOD_INIT = `# An Lmod-like module system for tests: defines the shell function \`module\`.
__fp_modulepath="\${MODULEPATH:-$(pwd)/lmod/modulefiles}"
module() {
  case "$1" in
    load) shift; for __m in "$@"; do
        if [ ! -r "$__fp_modulepath/$__m.sh" ]; then echo "Lmod has detected the following error: The following module(s) are unknown: \\"$__m\\"" >&2; return 1; fi
        . "$__fp_modulepath/$__m.sh"
      done ;;
    *) echo "module: unsupported subcommand $1" >&2; return 1 ;;
  esac
}
`;
