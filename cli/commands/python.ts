import type { Command } from 'commander';
import { resolve } from 'node:path';
import { AdvError, ErrorCode } from '../../controller/index.js';
import { ensureWheel, pythonProjectDir, pythonSourceDir } from '../../runtime/python/wheel.js';
import type { Io } from '../output.js';

/** `adv python wheel|path`: the `adventuretime` Python package that ships with this adv. */
export function registerPython(program: Command, io: Io): void {
  const py = program
    .command('python')
    .description('The adventuretime Python package (RunEnv, CheckpointManager, log) of this version of adv');
  py.command('wheel')
    .description("Print the path of the package's wheel, building it first when it is not there")
    .option('--out <dir>', 'build into DIR (default: dist/python of this checkout)')
    .option('--rebuild', 'build it again even if it is there')
    .option('--python <exe>', 'the interpreter that builds it (default: $PYTHON, else python3)')
    .addHelpText(
      'after',
      `
Examples:
  pip install "$(adv python wheel)"             # into the active environment
  uv pip install "$(adv python wheel)"`,
    )
    .action(async (o: { out?: string; rebuild?: boolean; python?: string }) => {
      try {
        const path = await ensureWheel({
          ...(o.out ? { outDir: resolve(io.cwd, o.out) } : {}),
          ...(o.rebuild ? { rebuild: true } : {}),
          ...(o.python ? { python: o.python } : {}),
        });
        io.stdout.write(`${path}\n`);
      } catch (e) {
        throw new AdvError(ErrorCode.IoError, (e as Error).message, {
          hint: `or install from the source: pip install ${pythonProjectDir()}`,
        });
      }
    });
  py.command('path')
    .description('Print the source dir to put on PYTHONPATH (no install needed)')
    .option('--project', 'print the project dir instead (what pip install takes)')
    .addHelpText(
      'after',
      `
Examples:
  PYTHONPATH="$(adv python path)" python3 train.py
  pip install "$(adv python path --project)"`,
    )
    .action((o: { project?: boolean }) => {
      io.stdout.write(`${o.project ? pythonProjectDir() : pythonSourceDir()}\n`);
    });
}
