import { describe, expect, it } from 'vitest';
import type { LoadedObject } from '../spec/loader.js';
import type { SpecObject } from '../spec/schema.js';
import { RETRY_ANNOTATION } from './run-plan-model.js';
import { desiredDag, desiredSweep } from './desired.js';

const loaded = (kind: 'DAG' | 'Sweep', spec: unknown): LoadedObject =>
  ({
    kind,
    name: 'pipe',
    file: `${kind === 'DAG' ? 'dags' : 'sweeps'}/pipe.yaml`,
    line: 1,
    object: {
      apiVersion: 'adventuretime.dev/v1alpha1',
      kind,
      metadata: {
        name: 'pipe',
        labels: { team: 'vision' },
        annotations: { [RETRY_ANNOTATION]: '2026-11-27T23:00:00.000Z' },
      },
      spec,
    } as unknown as SpecObject,
  }) as LoadedObject;

describe('desired owners', () => {
  it('a DAG keeps its annotations: `adv retry dag` reaches the planner through them', () => {
    const d = desiredDag(loaded('DAG', { nodes: [{ id: 'a', run: { command: ['true'] } }] }));
    expect(d.annotations).toEqual({ [RETRY_ANNOTATION]: '2026-11-27T23:00:00.000Z' });
    expect(d.labels).toEqual({ team: 'vision' });
    expect(d).toMatchObject({ name: 'pipe', file: 'dags/pipe.yaml' });
  });

  it('the generation follows the spec alone, not labels or annotations', () => {
    const spec = { nodes: [{ id: 'a', run: { command: ['true'] } }] };
    const a = desiredDag(loaded('DAG', spec));
    const b = desiredDag({
      ...loaded('DAG', spec),
      object: { ...loaded('DAG', spec).object, metadata: { name: 'pipe' } },
    } as LoadedObject);
    expect(a.generation).toBe(b.generation);
    expect(desiredSweep(loaded('Sweep', { ...spec, x: 1 })).generation).not.toBe(a.generation);
  });
});
