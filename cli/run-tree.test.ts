import { describe, expect, it } from 'vitest';
import type { RunStatusDoc } from '../controller/index.js';
import { forkTree, treeTable } from './run-tree.js';

const run = (name: string, from?: [string, number]): RunStatusDoc => ({
  apiVersion: 'adventuretime.dev/v1alpha1',
  kind: 'RunStatus',
  metadata: { name },
  status: {
    phase: 'Succeeded',
    conditions: [],
    attempts: [],
    ...(from ? { forkedFrom: { run: from[0], step: from[1] } } : {}),
  },
});
const drawn = (docs: RunStatusDoc[]) => forkTree(docs).map((r) => r.prefix + r.doc.metadata.name);

describe('forkTree', () => {
  it.each([
    ['no forks: the runs as given', [run('a'), run('b')], ['a', 'b']],
    [
      'forks under their parent, the last one closing the branch, grandchildren indented',
      [run('a'), run('a-1', ['a', 10]), run('a-1-x', ['a-1', 20]), run('a-2', ['a', 30]), run('b')],
      ['a', '├─ a-1', '│  └─ a-1-x', '└─ a-2', 'b'],
    ],
    ['a child listed before its parent still hangs under it', [run('c', ['p', 5]), run('p')], ['p', '└─ c']],
    ['a fork whose parent is not listed is a root', [run('orphan', ['gone', 5])], ['orphan']],
    [
      'a cycle (a name reused) is drawn once, never for ever',
      [run('x', ['y', 1]), run('y', ['x', 2])],
      ['x', '└─ y'],
    ],
    ['a run forked from itself is a root', [run('s', ['s', 3])], ['s']],
  ] satisfies [string, RunStatusDoc[], string[]][])('%s', (_t, docs, want) => {
    expect(drawn(docs)).toEqual(want);
  });
});

describe('treeTable', () => {
  it('reorders the rows, draws the names and says where each fork came from', () => {
    const docs = [run('kid', ['mom', 40]), run('mom')];
    const t = treeTable(
      docs,
      ['NAME', 'PHASE'],
      [
        ['kid', 'Running'],
        ['mom', 'Succeeded'],
      ],
    );
    expect(t).toEqual({
      headers: ['NAME', 'FROM', 'PHASE'],
      rows: [
        ['mom', '-', 'Succeeded'],
        ['└─ kid', 'mom@40', 'Running'],
      ],
    });
  });
});
