/**
 * The promise, end to end on real components: a run training the example workload is preempted
 * on the local SLURM (for real: a higher-priority job needs its node), comes back by itself on
 * the ssh host from the step it had checkpointed, and finishes with the right final step. Its
 * status history, and `adv describe`, tell the whole story.
 */
import { execFileSync } from 'node:child_process';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from '../cli/program.js';
import { Controller } from '../controller/controller.js';
import {
  FILE_STORAGE,
  slurmAvailable,
  slurmBackendYaml,
  sshBackendYaml,
  TRAIN,
  useSlurmCluster,
} from './helpers/backends/kinds.js';
import { captureIo } from './helpers/io.js';
import { makeWorkTree, type WorkTree } from './helpers/git/specs-repo.js';
import { waitFor } from './helpers/wait.js';

const available = slurmAvailable('the failover test');

const STEPS = 80;
/** The training holds at this step until the test lets it go: it is never racing the preemption. */
const HOLD_AT = 20;

describe.runIf(available)('preempted on SLURM, resumed on the ssh host', () => {
  const cluster = useSlurmCluster('adv-failover-');
  let wt: WorkTree;
  let c: Controller | undefined;
  cluster.defer(async () => {
    await c?.stop();
    await wt?.cleanup();
  });

  it('loses no committed step, and says so', async () => {
    const hold = join(cluster.tmp, 'hold');
    await writeFile(hold, '');
    wt = await makeWorkTree({
      'backends/slurm-local.yaml': slurmBackendYaml(cluster.sshd, join(cluster.tmp, 'slurm-root'), 'debug'),
      'backends/ssh-local.yaml': sshBackendYaml(cluster.sshd, 'ssh-local', join(cluster.tmp, 'ssh-root')),
      'storage.yaml': FILE_STORAGE,
      'train.py': await readFile(TRAIN, 'utf8'),
      'runs/resume.yaml': `apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata: {name: resume}
spec:
  command: [python3, train.py, --steps, '${STEPS}', --ckpt-every, '10', --step-sleep, '0.05', --hold-at, '${HOLD_AT}', --hold-file, '${hold}']
  policy: {preemptible: true}
  backendSelector: {order: [slurm-local, ssh-local]}
`,
    });
    c = await Controller.create({ repo: wt.dir, dataDir: join(cluster.tmp, 'data'), pollIntervalMs: 300 });
    await c.init();
    const st = () => c!.runStatus('resume')?.status;
    const passUntil = (what: string, done: () => boolean, ms = 90_000) =>
      waitFor(
        async () => {
          await c!.pass();
          return done();
        },
        { what, timeoutMs: ms, everyMs: 200, detail: st },
      );

    // Running on SLURM, held at step 20 with its checkpoint committed.
    await passUntil(
      `checkpoint ${HOLD_AT} committed on slurm-local`,
      () => st()?.attempts[0]?.phase === 'Running' && (st()?.attempts[0]?.lastStep ?? 0) >= HOLD_AT,
    );
    expect(st()!.attempts[0]!.backend).toBe('slurm-local');

    // A higher-priority job needs both nodes: SLURM preempts the run. Then the training may go on.
    execFileSync('sbatch', ['--parsable', '-p', 'high', '-N2', '-o', '/dev/null', '--wrap', 'sleep 20']);
    await passUntil('attempt 1 preempted', () => st()?.attempts[0]?.phase === 'Preempted');
    await rm(hold);
    await passUntil('resumed on ssh-local and finished', () => st()?.phase === 'Succeeded', 120_000);

    const [first, second] = st()!.attempts;
    expect(st()!.attempts).toHaveLength(2);
    expect(first).toMatchObject({ backend: 'slurm-local', phase: 'Preempted', class: 'Preempted' });
    expect(first!.reason).toBe('PREEMPTED');
    // The second attempt started exactly where the first one's last committed checkpoint was.
    expect(first!.lastStep).toBeGreaterThanOrEqual(HOLD_AT);
    expect(second).toMatchObject({
      backend: 'ssh-local',
      phase: 'Succeeded',
      class: 'Succeeded',
      startStep: first!.lastStep,
      lastStep: STEPS,
    });
    expect(second!.why).toMatch(
      /^slurm-local: tried after the others: cooling down: attempt 1 was preempted \d+s ago; ssh-local: chosen$/,
    );
    expect(st()!.checkpoint!.step).toBe(STEPS);

    // The final state is the training's last step, restored through the checkpoint.
    const io = captureIo({ ...process.env, HOME: cluster.tmp }, wt.dir);
    expect(
      await runCli(
        [
          'ckpt',
          'pull',
          'resume',
          '--to',
          join(cluster.tmp, 'final'),
          '--store',
          `file://${join(cluster.tmp, 'data', 'store')}`,
        ],
        io,
      ),
      io.err(),
    ).toBe(0);
    expect(
      JSON.parse(await readFile(join(cluster.tmp, 'final', String(STEPS), 'state.json'), 'utf8')),
    ).toMatchObject({
      step: STEPS,
    });

    // The status branch has the story: both attempts, their backends, the preemption.
    const log = await wt.git('log', '--format=%B', 'adventuretime/status', '--', 'runs/resume.yaml');
    expect(log).toMatch(/attempt 1 on slurm-local ended: PREEMPTED; a new attempt starts from step \d+/);
    expect(log).toMatch(/run\/resume: Submitting attempt 2 to ssh-local/);
    expect(log).toMatch(/run\/resume: Succeeded \(attempt 2 on ssh-local/);

    // …and adv describe tells it: attempts, backends, why each was chosen, why each ended, work lost.
    const d = captureIo({ ...process.env, HOME: cluster.tmp }, wt.dir);
    expect(await runCli(['describe', 'run', 'resume'], d), d.err()).toBe(0);
    const out = d.out();
    expect(out).toMatch(
      // …, STEPS, LOST, COST (none: these Backends declare no price), REASON
      /^1\s+slurm-local\s+\d+\s+Preempted\s.*Preempted\s+0→\d+\s+\d+s after step \d+\s+-\s+PREEMPTED/m,
    );
    expect(out).toMatch(
      new RegExp(`^2\\s+ssh-local\\s+\\d+\\s+Succeeded\\s.*Succeeded\\s+\\d+→${STEPS}\\s+-`, 'm'),
    );
    expect(out).toMatch(/#1 {2}slurm-local: chosen$/m);
    expect(out).toMatch(/#2 {2}slurm-local: tried after the others: cooling down.*; ssh-local: chosen$/m);
  }, 600_000); // the four waits above (90 s, 90 s, 90 s, 120 s), the cluster and the CLI
});
