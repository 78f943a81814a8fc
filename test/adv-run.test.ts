/**
 * `adv run`: a run here, in the foreground, through the adv exec contract and with no controller.
 * The CLI runs as a user starts it (the compiled `adv`, its own process), so Ctrl-C is a real
 * SIGINT to it: the toy workload gets its stop signal, writes a last checkpoint, which is uploaded;
 * running the same command again resumes from that step.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { git } from '../controller/git/native.js';
import { EXEC_FILE, readJson, type ExecRecord } from '../runtime/records.js';
import { removeTree } from './helpers/io.js';
import { pythonAvailable } from './helpers/python/python.js';
import {
  createUvProject,
  expectedFingerprint,
  FINGERPRINT_ENTRY,
  uvBinary,
} from './helpers/python/uv-project.js';
import { waitFor } from './helpers/wait.js';

const ADV = join(import.meta.dirname, '..', 'dist', 'cli', 'adv.js');
const TRAIN = join(import.meta.dirname, '..', 'examples', 'toy-train', 'train.py');

let tmp: string;
/** A code repo with the toy workload in it: where a researcher types `adv run`. */
let project: string;
/** Where `adv run` keeps its job dirs and (no Storage spec) its store, in that repo. */
let dataDir: string;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-run-'));
  project = join(tmp, 'project');
  await mkdir(project);
  await git(['init', '-q', '-b', 'main'], { cwd: project });
  await copyFile(TRAIN, join(project, 'train.py'));
  dataDir = join(project, '.git', 'adventuretime');
  env = { ...process.env, HOME: tmp, XDG_DATA_HOME: join(tmp, 'share'), ADV_STORE: '' };
  delete env.ADV_STORE;
});
afterAll(() => removeTree(tmp));

interface Started {
  child: ChildProcess;
  out: () => string;
  err: () => string;
  /** Its exit code once its output has ended; null when it was killed by a signal. */
  code: Promise<number | null>;
  exited: Promise<number | null>;
}
const started: Started[] = [];

/** `adv ARGS` in `cwd`, its output collected. */
function adv(args: string[], cwd = project): Started {
  const child = spawn(process.execPath, [ADV, ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr!.on('data', (b: Buffer) => (err += b.toString()));
  // Its exit, then the end of its output: adv exec (its child, in a group of its own) writes to the
  // same pipes, and is done before adv run exits unless something went wrong.
  const exited = new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
  const closed = new Promise<void>((r) => child.once('close', () => r()));
  const code = exited.then(async (c) => (c === null ? c : (await closed, c)));
  const s = { child, out: () => out, err: () => err, code, exited };
  started.push(s);
  return s;
}

/** A run that failed half-way leaves nothing behind: adv run, its adv exec, the workload's group. */
afterEach(async () => {
  const jobs = join(dataDir, 'run', 'jobs');
  for (const job of await readdir(jobs).catch(() => [])) {
    const exec = readJson<ExecRecord>(join(jobs, job), EXEC_FILE);
    for (const pid of [exec?.pid, exec?.childPid])
      try {
        if (pid) process.kill(-pid, 'SIGKILL');
      } catch {
        // gone
      }
  }
  for (const s of started.splice(0)) {
    if (s.child.exitCode === null && s.child.signalCode === null) s.child.kill('SIGKILL');
    await s.exited;
  }
});

const runNameIn = (err: string) => /adv run: run (\S+), attempt (\d+)/.exec(err);
const manifest = (run: string, step: number) =>
  join(dataDir, 'store', 'runs', run, 'ckpt', String(step), 'manifest.json');

describe('adv run -- COMMAND', () => {
  it('Ctrl-C is a preemption: a last checkpoint is committed, and running it again resumes from it', async () => {
    const hold = join(tmp, 'hold');
    await writeFile(hold, '');
    const cmd = [
      'python3',
      'train.py',
      '--steps',
      '40',
      '--ckpt-every',
      '10',
      '--hold-file',
      hold,
      '--hold-at',
      '25',
    ];
    const first = adv(['run', '--grace', '60s', '--', ...cmd]);
    const named = await waitFor(() => runNameIn(first.err()), {
      what: 'adv run to say the run name',
      giveUpIf: () => first.child.exitCode !== null && `adv run exited: ${first.err()}`,
    });
    const run = named[1]!;
    expect(named[2]).toBe('1');
    // Step 20 is committed and the workload holds at step 25, mid-way to its next checkpoint.
    await waitFor(() => existsSync(manifest(run, 20)) && first.out().includes('checkpoint 20 written'), {
      what: 'checkpoint 20 in the store',
      timeoutMs: 60_000,
      giveUpIf: () => first.child.exitCode !== null && `adv run exited: ${first.err()}`,
      detail: () => first.out() + first.err(),
    });
    first.child.kill('SIGINT');
    expect(await first.code).toBe(130);
    // The workload got its stop signal mid-way (past step 25) and checkpointed the step it was at;
    // adv exec uploaded it.
    const stopped = Number(/stopping at step (\d+) on signal 15/.exec(first.out())?.[1]);
    expect(stopped).toBeGreaterThan(25);
    expect(stopped).toBeLessThan(30);
    expect(existsSync(manifest(run, stopped))).toBe(true);
    expect(first.err()).toContain(`the latest committed checkpoint is step ${stopped}`);
    expect(first.err()).toContain(`Resume with: adv run --name ${run} -- python3 train.py`);

    // The same command, in the same directory: the same run, its next attempt, from step 25.
    await rm(hold);
    const again = adv(['run', '--', ...cmd]);
    expect(await again.code, again.err()).toBe(0);
    expect(runNameIn(again.err())?.slice(1)).toEqual([run, '2']);
    expect(again.out()).toContain(`resumed from step ${stopped}`);
    expect(again.out()).not.toContain('starting from scratch');
    expect(again.out()).toContain('done: step 40');
    expect(existsSync(manifest(run, 40))).toBe(true);
  });

  it('a second Ctrl-C kills a workload that does not stop on its signal, at once; a run runs here once at a time', async () => {
    // The workload notes its stop signal and goes on: only the second Ctrl-C can end it.
    const script = 'trap "echo stop-notice" TERM; echo ready; while :; do sleep 0.1; done';
    const r = adv(['run', '--grace', '10m', '--', 'sh', '-c', script]);
    const gone = () => r.child.exitCode !== null && `adv run exited: ${r.err()}`;
    await waitFor(() => r.out().includes('ready'), { what: 'the workload to start', giveUpIf: gone });
    // The same run again, while it runs: refused, as two attempts would write one run's checkpoints.
    const twice = adv(['run', '--', 'sh', '-c', script]);
    expect(await twice.code).toBe(6);
    expect(twice.err()).toMatch(/run sh-[0-9a-f]{8} is running here already \(attempt 1, adv exec pid \d+\)/);
    r.child.kill('SIGINT');
    await waitFor(() => r.out().includes('stop-notice'), {
      what: 'the workload to get its stop signal',
      giveUpIf: gone,
      detail: () => r.err(),
    });
    expect(r.err()).toContain('Ctrl-C again to kill it now');
    r.child.kill('SIGINT');
    expect(await r.code).toBe(130);
    expect(r.err()).toContain('killing the workload now');
    expect(r.err()).toContain('no checkpoint was committed');
  });

  it("exits with the command's own exit code, and the same command in another directory is another run", async () => {
    const other = join(tmp, 'elsewhere');
    await mkdir(other, { recursive: true });
    const cmd = ['sh', '-c', 'echo "attempt $ADV_ATTEMPT of $ADV_RUN in $(pwd)"; exit 3'];
    const here = adv(['run', '--', ...cmd]);
    expect(await here.code).toBe(3);
    const there = adv(['run', '--', ...cmd], other);
    expect(await there.code).toBe(3);
    const a = runNameIn(here.err())![1]!;
    const b = runNameIn(there.err())![1]!;
    expect(a).not.toBe(b);
    expect(here.out()).toContain(`attempt 1 of ${a} in ${project}`);
    expect(there.out()).toContain(`attempt 1 of ${b} in ${other}`);
  });
});

describe('adv run NAME and -f FILE', () => {
  let specs: string;
  beforeAll(async () => {
    specs = join(tmp, 'specs');
    await mkdir(join(specs, 'runs'), { recursive: true });
    await mkdir(join(specs, 'environments'), { recursive: true });
    await mkdir(join(specs, 'src'), { recursive: true });
    await git(['init', '-q', '-b', 'main'], { cwd: specs });
    await writeFile(
      join(specs, 'environments', 'greet.yaml'),
      `apiVersion: adventuretime.dev/v1alpha1
kind: Environment
metadata: {name: greet}
spec:
  version: 1
  env: {GREETING: hello}
  setup: ['export FROM_SETUP="$GREETING from setup"']
`,
    );
    // Not committed: adv run runs the work tree as it is.
    await writeFile(
      join(specs, 'runs', 'greet.yaml'),
      `apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata: {name: greet}
spec:
  environment: greet
  backendSelector: {order: [somewhere-else]}
  workingDir: src
  env: {WHO: world}
  command: ['sh', '-c', 'echo "$FROM_SETUP, $WHO, in $(basename "$(pwd)"), attempt $ADV_ATTEMPT"']
`,
    );
  });

  it("runs a Run of the specs repo here, in its Environment, in its workingDir, in the repo's Storage", async () => {
    await writeFile(
      join(specs, 'storage.yaml'),
      `apiVersion: adventuretime.dev/v1alpha1
kind: Storage
metadata: {name: default}
spec: {type: file, file: {path: ${join(tmp, 'lab-store')}}}
`,
    );
    const r = adv(['run', 'greet', '--env', 'WHO=you'], specs);
    expect(await r.code, r.err()).toBe(0);
    expect(r.out()).toContain('hello from setup, you, in src, attempt 1');
    expect(existsSync(join(tmp, 'lab-store', 'runs', 'greet', 'attempts', '1'))).toBe(true);
    const again = adv(['run', 'greet'], specs);
    expect(await again.code, again.err()).toBe(0);
    expect(again.out()).toContain('hello from setup, world, in src, attempt 2');
  });

  it('runs a spec file; a bad one is refused at its file and line, and nothing runs', async () => {
    const ok = adv(['run', '-f', 'runs/greet.yaml', '--name', 'greet-file'], specs);
    expect(await ok.code, ok.err()).toBe(0);
    expect(ok.out()).toContain('hello from setup, world, in src, attempt 1');
    await writeFile(
      join(specs, 'bad.yaml'),
      `apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata: {name: bad}
spec:
  command: ['true']
  policy: {maxAttempts: lots}
`,
    );
    const bad = adv(['run', '-f', 'bad.yaml'], specs);
    expect(await bad.code).toBe(1);
    expect(bad.err()).toMatch(/bad\.yaml:6:\d+/);
    expect(bad.err()).toContain('is invalid; nothing was run');
    // --env is checked as a spec's env is.
    const reserved = adv(['run', '-f', 'runs/greet.yaml', '--env', 'ADV_RUN=x'], specs);
    expect(await reserved.code).toBe(1);
    expect(reserved.err()).toContain('(adv run options)');
    const unknown = adv(['run', 'nope'], specs);
    expect(await unknown.code).toBe(3);
    expect(unknown.err()).toContain('no Run nope');
    expect(unknown.err()).toContain('greet');
  });

  it("gives the workload the spec's secrets from this shell, masked in its output; a missing one stops it first", async () => {
    await writeFile(
      join(specs, 'secret.yaml'),
      `apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata: {name: secret}
spec:
  secrets: [LAB_TOKEN]
  command: ['sh', '-c', 'echo "token=$LAB_TOKEN length=\${#LAB_TOKEN}"']
`,
    );
    const missing = adv(['run', '-f', 'secret.yaml'], specs);
    expect(await missing.code).toBe(2);
    expect(missing.err()).toContain('secret LAB_TOKEN is not set: looked in your environment');
    expect(missing.err()).not.toContain('adv run: run secret');
    env.LAB_TOKEN = 'swordfish-1234';
    try {
      const r = adv(['run', '-f', 'secret.yaml'], specs);
      expect(await r.code, r.err()).toBe(0);
      expect(r.out()).toContain('token=*** length=14');
      expect(r.out() + r.err()).not.toContain('swordfish');
    } finally {
      delete env.LAB_TOKEN;
    }
  });
});

// uv is the project's .venv's (requirements/ci.txt).
describe.runIf(pythonAvailable('adv run of a uv project'))('adv run of a uv project', () => {
  it("runs the workload in the project's uv environment, after its Environment's setup", async () => {
    const project = createUvProject(join(tmp, 'uv-project'));
    await git(['init', '-q', '-b', 'main'], { cwd: project.dir });
    await mkdir(join(project.dir, 'runs'));
    await mkdir(join(project.dir, 'environments'));
    await writeFile(
      join(project.dir, 'environments', 'fp.yaml'),
      `apiVersion: adventuretime.dev/v1alpha1
kind: Environment
metadata: {name: fp}
spec:
  version: 1
  setup: ['export ADV_FP_VAR={{ GREETING }}']
`,
    );
    await writeFile(
      join(project.dir, 'runs', 'fp.yaml'),
      `apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata: {name: fp}
spec:
  environment: fp
  env: {GREETING: from the spec}
  entry: ${FINGERPRINT_ENTRY}
`,
    );
    // adv exec finds uv on the PATH the run starts with (the one the local backend passes on).
    const saved = env.PATH;
    env.PATH = `${dirname(uvBinary())}:${saved}`;
    try {
      const r = adv(['run', 'fp'], project.dir);
      expect(await r.code, r.err()).toBe(0);
      expect(r.err()).toMatch(/^adv exec: uv sync into /m);
      expect(r.out()).toContain(expectedFingerprint({ ADV_FP_VAR: 'from the spec' }));
    } finally {
      env.PATH = saved;
    }
  });
});

describe('adv run with inputs', () => {
  it('gives the job ADV_DATASETS for the version adv dataset push recorded in the specs here', async () => {
    const specs = join(tmp, 'specs-inputs');
    const store = join(tmp, 'inputs-store');
    const data = join(tmp, 'inputs-data');
    await mkdir(join(specs, 'runs'), { recursive: true });
    await mkdir(data, { recursive: true });
    await writeFile(join(data, 'vocab.txt'), 'a b c\n');
    await git(['init', '-q', '-b', 'main'], { cwd: specs });
    await writeFile(
      join(specs, 'storage.yaml'),
      `apiVersion: adventuretime.dev/v1alpha1\nkind: Storage\nmetadata: {name: default}\nspec: {type: file, file: {path: ${store}}}\n`,
    );
    await writeFile(
      join(specs, 'runs', 'reads.yaml'),
      `apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata: {name: reads}
spec:
  inputs: [{dataset: vocab, as: words}]
  command: ['sh', '-c', 'echo "datasets: $ADV_DATASETS"']
`,
    );
    const pushed = adv(['dataset', 'push', data, 'vocab'], specs);
    expect(await pushed.code, pushed.err()).toBe(0);
    expect(pushed.out()).toContain(`vocab@1 pushed to file://${store}/datasets/vocab/`);
    const r = adv(['run', 'reads'], specs);
    expect(await r.code, r.err()).toBe(0);
    const line = r
      .out()
      .split('\n')
      .find((l) => l.startsWith('datasets: '));
    expect(JSON.parse(line!.slice('datasets: '.length))).toMatchObject([
      {
        as: 'words',
        dataset: 'vocab@1',
        source: { store: { prefix: expect.stringMatching(/^datasets\/vocab\/[0-9a-f]{64}\/$/) } },
      },
    ]);
  });
});
