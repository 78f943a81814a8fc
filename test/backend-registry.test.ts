/**
 * A backend is one folder and one descriptor. `throwaway` is defined only under
 * test/fixtures/backends/: registered next to this build's types, a spec using it validates (and a
 * wrong setting in its block is refused at its file and line), and a run on it is planned,
 * solved, submitted, polled and cancelled by a real Controller — with no edit anywhere else.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from '../controller/backends/registry.js';
import { JobState } from '../controller/backends/types.js';
import { Controller } from '../controller/controller.js';
import { DirectorySource, formatDiagnostic, loadSpecs } from '../controller/index.js';
import { throwawayBackend, type ThrowawayJob } from './fixtures/backends/throwaway/index.js';
import { makeWorkTree, type WorkTree } from './helpers/git/specs-repo.js';
import { waitFor } from './helpers/wait.js';

const backendYaml = (settings: string) => `apiVersion: adventuretime.dev/v1alpha1
kind: Backend
metadata:
  name: tw
spec:
  type: throwaway
  throwaway: ${settings}
`;

const runYaml = (name: string, extra = '') => `apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata: {name: ${name}}
spec:
  command: [train]
  backendSelector: {order: [tw]}
${extra}`;

describe('a backend type registered from a test folder', () => {
  let tmp: string;
  beforeAll(async () => {
    tmp = await mkdtemp(join(tmpdir(), 'adv-registry-'));
  });
  afterAll(() => rm(tmp, { recursive: true, force: true }));

  const diagnostics = async (files: Record<string, string>, backends = [...BACKENDS, throwawayBackend()]) => {
    const dir = await mkdtemp(join(tmp, 'specs-'));
    for (const [rel, text] of Object.entries(files)) await writeFile(join(dir, rel), text);
    const r = await loadSpecs(new DirectorySource(dir), { backends });
    return r.diagnostics.map(formatDiagnostic).join('\n');
  };

  it('validates its settings block with the schema and rules its descriptor declares', async () => {
    expect(await diagnostics({ 'b.yaml': backendYaml('{pool: lab, maxJobs: 4}') })).toBe('');
    expect(await diagnostics({ 'b.yaml': backendYaml('{pool: lab, maxJobs: lots}') })).toBe(
      [
        'b.yaml:7:35: error[SchemaType] spec.throwaway.maxJobs: expected a whole number, got string "lots"',
        '    fix: write a whole number',
      ].join('\n'),
    );
    expect(await diagnostics({ 'b.yaml': backendYaml('{pool: reserved}') })).toMatch(
      /^b\.yaml:7:\d+: error\[ReservedPool\] spec\.throwaway\.pool: pool "reserved" is not for jobs/,
    );
    // The generic rules come from the registry too: its block is required, and is another type's.
    expect(
      await diagnostics({ 'b.yaml': backendYaml('{pool: lab}').replace('type: throwaway', 'type: local') }),
    ).toMatch(/error\[WrongSettings\] spec\.throwaway: "throwaway:" settings are for throwaway backends/);
    expect(
      await diagnostics({ 'b.yaml': backendYaml('{pool: lab}').replace(/ {2}throwaway: .*\n/, '') }),
    ).toMatch(/error\[MissingSettings\] spec: a throwaway backend needs its "throwaway:" settings/);
    // Without the registration, the type does not exist.
    expect(await diagnostics({ 'b.yaml': backendYaml('{pool: lab}') }, [...BACKENDS])).toMatch(
      /error\[SchemaEnum\] spec\.type: string "throwaway" is not one of: local, ssh, slurm/,
    );
  });

  describe('through a real Controller', () => {
    let wt: WorkTree | undefined;
    let c: Controller | undefined;
    afterEach(async () => {
      await c?.stop();
      await wt?.cleanup();
    });

    it('is planned, solved, submitted, polled and cancelled', async () => {
      const jobs = new Map<string, ThrowawayJob>();
      wt = await makeWorkTree({
        'backends/tw.yaml': backendYaml('{pool: lab}'),
        'runs/a.yaml': runYaml('a'),
        'runs/b.yaml': runYaml('b'),
      });
      c = await Controller.create({
        repo: wt.dir,
        dataDir: join(tmp, 'data'),
        backends: [...BACKENDS, throwawayBackend(jobs)],
      });
      const ctl = c;
      await ctl.init();
      const phase = (n: string) => ctl.runStatus(n)?.status.phase;
      const until = (what: string, done: () => boolean) =>
        waitFor(
          async () => {
            await ctl.pass();
            return done();
          },
          { what, detail: () => ['a', 'b'].map((n) => ctl.runStatus(n)?.status) },
        );

      await until('both runs running on tw', () => phase('a') === 'Running' && phase('b') === 'Running');
      expect([...jobs.values()].map((j) => [j.jobName, j.run, j.attempt, j.pool]).sort()).toEqual([
        ['adv-a-1', 'a', 1, 'lab'],
        ['adv-b-1', 'b', 1, 'lab'],
      ]);
      const a = ctl.runStatus('a')!.status;
      expect(a.attempts[0]).toMatchObject({ backend: 'tw', jobName: 'adv-a-1' });
      expect(a.attempts[0]!.jobId).toMatch(/^tw-\d$/);
      // The solver chose it by its traits and said so.
      expect(a.conditions.find((x) => x.type === 'Scheduled')).toMatchObject({
        status: 'True',
        message: expect.stringMatching(/^tw: chosen/),
      });

      // The workload of `a` ends: the next poll sees it.
      Object.assign(jobs.get('adv-a-1')!, {
        state: JobState.Succeeded,
        exitCode: 0,
        finishedAt: new Date().toISOString(),
      });
      await until('a succeeded', () => phase('a') === 'Succeeded');

      // Suspending `b` in git cancels its job through the adapter.
      await wt.write('runs/b.yaml', runYaml('b', '  suspend: true\n'));
      await wt.commit('suspend b');
      ctl.requestFetch('test');
      await until('b cancelled', () => phase('b') === 'Cancelled');
      expect(jobs.get('adv-b-1')!.state).toBe(JobState.Cancelled);
      expect(jobs.size).toBe(2);
    });
  });
});
