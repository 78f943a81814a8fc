/**
 * `policy.optimize: cost` through the real controller: two local Backends at the same price, one of
 * which preempted often in the status branch's recorded history (a finished run's attempts, seeded
 * before the controller starts). The new run's attempt goes to the other, and its `why` says so with
 * the figures; the same run with `optimize: order` goes to the first by priority.
 */
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Controller } from '../controller/controller.js';
import { FILE_STORAGE } from './helpers/backends/kinds.js';
import { makeWorkTree, type WorkTree } from './helpers/git/specs-repo.js';
import { seedRunStatuses } from './helpers/git/status-branch.js';
import { removeTree } from './helpers/io.js';

/** One attempt of a tiny run on a loaded machine: a ceiling, not a window. */
const ATTEMPT_MS = 60_000;

const backendYaml = (name: string, priority: number) => `apiVersion: adventuretime.dev/v1alpha1
kind: Backend
metadata: {name: ${name}}
spec:
  type: local
  priority: ${priority}
  capabilities: {costPerHour: 2}
`;

/** A run that chooses among every backend (no selector), with `policy`. */
const runOf = (name: string, policy: string) => `apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata: {name: ${name}}
spec:
  command: ['true']
  policy: ${policy}
`;

/** A finished run's status: 8 one-hour attempts on spot-a, 6 of them preempted; 2 on spot-b, none. */
function historyDoc() {
  const h = (i: number) => new Date(Date.parse('2026-10-01T00:00:00Z') + i * 3_600_000).toISOString();
  const attempts = Array.from({ length: 10 }, (_, i) => {
    const backend = i < 8 ? 'spot-a' : 'spot-b';
    const preempted = i < 6;
    return {
      n: i + 1,
      backend,
      jobName: `adv-old-${i + 1}`,
      phase: preempted ? 'Preempted' : 'Succeeded',
      class: preempted ? 'Preempted' : 'Succeeded',
      specCommit: 'c0ffee',
      submittedAt: h(i),
      startedAt: h(i),
      finishedAt: h(i + 1),
    };
  });
  return {
    apiVersion: 'adventuretime.dev/v1alpha1',
    kind: 'RunStatus',
    metadata: { name: 'old' },
    status: { phase: 'Succeeded', conditions: [], attempts },
  };
}

describe('policy.optimize: cost counts the preemptions recorded on the status branch', () => {
  let tmp: string;
  let wt: WorkTree;
  let c: Controller | undefined;

  beforeAll(async () => {
    tmp = await mkdtemp(join(tmpdir(), 'adv-cost-optimize-'));
    wt = await makeWorkTree({
      'backends/spot-a.yaml': backendYaml('spot-a', 10),
      'backends/spot-b.yaml': backendYaml('spot-b', 0),
      'storage.yaml': FILE_STORAGE,
      'runs/cheap.yaml': runOf('cheap', '{optimize: cost, checkpointIntervalSec: 3600}'),
      'runs/ordered.yaml': runOf('ordered', '{optimize: order}'),
    });
    seedRunStatuses(wt.dir, [historyDoc()]);
    c = await Controller.create({ repo: wt.dir, dataDir: join(tmp, 'data'), pollIntervalMs: 100 });
    await c.runUntilIdle({ timeoutMs: 2 * ATTEMPT_MS });
  }, 3 * ATTEMPT_MS);

  afterAll(async () => {
    await c?.stop();
    await wt?.cleanup();
    if (tmp) await removeTree(tmp);
  });

  it('sends the run to the backend that preempts less, and the attempt says why', () => {
    const st = c!.runStatus('cheap')!.status;
    expect(st.phase, JSON.stringify(st, null, 1)).toBe('Succeeded');
    expect(st.attempts[0]!.backend).toBe('spot-b');
    // spot-a: 6 preemptions over 8 attempt-hours, each losing half an hour of work.
    expect(st.attempts[0]!.why).toBe(
      'spot-b: chosen (optimize: cost) — expected $2.00/h of work vs spot-a $2.75/h of work (spot-a preempted 0.8×/h over 8 attempts)',
    );
  });

  it('optimize: order keeps the priority order', () => {
    const st = c!.runStatus('ordered')!.status;
    expect(st.attempts[0]!.backend).toBe('spot-a');
    expect(st.attempts[0]!.why).toBe('spot-a: chosen');
  });
});
