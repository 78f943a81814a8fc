/** Builds the `adv` command tree. Each command lives in `commands/` and only composes the barrel. */
import { Command, CommanderError } from 'commander';
import { VERSION } from '../controller/index.js';
import { registerAgent } from './commands/agent.js';
import { registerApply } from './commands/apply.js';
import { registerArtifacts } from './commands/artifacts.js';
import { registerCancel } from './commands/cancel.js';
import { registerCkpt } from './commands/ckpt.js';
import { registerCompletion } from './commands/completion.js';
import { registerCost } from './commands/cost.js';
import { registerController } from './commands/controller.js';
import { registerDag } from './commands/dag.js';
import { registerDataset } from './commands/dataset.js';
import { registerDescribe } from './commands/describe.js';
import { registerExec } from './commands/exec.js';
import { registerFork } from './commands/fork.js';
import { registerGet } from './commands/get.js';
import { registerInit } from './commands/init.js';
import { registerLogs } from './commands/logs.js';
import { registerMetrics } from './commands/metrics.js';
import { registerNotebook } from './commands/notebook.js';
import { registerPlan } from './commands/plan.js';
import { registerPython } from './commands/python.js';
import { registerReconcile } from './commands/reconcile.js';
import { registerRetry } from './commands/retry.js';
import { registerRun } from './commands/run.js';
import { registerSchema } from './commands/schema.js';
import { registerSubmit } from './commands/submit.js';
import { registerShell } from './commands/shell.js';
import { registerSsh } from './commands/ssh.js';
import { registerValidate } from './commands/validate.js';
import { ExitCode, reportError } from './exit.js';
import { defaultIo, printableLines, type Io } from './output.js';

export function buildProgram(io: Io): Command {
  const program = new Command('adv')
    .description('AdventureTime: GitOps for ML training runs on SLURM, SSH hosts, TPUs and more')
    .version(VERSION, '-V, --version', 'print the version')
    .showSuggestionAfterError(true)
    .configureOutput({
      writeOut: (s) => io.stdout.write(s),
      // Commander quotes what was typed (an unknown command, a bad option value).
      writeErr: (s) => io.stderr.write(printableLines(s)),
    })
    .exitOverride()
    .addHelpText(
      'after',
      `
Examples:
  adv submit --on ssh-local -- python3 train.py   # this work tree, uncommitted changes too, as a run
  adv init my-specs && cd my-specs    # a local specs repo with a hello run
  adv controller --once               # reconcile until every run has finished
  adv get runs                        # status, read from the adventuretime/status branch
  adv describe run hello              # attempts, conditions and history (git log)
  adv get dags                        # DAGs with their nodes' progress
  adv dag graph pipeline              # a DAG as Mermaid (or -o dot)
  adv validate specs/                 # check a specs repo before you push
  adv plan -o markdown                # what merging this branch would do, for a PR comment
  adv apply -f runs/train.yaml        # validate, commit (and push) one spec
  adv cancel train                    # commit spec.suspend: true

Docs: README.md and docs/reference/specs.md`,
    );
  program
    .command('version')
    .description('Print the version')
    .action(() => {
      io.stdout.write(`adv ${VERSION} (node ${process.version})\n`);
    });
  registerInit(program, io);
  registerValidate(program, io);
  registerPlan(program, io);
  registerCost(program, io);
  registerController(program, io);
  registerGet(program, io);
  registerDescribe(program, io);
  registerDag(program, io);
  registerApply(program, io);
  registerSubmit(program, io, runCli);
  registerCancel(program, io);
  registerRetry(program, io);
  registerFork(program, io);
  registerReconcile(program, io);
  registerLogs(program, io);
  registerMetrics(program, io);
  registerCkpt(program, io);
  registerArtifacts(program, io);
  registerExec(program);
  registerRun(program, io);
  registerAgent(program, io);
  registerSchema(program, io);
  registerCompletion(program, io);
  registerNotebook(program, io);
  registerShell(program, io);
  registerSsh(program, io);
  registerPython(program, io);
  registerDataset(program, io);
  return program;
}

/** Runs the CLI and resolves to the exit code; never calls process.exit itself. */
export async function runCli(argv: readonly string[], io: Io = defaultIo()): Promise<number> {
  const program = buildProgram(io);
  try {
    await program.parseAsync(argv as string[], { from: 'user' });
    return ExitCode.Ok;
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.exitCode === 0)
        return ExitCode.Ok;
      return ExitCode.Usage;
    }
    const data = (err as { data?: { quiet?: boolean; exitCode?: number } }).data;
    if (typeof data?.exitCode === 'number') return data.exitCode;
    if (data?.quiet) return reportErrorQuietly(err);
    return reportError(err, io.stderr);
  }
}

/** Errors whose details the command already printed (validation output) only set the exit code. */
function reportErrorQuietly(err: unknown): number {
  return reportError(err, { write: () => true } as unknown as NodeJS.WritableStream);
}
