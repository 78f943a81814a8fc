import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { parseSetArg } from './set-args.js';
import { AdvError } from '../controller/index.js';
import {
  codeRepoFromRemote,
  nameFromCommand,
  stamp,
  submitSpecText,
  type SubmitSpecInput,
} from './submit-spec.js';

const input = (over: Partial<SubmitSpecInput> = {}): SubmitSpecInput => ({
  name: 'train-20261127-101500',
  command: ['python3', 'train.py', '--lr', '3e-4'],
  env: {},
  sets: [],
  code: { ref: 'a'.repeat(40) },
  workingDir: '',
  header: ['Written by adv submit from branch main at 0123456789.'],
  ...over,
});

describe('nameFromCommand', () => {
  it.each([
    [['python3', 'train.py'], 'train'],
    [['python', '-u', 'scripts/Fine_Tune.py', '--x'], 'fine-tune'],
    [['uv', 'run', 'python', '-m', 'lab.train_gpt'], 'train-gpt'],
    [['torchrun', '--nproc-per-node=8', 'pretrain.py'], 'pretrain'],
    [['bash', 'run.sh'], 'run'],
    [['./a.out'], 'a-out'],
    [['python3'], 'run'],
    [['LR=3', '..'], 'run'],
  ])('%j → %s', (command, name) => {
    expect(nameFromCommand(command)).toBe(name);
  });

  it('is a DNS-1123 label of at most 40 characters, so the stamp still fits a run name', () => {
    const n = nameFromCommand(['python3', `${'Very_Long-'.repeat(10)}.py`]);
    expect(n.length).toBeLessThanOrEqual(40);
    expect(n).toMatch(/^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/);
    expect(stamp(new Date('2026-11-27T10:15:00.123Z'))).toBe('20261127-101500');
  });
});

describe('submitSpecText', () => {
  it('writes a spec as a person would: header, the docs’ field order, short lists in flow style', () => {
    const text = submitSpecText(
      input({
        backend: 'ssh-local',
        gpus: 2,
        env: { LR: '3e-4' },
        workingDir: 'exp',
        sets: [parseSetArg('policy.maxAttempts=5')],
      }),
    );
    expect(text).toBe(`# Written by adv submit from branch main at 0123456789.
apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata:
  name: train-20261127-101500
spec:
  command: [python3, train.py, --lr, "3e-4"]
  workingDir: exp
  code:
    ref: ${'a'.repeat(40)}
  resources:
    gpus: 2
  env:
    LR: "3e-4"
  backendSelector:
    order: [ssh-local]
  policy:
    maxAttempts: 5
`);
    // Strings stay strings ("3e-4" is not read back as a number).
    expect((parse(text) as { spec: { env: { LR: unknown } } }).spec.env.LR).toBe('3e-4');
  });

  it('-f: keeps the file’s fields and comments, replaces its command, name and code, keeps code.path', () => {
    const base = `# the lab's template
apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata:
  name: base
  labels: {team: nlp}
spec:
  entry: train.py:main
  code: {ref: main, path: models}
  policy:
    maxAttempts: 9 # generous: preemptible nodes
`;
    const text = submitSpecText(
      input({
        base: { file: 'base.yaml', text: base },
        code: { ref: 'b'.repeat(40), repo: 'https://git.example.com/lab/mono.git' },
      }),
    );
    const doc = parse(text) as { metadata: unknown; spec: Record<string, unknown> };
    expect(doc.metadata).toEqual({ name: 'train-20261127-101500', labels: { team: 'nlp' } });
    expect(doc.spec).toEqual({
      code: { repo: 'https://git.example.com/lab/mono.git', ref: 'b'.repeat(40), path: 'models' },
      policy: { maxAttempts: 9 },
      command: ['python3', 'train.py', '--lr', '3e-4'],
    });
    expect(text).toContain('maxAttempts: 9 # generous: preemptible nodes');
    expect(text).not.toContain("the lab's template");
    expect(text.startsWith('# Written by adv submit')).toBe(true);
  });

  it('says what is wrong with a bad -f, a missing command or a --set through a scalar', () => {
    expect(() => submitSpecText(input({ base: { file: 'b.yaml', text: 'kind: DAG\n' } }))).toThrow(
      /b\.yaml: kind is DAG; -f takes one Run/,
    );
    expect(() =>
      submitSpecText(input({ base: { file: 'b.yaml', text: 'kind: Run\n---\nkind: Run\n' } })),
    ).toThrow(/2 documents/);
    expect(() => submitSpecText(input({ command: [] }))).toThrow(/no command/);
    expect(() => submitSpecText(input({ sets: [parseSetArg('command.x=1')] }))).toThrow(
      /command is not a map/,
    );
  });
});

describe('codeRepoFromRemote', () => {
  const refused = (url: string, remote = 'origin'): { message: string; hint: string } => {
    try {
      codeRepoFromRemote(remote, url);
    } catch (e) {
      if (e instanceof AdvError) return { message: e.message, hint: String(e.data.hint) };
      throw e;
    }
    throw new Error(`${url} was accepted`);
  };

  it('keeps an http(s) URL without credentials as it is', () => {
    expect(codeRepoFromRemote('origin', 'https://git.example.com/lab/model.git')).toBe(
      'https://git.example.com/lab/model.git',
    );
    expect(codeRepoFromRemote('origin', 'http://127.0.0.1:8123/code.git')).toBe(
      'http://127.0.0.1:8123/code.git',
    );
  });

  it.each([
    ['https://alice:ghp_SECRET123@github.com/lab/model.git', 'https://github.com/lab/model.git'],
    ['https://x-access-token:ghp_SECRET123@github.com/lab/model', 'https://github.com/lab/model'],
    [
      'https://ghp_SECRET123@git.example.com:8443/lab/model.git',
      'https://git.example.com:8443/lab/model.git',
    ],
    ['http://oauth2:ghp_SECRET123@127.0.0.1:8123/code.git', 'http://127.0.0.1:8123/code.git'],
  ])('drops the credentials of %s: the token never goes into the spec', (url, repo) => {
    const out = codeRepoFromRemote('origin', url);
    expect(out).toBe(repo);
    expect(out).not.toContain('SECRET');
  });

  it.each([
    ['git@github.com:lab/model.git', 'git remote add https https://github.com/lab/model.git'],
    [
      'ssh://git@git.example.com:2222/lab/model.git',
      'git remote add https https://git.example.com/lab/model.git',
    ],
    ['alice@host.example:~/model', 'git remote add https https://host.example/model'],
  ])('refuses the ssh remote %s and says which https remote to add', (url, add) => {
    const e = refused(url);
    expect(e.message).toBe(
      `the code's remote "origin" is ${url}, an ssh URL: the controller fetches code over https only`,
    );
    expect(e.hint).toContain(add);
    expect(e.hint).toContain('--code-remote https');
  });

  it.each([
    ['file:///home/alice/model', /file:\/\/ is not fetched/],
    ['/home/alice/model.git', /not an absolute URL/],
    ['../model', /not an absolute URL/],
    ['git://git.example.com/model.git', /git:\/\/ is not fetched/],
    ['https://alice:SECRET@git.example.com/model.git?x=1', /query or a fragment/],
  ])('refuses %s, naming the remote and what to do', (url, why) => {
    const e = refused(url, 'mine');
    expect(e.message).toMatch(/^the code's remote "mine" \(.*\) cannot be code\.repo: /);
    expect(e.message).toMatch(why);
    expect(e.message).not.toContain('SECRET');
    expect(e.hint).toMatch(
      /^pass --code-remote NAME with a remote whose URL is https:\/\/…, or push the code/,
    );
  });
});
