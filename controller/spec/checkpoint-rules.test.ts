import { describe, expect, it } from 'vitest';
import { SpecLoader } from './loader.js';

const enc = (s: string) => new TextEncoder().encode(s);
const HEAD = 'apiVersion: adventuretime.dev/v1alpha1\n';
const volcano = (name: string, extra = '') =>
  `${HEAD}kind: Backend\nmetadata: {name: ${name}}\nspec:\n  type: volcano\n  volcano: {namespace: ml, image: i${extra}}\n`;
const slurm = (name: string) =>
  `${HEAD}kind: Backend\nmetadata: {name: ${name}}\nspec:\n  type: slurm\n  connection: {host: login}\n`;
const run = (selector: string, mode = 'shared') =>
  `${HEAD}kind: Run\nmetadata: {name: r}\nspec:\n  command: x\n  resources: {nodes: 2}\n  checkpoint:\n    mode: ${mode}\n${selector}`;

function load(files: Record<string, string>, opts: ConstructorParameters<typeof SpecLoader>[0] = {}) {
  const l = new SpecLoader(opts);
  for (const [f, text] of Object.entries(files)) l.loadFile(f, enc(text), '1');
  return l.result();
}

describe('a declared checkpoint mode no backend the run may use offers', () => {
  it('is an error at the mode, with file and line, naming the backend and the fix', () => {
    const r = load({
      'backends/k8s.yaml': volcano('k8s'),
      'backends/slurm.yaml': slurm('slurm-a'),
      'runs/r.yaml': run('  backendSelector: {order: [k8s]}\n'),
    });
    expect(r.diagnostics).toEqual([
      {
        severity: 'error',
        code: 'CheckpointModeUnavailable',
        file: 'runs/r.yaml',
        line: 8,
        column: 11,
        path: 'spec.checkpoint.mode',
        message:
          'no backend this run may use offers checkpoint.mode shared: k8s offers no shared checkpoint dir (checkpoint.mode: shared): declare volcano.checkpointVolume (a ReadWriteMany PersistentVolumeClaim every pod mounts)',
        hint: 'declare volcano.checkpointVolume (a ReadWriteMany PersistentVolumeClaim every pod mounts)',
      },
    ]);
    expect(r.objects.map((o) => o.name).sort()).toEqual(['k8s', 'slurm-a']);
  });

  it.each([
    ['one candidate offers it', '  backendSelector: {order: [k8s, slurm-a]}\n', 'shared'],
    ['no selector: every Backend is a candidate', '', 'shared'],
    ['the Backend declares the volume', '  backendSelector: {order: [k8s-rwx]}\n', 'shared'],
    ['auto', '  backendSelector: {order: [k8s]}\n', 'auto'],
  ])('is fine when %s', (_what, selector, mode) => {
    const r = load({
      'backends/k8s.yaml': volcano('k8s'),
      'backends/k8s-rwx.yaml': volcano('k8s-rwx', ', checkpointVolume: ckpt'),
      'backends/slurm.yaml': slurm('slurm-a'),
      'runs/r.yaml': run(selector, mode),
    });
    expect(r.diagnostics).toEqual([]);
  });

  it('takes allowed and forbidden as the solver does, and a DAG node inherits the default selector', () => {
    const backends = { 'backends/k8s.yaml': volcano('k8s'), 'backends/slurm.yaml': slurm('slurm-a') };
    const forbidden = load({
      ...backends,
      'runs/r.yaml': run('  backendSelector: {forbidden: [slurm-a]}\n'),
    });
    expect(forbidden.diagnostics.map((d) => d.code)).toEqual(['CheckpointModeUnavailable']);
    const allowed = load({
      ...backends,
      'runs/r.yaml': run('  backendSelector: {allowed: [k8s]}\n', 'store'),
    });
    expect(allowed.diagnostics.map((d) => d.code)).toEqual([]);
    const dag = `${HEAD}kind: DAG\nmetadata: {name: d}\nspec:\n  defaults:\n    backendSelector: {order: [slurm-a]}\n  nodes:\n    - id: a\n      run:\n        command: x\n        checkpoint: {mode: store}\n`;
    const r = load({ ...backends, 'dags/d.yaml': dag });
    expect(r.diagnostics).toMatchObject([
      {
        code: 'CheckpointModeUnavailable',
        file: 'dags/d.yaml',
        line: 11,
        path: 'spec.nodes[0].run.checkpoint.mode',
        message: expect.stringContaining(
          'slurm-a offers no checkpoints written straight to the object store',
        ),
      },
    ]);
  });

  it('says nothing of Backends the operator declares elsewhere (only their names are known)', () => {
    const r = load(
      { 'runs/r.yaml': run('  backendSelector: {order: [k8s]}\n') },
      { backendNames: () => new Set(['k8s']) },
    );
    expect(r.diagnostics).toEqual([]);
  });
});
