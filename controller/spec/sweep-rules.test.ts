import { describe, expect, it } from 'vitest';
import { SpecLoader } from './loader.js';
import { pointRunName } from './sweep-params.js';

const enc = (s: string) => new TextEncoder().encode(s);
const HEAD = 'apiVersion: adventuretime.dev/v1alpha1\nkind: Sweep\nmetadata:\n  name: s\nspec:\n';

/** The diagnostics of one Sweep file whose `spec:` body is `body`, as `code@line`. */
const diagnose = (body: string, name = 's') => {
  const l = new SpecLoader();
  l.loadFile('sweeps/s.yaml', enc(HEAD.replace('name: s', `name: ${name}`) + body), '1');
  return l.result().diagnostics.map((d) => `${d.code}@${d.line}`);
};

describe('Sweep rules', () => {
  it.each([
    [
      'a grid with its references',
      '  template:\n    command: train --lr {{params.lr}}\n    env: {OPT: "{{ params.opt }}"}\n  parameters:\n    grid: {lr: [0.1, 0.01], opt: [sgd]}\n',
      [],
    ],
    [
      'points and a grid',
      '  template: {command: [train, "{{params.m}}", "{{params.lr}}"]}\n  parameters:\n    grid: {lr: [1, 2]}\n    points: [{m: small}, {m: large}]\n',
      [],
    ],
    [
      'a reference to an undefined param, at its line',
      '  template:\n    command: x\n    env:\n      A: "{{params.lr}}"\n      B: "{{params.seed}}"\n  parameters:\n    grid: {lr: [1]}\n',
      ['UnknownParam@10'],
    ],
    [
      'a reference in a setup step',
      '  template:\n    command: x\n    setup: ["echo {{params.lr}}", "echo {{params.seed}}"]\n  parameters:\n    grid: {lr: [1]}\n',
      ['UnknownParam@8'],
    ],
    [
      'a reference in an argv element',
      '  template:\n    command:\n      - train\n      - "{{params.lrr}}"\n  parameters:\n    grid: {lr: [1]}\n',
      ['UnknownParam@9'],
    ],
    ['no parameters at all', '  template: {command: x}\n  parameters: {}\n', ['SweepNoPoints@7']],
    [
      'points naming different parameters',
      '  template: {command: x}\n  parameters:\n    points:\n      - {a: 1}\n      - {b: 2}\n',
      ['SweepPointNames@10'],
    ],
    [
      'a parameter in both the grid and the points',
      '  template: {command: x}\n  parameters:\n    grid: {a: [1, 2]}\n    points:\n      - {a: 3}\n',
      ['SweepParamTwice@10'],
    ],
    [
      'the same point twice',
      '  template: {command: x}\n  parameters:\n    points:\n      - {a: 1}\n      - {a: 1}\n',
      ['SweepDuplicatePoint@10'],
    ],
    [
      'a grid value twice',
      '  template: {command: x}\n  parameters:\n    grid: {a: [1, 1]}\n',
      ['SchemaUnique@8'],
    ],
    [
      'more than 10,000 points',
      `  template: {command: x}\n  parameters:\n    grid: {a: [${Array.from({ length: 101 }, (_, i) => i).join(',')}], b: [${Array.from({ length: 100 }, (_, i) => i).join(',')}]}\n`,
      ['SweepTooLarge@8'],
    ],
    [
      'the template gets the Run rules (a reserved env name)',
      '  template: {command: x, env: {ADV_RUN: y}}\n  parameters:\n    grid: {a: [1]}\n',
      ['ReservedEnv@6'],
    ],
    ['an object as a value', '  template: {command: x}\n  parameters:\n    grid: {a: [{b: 1}]}\n', ['*']],
  ])('%s', (_, body, want) => {
    const got = diagnose(body);
    if (want[0] === '*') expect(got.length).toBeGreaterThan(0);
    else expect(got).toEqual(want);
  });

  it('a name too long for its points’ run names is refused', () => {
    const body = '  template: {command: x}\n  parameters:\n    grid: {a: [1]}\n';
    expect(diagnose(body, 'x'.repeat(54))).toEqual([]);
    expect(diagnose(body, 'x'.repeat(55))).toHaveLength(1);
  });

  it('says which parameters exist and guesses the intended one', () => {
    const l = new SpecLoader();
    l.loadFile(
      'sweeps/s.yaml',
      enc(HEAD + '  template: {command: "train {{params.lrr}}"}\n  parameters:\n    grid: {lr: [1]}\n'),
      '1',
    );
    const d = l.result().diagnostics[0]!;
    expect(d.message).toBe('{{params.lrr}} names no parameter of this sweep (it has "lr")');
    expect(d.hint).toBe('did you mean {{params.lr}}?');
    expect(d.path).toBe('spec.template.command');
  });
});

describe('a point named like another run', () => {
  it('refuses the Run and the Sweep, each saying where the other is', () => {
    const sweepText =
      HEAD.replace('name: s', 'name: g') +
      '  template: {command: x}\n  parameters:\n    grid: {lr: [1, 2]}\n';
    const l = new SpecLoader();
    l.loadFile('sweeps/g.yaml', enc(sweepText), '1');
    expect(l.result().objects).toHaveLength(1);
    const taken = pointRunName('g', { lr: 2 });
    l.loadFile(
      'runs/r.yaml',
      enc(
        `apiVersion: adventuretime.dev/v1alpha1\nkind: Run\nmetadata:\n  name: ${taken}\nspec:\n  command: x\n`,
      ),
      '1',
    );
    const got = l.result().diagnostics.map((d) => `${d.file}:${d.line} ${d.code} ${d.message}`);
    expect(got).toEqual([
      `runs/r.yaml:4 DuplicateName Run/${taken} is also a point of Sweep/g at sweeps/g.yaml:8`,
      `sweeps/g.yaml:8 DuplicateName a point runs as Run/${taken}, which is also defined at runs/r.yaml:4`,
    ]);
    expect(l.result().objects).toEqual([]);
  });
});
