/** A real `adv agent` process (the compiled CLI, built by the integration suite's global setup). */
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { REPO } from '../paths.js';

export const ADV = join(REPO, 'dist', 'cli', 'adv.js');

export interface AgentProc {
  name: string;
  proc: ChildProcess;
  /** What it printed so far, stdout and stderr together. */
  out: () => string;
  stateDir: string;
  exited: Promise<number | null>;
  /** SIGKILL, and waits for the exit (its jobs run on: they are their own process groups). */
  stop(): Promise<void>;
}

/**
 * Starts `adv agent --name NAME` against the controller at `controller`, enrolling with `token`
 * (written to `<tokenDir>/enroll-NAME`, as an operator would install it), long polling 5 s. Its
 * environment is only PATH and HOME: what a job on it sees comes from the controller.
 */
export async function startAgentProcess(o: {
  name: string;
  controller: string;
  token: string;
  stateDir: string;
  tokenDir: string;
  path?: string;
  home?: string;
  extra?: string[];
}): Promise<AgentProc> {
  const tokenFile = join(o.tokenDir, `enroll-${o.name}`);
  await writeFile(tokenFile, o.token, { mode: 0o600 });
  let out = '';
  const proc = spawn(
    process.execPath,
    [
      ...[ADV, 'agent', '--controller', o.controller, '--name', o.name],
      ...['--state-dir', o.stateDir, '--enroll-token-file', tokenFile, '--wait', '5'],
      ...(o.extra ?? []),
    ],
    {
      env: { PATH: o.path ?? process.env.PATH, HOME: o.home ?? process.env.HOME ?? o.tokenDir },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  proc.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  proc.stderr!.on('data', (b: Buffer) => (out += b.toString()));
  const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
  return {
    name: o.name,
    proc,
    out: () => out,
    stateDir: o.stateDir,
    exited,
    stop: async () => {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      proc.kill('SIGKILL');
      await exited;
    },
  };
}
