import { describe, expect, it } from 'vitest';
import { shareOf, unionOfParts, type CheckpointPart } from './gang.js';

const sha = (c: string) => c.repeat(64);
const part = (k: number, files: [string, string][]): CheckpointPart => ({
  kind: 'CheckpointPart',
  run: 'r',
  step: 5,
  attempt: 1,
  process: k,
  processes: 2,
  files: files.map(([path, c]) => ({ path, size: 1, sha256: sha(c) })),
  createdAt: '',
});

describe('gang commit', () => {
  it('the union deduplicates a path written with the same bytes, and aborts on different ones', () => {
    expect(
      unionOfParts([
        part(0, [
          ['a', '1'],
          ['c', '3'],
        ]),
        part(1, [
          ['b', '2'],
          ['c', '3'],
        ]),
      ]),
    ).toEqual({
      files: [
        { path: 'a', size: 1, sha256: sha('1') },
        { path: 'c', size: 1, sha256: sha('3') },
        { path: 'b', size: 1, sha256: sha('2') },
      ],
    });
    expect(unionOfParts([part(0, [['c', '3']]), part(1, [['c', '4']])])).toEqual({
      conflict: 'path c written by processes 0 and 1 with different contents',
    });
  });

  it('splits a shared dir among the processes about evenly, the same way on every process', () => {
    const paths = Array.from({ length: 400 }, (_, i) => `default/ocdbt.process_${i % 4}/d/${i}`);
    const counts = [0, 0, 0, 0];
    for (const p of paths) counts[shareOf(p, 4)]!++;
    for (const c of counts) expect(c).toBeGreaterThan(60);
    expect(paths.map((p) => shareOf(p, 4))).toEqual(paths.map((p) => shareOf(p, 4)));
  });
});
