/**
 * The loader patches the cross-file verdicts when an edit keeps every document's cross-file facts
 * (loader.ts `crossFacts`). Whatever the edits, its result must be the one a fresh loader gives
 * for the same files: this drives one loader through random edits and compares at every step.
 */
import { describe, expect, it } from 'vitest';
import { SpecLoader } from './loader.js';

/** A small seeded generator, so a failure can be replayed. */
function rng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

const HEAD = 'apiVersion: adventuretime.dev/v1alpha1\n';
const backend = (name: string) => `${HEAD}kind: Backend\nmetadata:\n  name: ${name}\nspec:\n  type: local\n`;
const STORAGE = `${HEAD}kind: Storage\nmetadata: {name: default}\nspec: {type: file, file: {path: store}}\n`;
const DAG = `${HEAD}kind: DAG\nmetadata:\n  name: d\nspec:\n  nodes:\n    - id: n1\n      run:\n        command: [python3, a.py]\n        backendSelector: {order: [local-a]}\n`;

interface RunShape {
  name: string;
  backends: string[];
  command: string;
  labels: number;
  comments: number;
}

const runYaml = (r: RunShape): string =>
  '# a comment\n'.repeat(r.comments) +
  `${HEAD}kind: Run\nmetadata:\n  name: ${r.name}\n  labels:\n` +
  Array.from({ length: r.labels + 1 }, (_, i) => `    l${i}: "v"\n`).join('') +
  `spec:\n  command: [python3, ${r.command}]\n  backendSelector:\n    order: [${r.backends.join(', ')}]\n`;

describe('the loader patches cross-file verdicts only where a full check would agree', () => {
  for (const seed of [1, 2, 3, 4, 5, 6]) {
    it(`seed ${seed}: after every edit, the result equals a fresh load`, () => {
      const rand = rng(seed);
      const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
      const names = ['r0', 'r1', 'r2', 'r3', 'd.n1', 'dup'];
      const backendNames = ['local-a', 'local-b', 'nope'];
      const files = new Map<string, string>([
        ['backends/a.yaml', backend('local-a')],
        ['backends/b.yaml', backend('local-b')],
        ['storage.yaml', STORAGE],
        ['dags/d.yaml', DAG],
      ]);
      const shapes = new Map<string, RunShape>();
      const newShape = (i: number): RunShape => ({
        name: rand() < 0.7 ? `run-${i}` : pick(names),
        backends: [pick(backendNames)],
        command: `train-${i}.py`,
        labels: 0,
        comments: 0,
      });
      for (let i = 0; i < 12; i++) shapes.set(`runs/r${i}.yaml`, newShape(i));
      for (const [f, r] of shapes) files.set(f, runYaml(r));
      const loader = new SpecLoader();
      let version = 0;
      const sync = () => {
        for (const [f, text] of files) loader.loadFile(f, Buffer.from(text), `${f}@${text}`);
        version++;
      };
      sync();
      loader.result();
      let patched = 0;
      for (let step = 0; step < 60; step++) {
        const file = pick([...shapes.keys()]);
        const r = shapes.get(file)!;
        const roll = rand();
        // Mostly edits that keep the facts: the command, lines added above the backend list.
        if (roll < 0.55) {
          r.command = `edit-${step}.py`;
          r.labels = Math.floor(rand() * 3);
        } else if (roll < 0.7) r.backends = [pick(backendNames), pick(backendNames)];
        else if (roll < 0.8) r.name = pick(names);
        else if (roll < 0.85) r.comments = Math.floor(rand() * 2);
        else if (roll < 0.9) {
          shapes.delete(file);
          files.delete(file);
          loader.removeFile(file);
        } else if (roll < 0.95) shapes.set(`runs/new-${step}.yaml`, newShape(100 + step));
        else files.set('backends/b.yaml', backend(pick(['local-b', 'local-c'])));
        for (const [f, s] of shapes) files.set(f, runYaml(s));
        const before = loader.fullCrossChecks;
        sync();
        const got = loader.result();
        if (loader.fullCrossChecks === before) patched++;
        const fresh = new SpecLoader();
        for (const [f, text] of files) fresh.loadFile(f, Buffer.from(text), `${f}@${text}`);
        expect(JSON.stringify(got), `step ${step} (version ${version})`).toBe(JSON.stringify(fresh.result()));
      }
      // The patch was taken, or this test proves nothing about it.
      expect(patched).toBeGreaterThan(10);
    });
  }
});
