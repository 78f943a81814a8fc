#!/usr/bin/env node
/** Entry point of the `adv` command: composes, nothing else. */

// `adv exec` is what every job starts with: load only the worker side for it.
if (process.argv[2] === 'exec') {
  const { execMain } = await import('../runtime/exec-cli.js');
  process.exitCode = await execMain(process.argv.slice(3));
} else {
  // `adv get runs | head`: a reader that goes away is the end of the output, not an error.
  process.stdout.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw e;
  });
  const { runCli } = await import('./program.js');
  process.exitCode = await runCli(process.argv.slice(2));
}
