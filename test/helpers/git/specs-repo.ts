/** Helpers to make specs repos in tests: a work tree with commits, pushed where asked. */
import { mkdtemp, mkdir, readdir, readFile, writeFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { git } from '../../../controller/git/native.js';

export const ID = ['-c', 'user.name=Test User', '-c', 'user.email=test@example.com'];

export const runYaml = (name: string, command: string | string[], extra = '') =>
  `apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata:
  name: ${name}
spec:
  command: ${JSON.stringify(command)}
  backendSelector:
    order: [local]
${extra}`;

export const LOCAL_BACKEND = `apiVersion: adventuretime.dev/v1alpha1
kind: Backend
metadata:
  name: local
spec:
  type: local
`;

export interface WorkTree {
  dir: string;
  write(rel: string, content: string | Uint8Array): Promise<void>;
  remove(rel: string): Promise<void>;
  commit(message: string): Promise<string>;
  push(): Promise<void>;
  git(...args: string[]): Promise<string>;
  cleanup(): Promise<void>;
}

/** A fresh work tree on `main`; with `remote`, its origin. */
export async function makeWorkTree(
  files: Record<string, string | Uint8Array>,
  remote?: string,
  token?: string,
): Promise<WorkTree> {
  const dir = await mkdtemp(join(tmpdir(), 'adv-specs-'));
  const run = async (...args: string[]) => (await git([...ID, ...args], { cwd: dir })).toString().trim();
  await run('init', '--quiet', '-b', 'main');
  if (remote) await run('remote', 'add', 'origin', remote);
  if (token) await run('config', 'http.extraHeader', `Authorization: Bearer ${token}`);
  const wt: WorkTree = {
    dir,
    write: async (rel, content) => {
      await mkdir(dirname(join(dir, rel)), { recursive: true });
      await writeFile(join(dir, rel), content);
    },
    remove: async (rel) => {
      await rm(join(dir, rel));
    },
    commit: async (message) => {
      await run('add', '-A');
      await run('commit', '--quiet', '--allow-empty', '-m', message);
      return run('rev-parse', 'HEAD');
    },
    push: async () => {
      await run('push', '--quiet', 'origin', 'main');
    },
    git: run,
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
  for (const [rel, content] of Object.entries(files)) await wt.write(rel, content);
  await wt.commit('initial specs');
  if (remote) await wt.push();
  return wt;
}

/** Every file under `dir` (not `.git`), by its path relative to `dir`: to commit a code tree made elsewhere. */
export async function filesIn(dir: string): Promise<Record<string, Buffer>> {
  const files: Record<string, Buffer> = {};
  for (const e of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!e.isFile()) continue;
    const path = join(e.parentPath, e.name);
    const rel = path.slice(dir.length + 1);
    if (rel.split('/')[0] === '.git') continue;
    files[rel] = await readFile(path);
  }
  return files;
}
