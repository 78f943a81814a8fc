/**
 * The same environment on every backend (issue 29). One Run — its spec text the same but for the
 * backend it names — whose Environment exports a variable in a setup step, loads a module (the
 * `module` shell function of a sourced file, as Lmod provides it, from the host's setup) and whose
 * code is a uv project (real uv; one dependency, a local wheel: the sync needs no network), prints
 * a byte-identical fingerprint on all seven backend kinds (test/helpers/backends/every-backend.ts: local;
 * ssh and slurm on the real sshd and SLURM; gcp-tpu through the real gcloud against a fake TPU
 * API; vastai against a fake Vast API; the pull agent; volcano through the real kubectl against a
 * fake Kubernetes). A host without the module ends the attempt as SetupFailed naming the step, and
 * the next attempt runs on another backend; a second attempt on a host syncs nothing.
 *
 * uv on the hosts: a host with no uv on its PATH (none here has one) installs the version its
 * Backend pins (`uv.version`), as a fresh cloud VM would: with pip, offline, from a wheel dir
 * around the real uv binary (PIP_FIND_LINKS and PIP_NO_INDEX, exported by the Backend's own setup
 * step). A setup step putting the repo's .venv/bin on PATH would not do: adv exec looks for uv on
 * the PATH it starts with, before the steps run; and no Backend field sets a job's PATH.
 */
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Controller } from '../controller/controller.js';
import type { RunStatusDoc } from '../controller/status/types.js';
import { sshBackendYaml } from './helpers/backends/kinds.js';
import {
  BACKEND_KINDS,
  everyBackendAvailable,
  useEveryBackend,
  type BackendKind,
} from './helpers/backends/every-backend.js';
import { filesIn } from './helpers/git/specs-repo.js';
import {
  buildUvWheelDir,
  createUvProject,
  expectedFingerprint,
  FINGERPRINT_ENTRY,
  MODULE_VAR_VALUE,
  UV_PIN,
} from './helpers/python/uv-project.js';
import { passUntil } from './helpers/wait.js';

// uv is the project's .venv's (requirements/ci.txt); createUvProject says how to build it when it is missing.
const available = everyBackendAvailable('the environments test');

const GREETING = "same everywhere, $(not run) 'quoted'";
const FINGERPRINT = expectedFingerprint({ ADV_FP_VAR: GREETING, MODULE_VAR: MODULE_VAR_VALUE });

/** The Environment: a module, a variable exported by a step (templated from the run's env). */
const ENVIRONMENT = `apiVersion: adventuretime.dev/v1alpha1
kind: Environment
metadata: {name: fp}
spec:
  version: 1
  description: the fingerprint's environment
  modules: [fp]
  setup: ['export ADV_FP_VAR={{ GREETING }}']
`;

/** The Run: the same text on every backend but its name and the backends it names. */
const runYaml = (
  name: string,
  backends: string[],
  what = `entry: ${FINGERPRINT_ENTRY}`,
  extra = '',
) => `apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata: {name: ${name}}
spec:
  environment: fp
  ${what}
  env: {GREETING: ${JSON.stringify(GREETING)}}
  backendSelector: {order: [${backends.join(', ')}]}
${extra}`;

/** A run's phase and message, its failing conditions, and each attempt's: what a failed wait prints. */
const summary = (name: string, s: RunStatusDoc['status'] | undefined) =>
  [
    `${name}: ${s?.phase} ${s?.message ?? ''}`,
    ...(s?.conditions ?? [])
      .filter((c) => c.status === 'False' && c.message)
      .map((c) => `  ${c.type}: ${c.message}`),
    ...(s?.attempts ?? []).map(
      (a) => `  attempt ${a.n} on ${a.backend}: ${a.phase} ${a.reason ?? ''} ${a.message ?? ''}`,
    ),
  ].join('\n');

/** Passes until every run has ended; a timeout says where each one is. */
async function untilEnded(c: Controller, runs: string[], ms = 300_000): Promise<void> {
  const st = (run: string) => c.runStatus(run)?.status;
  await passUntil(
    c,
    `${runs.join(', ')} to end`,
    () => runs.every((r) => ['Succeeded', 'Failed'].includes(st(r)?.phase ?? '')),
    ms,
  ).catch((e: Error) => {
    throw new Error(`${e.message}\n${runs.map((r) => summary(r, st(r))).join('\n')}`);
  });
}

/** The fingerprint lines of a log (adv exec's own lines about setup and uv are around them). */
const fingerprints = (log: string) => log.split('\n').filter((l) => l.startsWith('fingerprint '));
const SYNCED = /^adv exec: uv sync into /m;
const CACHED = /^adv exec: uv environment [0-9a-f]+ cached$/m;

describe.runIf(available)('the same environment on every backend', () => {
  const every = useEveryBackend('adv-environments-');
  let c: Controller;

  beforeAll(async () => {
    const project = createUvProject(join(every.tmp, 'project'));
    const wheels = buildUvWheelDir(join(every.tmp, 'uv-wheels'));
    const lmod = join(project.dir, 'lmod');
    /** A host's setup: where pip finds uv, and (`withLmod`) the module system the host provides. */
    const hostSetup = (withLmod: boolean) =>
      `  setup: ${JSON.stringify([
        `export PIP_FIND_LINKS=${wheels} PIP_NO_INDEX=1`,
        ...(withLmod ? [`export MODULEPATH=${lmod}/modulefiles; . ${lmod}/init.sh`] : []),
      ])}\n  uv: {version: "${UV_PIN}"}\n`;
    /** An ssh Backend of its own (its own host dir and cache) on the same sshd. */
    const sshHost = (name: string, withLmod: boolean) =>
      sshBackendYaml(every.sshd, name, join(every.tmp, `${name}-root`)) + hostSetup(withLmod);
    // The code: the uv project without the module system, which the hosts provide.
    const code = Object.entries(await filesIn(project.dir)).filter(([rel]) => !rel.startsWith('lmod/'));
    c = await every.start(
      {
        ...Object.fromEntries(code),
        'environments/fp.yaml': ENVIRONMENT,
        'backends/ssh-bare.yaml': sshHost('ssh-bare', false),
        'backends/ssh-twice.yaml': sshHost('ssh-twice', true),
      },
      () => hostSetup(true),
    );
  }, 120_000);

  /** Commits `runs` (name → YAML) to the specs repo and passes until each has ended. */
  async function runToEnd(runs: Record<string, string>, what: string): Promise<void> {
    for (const [name, yaml] of Object.entries(runs)) await every.repo.write(`runs/${name}.yaml`, yaml);
    await every.repo.commit(what);
    c.requestFetch('test');
    await untilEnded(c, Object.keys(runs));
  }
  const st = (run: string) => c.runStatus(run)!.status;

  it('one Run prints a byte-identical fingerprint on local, ssh, slurm, gcp-tpu, vastai, agent and volcano', async () => {
    const runs = BACKEND_KINDS.map((kind) => ({ kind, name: `fp-${kind}` }));
    await runToEnd(
      Object.fromEntries(runs.map((r) => [r.name, runYaml(r.name, [r.kind])])),
      'the fingerprint run on every backend',
    );
    const logs: Partial<Record<BackendKind, string>> = {};
    for (const r of runs) {
      expect(st(r.name), summary(r.name, st(r.name))).toMatchObject({
        phase: 'Succeeded',
        attempts: [expect.objectContaining({ backend: r.kind, phase: 'Succeeded' })],
      });
      logs[r.kind] = await every.logs(r.name);
    }
    // The interpreter inside the synced venv, the exported variable, the module's variable.
    const seen = Object.fromEntries(runs.map((r) => [r.kind, fingerprints(logs[r.kind]!)]));
    expect(seen).toEqual(Object.fromEntries(runs.map((r) => [r.kind, [FINGERPRINT]])));
    // Each host synced the project into its own cache: none borrowed another's environment.
    for (const r of runs) expect(logs[r.kind], `${r.kind}'s log`).toMatch(SYNCED);
  }, 420_000);

  it('a host without the module ends the attempt as SetupFailed naming the step; the next attempt runs on another backend', async () => {
    await runToEnd(
      { moved: runYaml('moved', ['ssh-bare', 'ssh']) },
      'a run whose first backend lacks the module',
    );
    const s = st('moved');
    expect(s, summary('moved', s)).toMatchObject({
      phase: 'Succeeded',
      attempts: [
        { n: 1, backend: 'ssh-bare', class: 'SetupFailed', exitCode: 127 },
        { n: 2, backend: 'ssh', phase: 'Succeeded' },
      ],
    });
    // The step, where it came from, its exit code, and its last lines (the shell's complaint).
    expect(s.attempts[0]!.message).toMatch(
      /^setup step 2 of \d+ \(Environment fp@1\): module load fp exited 127; its last lines:\n[\s\S]*module: not found$/,
    );
    expect(fingerprints(await every.logs('moved', 2))).toEqual([FINGERPRINT]);
  }, 360_000);

  it('a second attempt on the same host syncs nothing', async () => {
    // Its first attempt fails after the fingerprint (a user error); the second runs on the same host.
    await runToEnd(
      {
        twice: runYaml(
          'twice',
          ['ssh-twice'],
          `command: [sh, -c, 'python3 fingerprint.py && [ "$ADV_ATTEMPT" -ge 2 ]']`,
          '  policy: {maxAttempts: 2, backoff: {initialSec: 0}, failoverCooldownSec: 0}\n',
        ),
      },
      'a run that needs two attempts on one host',
    );
    const s = st('twice');
    expect(s, summary('twice', s)).toMatchObject({
      phase: 'Succeeded',
      attempts: [
        { n: 1, backend: 'ssh-twice', phase: 'Failed', exitCode: 1 },
        { n: 2, backend: 'ssh-twice', phase: 'Succeeded' },
      ],
    });
    const [first, second] = [await every.logs('twice', 1), await every.logs('twice', 2)];
    expect(fingerprints(first)).toEqual([FINGERPRINT]);
    expect(fingerprints(second)).toEqual([FINGERPRINT]);
    expect(first).toMatch(SYNCED);
    expect(second).toMatch(CACHED);
    expect(second).not.toMatch(SYNCED);
  }, 360_000);
});
