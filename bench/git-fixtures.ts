/** Builds large git fixtures fast with `git fast-import` (everything lands in one pack). */
import { spawn } from 'node:child_process';

export interface FastCommit {
  branch: string;
  message: string;
  files: Record<string, string>;
  /** Parent: continue the branch (default) or start it fresh. */
  time?: number;
}

function data(s: string): string {
  return `data ${Buffer.byteLength(s)}\n${s}\n`;
}

/** Streams commits into the repo at `gitdir`; each continues its branch. */
export async function fastImport(gitdir: string, commits: Iterable<FastCommit>): Promise<void> {
  const child = spawn('git', ['fast-import', '--quiet', '--force'], {
    env: { ...process.env, GIT_DIR: gitdir },
    stdio: ['pipe', 'ignore', 'pipe'],
  });
  let err = '';
  child.stderr.on('data', (b: Buffer) => (err += b.toString()));
  const done = new Promise<void>((res, rej) =>
    child.on('close', (code) => (code === 0 ? res() : rej(new Error(`fast-import failed: ${err}`)))),
  );
  const seen = new Set<string>();
  let t = 1_700_000_000;
  for (const c of commits) {
    let chunk = `commit refs/heads/${c.branch}\ncommitter Bench <bench@example.com> ${c.time ?? t++} +0000\n${data(c.message)}`;
    if (!seen.has(c.branch)) seen.add(c.branch);
    for (const [path, content] of Object.entries(c.files))
      chunk += `M 100644 inline ${path}\n${data(content)}`;
    if (!child.stdin.write(chunk + '\n')) await new Promise((r) => child.stdin.once('drain', r));
  }
  child.stdin.end();
  await done;
}

/** A status history of `n` commits on `branch`, each rewriting one of 100 status files. */
export function* statusHistory(n: number, branch = 'adventuretime/status'): Generator<FastCommit> {
  for (let i = 0; i < n; i++) {
    const name = `hist-${i % 100}`;
    yield {
      branch,
      message: `run/${name}: Succeeded (attempt ${1 + Math.floor(i / 100)} on local, exit 0)`,
      files: {
        [`runs/${name}.yaml`]: `apiVersion: adventuretime.dev/v1alpha1\nkind: RunStatus\nmetadata: {name: ${name}}\nstatus: {phase: Succeeded, conditions: [], attempts: []}\n# ${i}\n`,
      },
    };
  }
}
