import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO } from '../paths.js';

/** The project's virtual environment, built by `.ci/run` from `requirements/ci.txt`. */
export const VENV = join(REPO, '.venv');
/** Its interpreter: jax, jaxlib, orbax-checkpoint and torch (CPU) are importable there. */
export const PYTHON = join(VENV, 'bin', 'python');
/** Its bin dir, to put first on a workload's PATH so `python` is this one. */
export const VENV_BIN = join(VENV, 'bin');

/** Whether the venv exists and was built from the requirements file as it is now. */
function venvCurrent(): boolean {
  const stamp = join(VENV, '.requirements.sha256');
  if (!existsSync(PYTHON) || !existsSync(stamp)) return false;
  const want = createHash('sha256')
    .update(readFileSync(join(REPO, 'requirements', 'ci.txt')))
    .digest('hex');
  return readFileSync(stamp, 'utf8').trim() === want;
}

/**
 * Whether tests that run real JAX/Orbax/torch can run here. In CI they must: a missing or stale
 * venv throws (`.ci/run` builds it); elsewhere the test is skipped with a warning that says how to
 * build it.
 */
export function pythonAvailable(what: string): boolean {
  const ok = venvCurrent();
  const fix =
    'build it with: python3 -m venv .venv && .venv/bin/pip install -r requirements/ci.txt && sha256sum requirements/ci.txt | cut -d" " -f1 > .venv/.requirements.sha256';
  if (!ok && process.env.CI)
    throw new Error(`${what} needs the project's .venv (requirements/ci.txt); ${fix}`);
  if (!ok) console.warn(`SKIPPING ${what}: the project's .venv is missing or stale; ${fix}`);
  return ok;
}
