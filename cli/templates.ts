/**
 * The specs `adv init` writes: a file store, the local backend, a hello-world run, and the example
 * DAG (tokenize → train → rollouts) with its Python, taken from the example specs repo (`specs/`)
 * so the two never drift.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** `specs/` of this checkout or package (from `cli/` in source, `dist/cli/` when built). */
function exampleSpecsDir(): string {
  for (const up of ['..', '../..']) {
    const dir = join(import.meta.dirname, up, 'specs');
    if (existsSync(join(dir, 'dags', 'pipeline.yaml'))) return dir;
  }
  throw new Error(`the example specs (specs/dags/pipeline.yaml) are missing next to ${import.meta.dirname}`);
}

const PIPELINE = ['dags/pipeline.yaml', 'pipeline/tokenize.py', 'pipeline/train.py', 'pipeline/rollouts.py'];

export function initFiles(): Record<string, string> {
  const dir = exampleSpecsDir();
  const copied = Object.fromEntries(
    PIPELINE.map((rel) => [
      rel,
      readFileSync(join(dir, rel), 'utf8').replace('$schema=../../crds/', '$schema=../schemas/'),
    ]),
  );
  return { ...INIT_FILES, ...copied };
}

const INIT_FILES: Record<string, string> = {
  'storage.yaml': `# yaml-language-server: $schema=schemas/storage.schema.json
# Checkpoints, logs and heartbeats go here. A directory is the embedded default; see
# "adv schema Storage" for S3-compatible stores.
apiVersion: adventuretime.dev/v1alpha1
kind: Storage
metadata:
  name: default
spec:
  type: file
  file:
    path: store # relative to the controller's data dir
`,
  'backends/local.yaml': `# yaml-language-server: $schema=../schemas/backend.schema.json
# This machine: every run starts as a detached process under "adv exec".
apiVersion: adventuretime.dev/v1alpha1
kind: Backend
metadata:
  name: local
spec:
  type: local
  maxConcurrent: 4
`,
  'runs/hello.yaml': `# yaml-language-server: $schema=../schemas/run.schema.json
# The smallest run. Commit a change, and the controller acts on it; status lands on the
# adventuretime/status branch:  git log --stat adventuretime/status
apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata:
  name: hello
spec:
  command: ['sh', '-c', 'echo "hello from $ADV_RUN, attempt $ADV_ATTEMPT"; ls "$ADV_CKPT_DIR" >/dev/null']
  backendSelector:
    order: [local]
`,
  '.gitignore': `# Nothing here needs ignoring yet; the controller keeps its data inside .git/adventuretime.\n`,
};
