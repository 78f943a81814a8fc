/** Generates a specs repo of N realistic Run specs (plus backends and storage) for benchmarks. */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

export function runYaml(i: number): string {
  return `# yaml-language-server: $schema=../crds/run.schema.json
apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata:
  name: sweep-${i}
  labels:
    project: sweep
    seed: "${i % 97}"
spec:
  command: [python, train.py, --lr, "${(1e-4 * (1 + (i % 13))).toFixed(5)}", --seed, "${i}"]
  code:
    ref: main
  resources:
    gpus: 8
    gpuType: H100|A100|any
    cpus: 32
    memory: 256Gi
  parallelism:
    mesh: {axes: [data, model], shape: [null, 2]}
    dp: {axis: data}
  policy:
    preemptible: true
    checkpointIntervalSec: 120
    maxAttempts: 3
  backendSelector:
    order: [slurm-a, slurm-b]
  env:
    WANDB_PROJECT: sweep
`;
}

const backend = (name: string) => `apiVersion: adventuretime.dev/v1alpha1
kind: Backend
metadata:
  name: ${name}
spec:
  type: slurm
  connection: {host: login-${name}.example.edu}
`;

/** Two SLURM backends the generated runs name (never reached: the runs are suspended). */
export const SLURM_BACKENDS = `apiVersion: adventuretime.dev/v1alpha1
kind: Backend
metadata: {name: slurm-a}
spec: {type: slurm, connection: {host: login-a.example.edu}}
---
apiVersion: adventuretime.dev/v1alpha1
kind: Backend
metadata: {name: slurm-b}
spec: {type: slurm, connection: {host: login-b.example.edu}}
`;

/** Run `i` of the sweep, suspended: the controller plans and writes it, nothing executes. */
export const suspendedRunYaml = (i: number): string =>
  runYaml(i).replace('  env:\n', '  suspend: true\n  env:\n');

export async function generateRepo(dir: string, runs: number): Promise<void> {
  await mkdir(join(dir, 'runs'), { recursive: true });
  await mkdir(join(dir, 'backends'), { recursive: true });
  await writeFile(join(dir, 'backends', 'slurm-a.yaml'), backend('slurm-a'));
  await writeFile(join(dir, 'backends', 'slurm-b.yaml'), backend('slurm-b'));
  await writeFile(
    join(dir, 'storage.yaml'),
    'apiVersion: adventuretime.dev/v1alpha1\nkind: Storage\nmetadata: {name: default}\nspec: {type: file, file: {path: store}}\n',
  );
  const width = 500;
  for (let i = 0; i < runs; i += width) {
    await Promise.all(
      Array.from({ length: Math.min(width, runs - i) }, (_, k) =>
        writeFile(join(dir, 'runs', `sweep-${i + k}.yaml`), runYaml(i + k)),
      ),
    );
  }
}
