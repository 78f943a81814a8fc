/**
 * The same environment on every backend (issue 29): one Run, its spec text the same but for the
 * backend it names, on all seven kinds (test/helpers/every-backend.ts: local; ssh and slurm on
 * the real sshd and SLURM; gcp-tpu through the real gcloud against a fake TPU API; vastai against
 * a fake Vast API; the pull agent; volcano through the real kubectl against a fake Kubernetes),
 * prints the same output on each.
 */
import { describe, expect, it } from 'vitest';
import type { RunStatusDoc } from '../controller/status/types.js';
import { BACKEND_KINDS, everyBackendAvailable, useEveryBackend } from './helpers/every-backend.js';
import { passUntil } from './helpers/wait.js';

const available = everyBackendAvailable('the environments test');

/** The Run, the same text on every backend but its name and the backend it names. */
const runYaml = (name: string, backend: string) => `apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata: {name: ${name}}
spec:
  command: [sh, -c, 'echo "fingerprint $GREETING"']
  env: {GREETING: same-everywhere}
  backendSelector: {order: [${backend}]}
`;

/** A run's phase and message, and each attempt's: what a failed wait prints. */
const summary = (kind: string, s: RunStatusDoc['status'] | undefined) =>
  `${kind}: ${s?.phase} ${s?.message ?? ''}${(s?.attempts ?? []).map((a) => `\n  attempt ${a.n} on ${a.backend}: ${a.phase} ${a.reason ?? ''} ${a.message ?? ''}`).join('')}`;

describe.runIf(available)('the same environment on every backend', () => {
  const every = useEveryBackend('adv-environments-');

  it('one Run prints the same line on local, ssh, slurm, gcp-tpu, vastai, agent and volcano', async () => {
    const runs = BACKEND_KINDS.map((kind) => ({ kind, name: `fp-${kind}` }));
    const c = await every.start(
      Object.fromEntries(runs.map((r) => [`runs/${r.name}.yaml`, runYaml(r.name, r.kind)])),
    );
    const st = (run: string) => c.runStatus(run)?.status;
    await passUntil(
      c,
      'the run on every backend to end',
      () => runs.every((r) => ['Succeeded', 'Failed'].includes(st(r.name)?.phase ?? '')),
      300_000,
    ).catch((e: Error) => {
      throw new Error(`${e.message}\n${runs.map((r) => summary(r.kind, st(r.name))).join('\n')}`);
    });
    for (const r of runs)
      expect(st(r.name), `the run on ${r.kind}`).toMatchObject({
        phase: 'Succeeded',
        attempts: [expect.objectContaining({ backend: r.kind, phase: 'Succeeded' })],
      });
    const lines = await Promise.all(runs.map(async (r) => [r.kind, await every.logs(r.name)] as const));
    expect(Object.fromEntries(lines)).toEqual(
      Object.fromEntries(runs.map((r) => [r.kind, 'fingerprint same-everywhere\n'])),
    );
  }, 360_000);
});
