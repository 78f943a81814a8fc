/**
 * Where the `adventuretime` Python package lives, and its wheel: built by `build_wheel.py`
 * (standard library only) into `dist/python/adventuretime-<version>-py3-none-any.whl`, with the
 * version of package.json (the package is versioned with the CLI). `npm run build` runs this file;
 * `adv python wheel` builds on demand.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { VERSION } from '../version.js';

const run = promisify(execFile);

/** The repository root: the first dir above this module (source or dist/) that holds the package. */
function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    if (existsSync(join(dir, 'runtime', 'python', 'build_wheel.py'))) return dir;
    dir = dirname(dir);
  }
  throw new Error(
    'runtime/python/build_wheel.py is not beside this adv: the Python package ships with the repository checkout',
  );
}

/** The package's source dir: put it on `PYTHONPATH` to import `adventuretime` without installing. */
export const pythonSourceDir = (): string => join(repoRoot(), 'runtime', 'python', 'src');

/** The dir `pip install` takes (`pip install <this>`). */
export const pythonProjectDir = (): string => join(repoRoot(), 'runtime', 'python');

export const wheelName = (version = VERSION): string => `adventuretime-${version}-py3-none-any.whl`;

/** Where `npm run build` puts the wheel. */
export const defaultWheelDir = (): string => join(repoRoot(), 'dist', 'python');

/**
 * Builds the wheel into `outDir` with `python` (default `$PYTHON` or `python3`); resolves to its
 * path. Throws with the interpreter's own message when it cannot.
 */
export async function buildWheel(
  outDir = defaultWheelDir(),
  python = process.env.PYTHON || 'python3',
): Promise<string> {
  const script = join(pythonProjectDir(), 'build_wheel.py');
  try {
    const { stdout } = await run(python, [script, outDir, '--version', VERSION], { timeout: 60_000 });
    return stdout.trim();
  } catch (e) {
    const err = e as NodeJS.ErrnoException & { stderr?: string };
    if (err.code === 'ENOENT')
      throw new Error(`${python} was not found: the wheel is built with Python 3.9+ (set $PYTHON to one)`);
    throw new Error(`building the wheel failed: ${(err.stderr || err.message).trim()}`);
  }
}

/** The wheel's path in `outDir`, built there first when it is not there yet (or `rebuild`). */
export async function ensureWheel(
  o: { outDir?: string; rebuild?: boolean; python?: string } = {},
): Promise<string> {
  const outDir = o.outDir ?? defaultWheelDir();
  const path = join(outDir, wheelName());
  if (!o.rebuild && existsSync(path)) return path;
  return buildWheel(outDir, o.python);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  // `npm run build`: a machine without Python still builds the rest; `adv python wheel` can build it later.
  try {
    console.log(`built ${await buildWheel()}`);
  } catch (e) {
    console.warn(`dist/python not built: ${(e as Error).message}`);
  }
}
