import { describe, expect, it } from 'vitest';
import { SpecLoader } from './loader.js';
import type { Diagnostic } from './diagnostic.js';

const header = (kind: string, name: string) =>
  `apiVersion: adventuretime.dev/v1alpha1\nkind: ${kind}\nmetadata:\n  name: ${name}\nspec:\n`;
const env = (name: string, version: number, more = '') =>
  `${header('Environment', name)}  version: ${version}\n${more}`;
const run = (name: string, environment: string, more = '') =>
  `${header('Run', name)}  command: python train.py\n  environment: ${environment}\n${more}`;

function load(files: Record<string, string>) {
  const loader = new SpecLoader();
  for (const [f, text] of Object.entries(files)) loader.loadFile(f, new TextEncoder().encode(text), f + text);
  return loader.result();
}
const errors = (r: ReturnType<typeof load>) =>
  r.diagnostics
    .filter((d) => d.severity === 'error')
    .map(
      (d: Diagnostic) =>
        `${d.file}:${d.line} ${d.code} ${d.path}: ${d.message}${d.hint ? ` | ${d.hint}` : ''}`,
    );

describe('Environment references', () => {
  const envs = { 'envs/v1.yaml': env('cuda12', 1), 'envs/v2.yaml': env('cuda12', 2) };

  it('resolves a name to its newest version and a pin to that version; a missing version is an error at the run', () => {
    const r = load({
      ...envs,
      'runs/a.yaml': run('a', 'cuda12'),
      'runs/b.yaml': run('b', 'cuda12@1'),
      'runs/c.yaml': run('c', 'cuda12@3'),
    });
    expect(errors(r)).toEqual([
      'runs/c.yaml:7 UnknownEnvironment spec.environment: Environment "cuda12" has no version 3 (versions: 1, 2) | use "cuda12@2", or "cuda12" for the newest',
    ]);
    expect(r.objects.map((o) => o.name).sort()).toEqual(['a', 'b', 'cuda12', 'cuda12']);
  });

  it('says which Environment was meant when the name is misspelt, in a DAG node too', () => {
    const dag = `${header('DAG', 'p')}  nodes:\n    - id: train\n      run:\n        command: x\n        environment: cuda21@2\n`;
    const r = load({ ...envs, 'runs/a.yaml': run('a', 'cuda21'), 'dags/p.yaml': dag });
    expect(errors(r)).toEqual([
      'dags/p.yaml:10 UnknownEnvironment spec.nodes[0].run.environment: Environment "cuda21" is not defined in this repo | did you mean "cuda12@2"?',
      'runs/a.yaml:7 UnknownEnvironment spec.environment: Environment "cuda21" is not defined in this repo | did you mean "cuda12"?',
    ]);
  });

  it('refuses two documents of one name and version at both places, and holds only the runs that use it', () => {
    const r = load({
      ...envs,
      'envs/v2-copy.yaml': env('cuda12', 2),
      'runs/a.yaml': run('a', 'cuda12'),
      'runs/b.yaml': run('b', 'cuda12@1'),
    });
    expect(errors(r)).toEqual([
      'envs/v2-copy.yaml:4 DuplicateName metadata.name: Environment/cuda12@2 is also defined at envs/v2.yaml:4 | give one of them another spec.version: a name and version are unique across the repo',
      'envs/v2.yaml:4 DuplicateName metadata.name: Environment/cuda12@2 is also defined at envs/v2-copy.yaml:4 | give one of them another spec.version: a name and version are unique across the repo',
      'runs/a.yaml:7 EnvironmentInvalid spec.environment: Environment cuda12@2 at envs/v2-copy.yaml:4, envs/v2.yaml:4 is invalid, so this run cannot start | fix the Environment (adv validate shows its errors)',
    ]);
    expect(r.objects.map((o) => o.name).sort()).toEqual(['b', 'cuda12']);
  });

  it('checks the names of templates: the run’s own steps, and its Environment’s against the run', () => {
    const r = load({
      'envs/hf.yaml': env(
        'hf',
        1,
        '  setup:\n    - huggingface-cli login --token {{ secrets.HF_TOKEN }}\n    - docker inspect -f "{{.Id}}" x\n  env:\n    OUT: "{{ ADV_JOB_DIR }}/out"\n',
      ),
      'runs/ok.yaml': run(
        'ok',
        'hf',
        '  secrets: [HF_TOKEN]\n  setup:\n    - echo {{ ADV_RUN }} {{ secrets.HF_TOKEN }}\n',
      ),
      'runs/typo.yaml': run(
        'typo',
        'hf',
        '  secrets: [HF_TOKEN]\n  setup:\n    - echo {{ADV_RUNN}} {{ secrets.HF_TOKN }}\n',
      ),
      'runs/nosecret.yaml': run('nosecret', 'hf'),
    });
    expect(errors(r)).toEqual([
      'runs/nosecret.yaml:7 EnvironmentTemplateName spec.environment: Environment hf@1 (envs/hf.yaml:8, spec.setup[0]): {{ secrets.HF_TOKEN }} names secret "HF_TOKEN", which the run does not list in spec.secrets | add "HF_TOKEN" to the run\'s spec.secrets',
      'runs/typo.yaml:10 UnknownTemplateName spec.setup[0]: {{ ADV_RUNN }} names "ADV_RUNN", which is not a variable of the job (a contract variable such as ADV_RUN, or the run\'s env and secrets) | did you mean "{{ ADV_RUN }}"?',
      'runs/typo.yaml:10 UnknownTemplateName spec.setup[0]: {{ secrets.HF_TOKN }} names secret "HF_TOKN", which the run does not list in spec.secrets | did you mean "{{ secrets.HF_TOKEN }}"?',
    ]);
  });

  it('refuses reserved variables in an Environment, and secrets in a Backend’s steps', () => {
    const backend = `${header('Backend', 'box')}  type: local\n  setup:\n    - echo {{ secrets.X }} {{ FROM_HOST }}\n  passEnv: [FROM_HOST]\n`;
    const r = load({ 'envs/e.yaml': env('e', 1, '  env:\n    ADV_RUN: x\n'), 'backends/box.yaml': backend });
    expect(errors(r)).toEqual([
      "backends/box.yaml:8 UnknownTemplateName spec.setup[0]: {{ secrets.X }} names a secret, but a Backend's steps run for every run and have none | move the step to the Environment or the Run that lists the secret",
      'envs/e.yaml:8 ReservedEnv spec.env.ADV_RUN: "ADV_RUN" is reserved for AdventureTime | rename it (names starting with ADV_ are set by adv exec)',
    ]);
  });

  it('refuses a name with a dot and a version that is not a whole number ≥ 1', () => {
    const r = load({ 'envs/e.yaml': env('cuda.12', 0) });
    expect(errors(r).map((e) => e.split(':')[0] + ' ' + e.split(' ')[1] + ' ' + e.split(' ')[2])).toEqual([
      'envs/e.yaml SchemaPattern metadata.name:',
      'envs/e.yaml SchemaRange spec.version:',
    ]);
  });
});
