/**
 * Retention and retry policy end to end: a run with `policy.checkpoints` on the local backend,
 * whose adv exec deletes what the policy does not keep after each commit (keepBest judged by the
 * metric the workload logged); `adv ckpt gc` dry and for real on a `file://` store and on a real
 * S3-protocol server (s3rver); `policy.retryOn` failing a run at once on an exit code it does
 * not list.
 */
import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/program.js';
import { Controller } from '../controller/controller.js';
import { attemptPrefix, listCheckpoints, stepPrefix, uploadCheckpoint } from '../runtime/checkpoint.js';
import { metricsPrefix } from '../runtime/metrics.js';
import { openStore, type ObjectStore } from '../runtime/store/index.js';
import { FILE_STORAGE } from './helpers/backends/kinds.js';
import { captureIo, removeTree } from './helpers/io.js';
import { startS3, type S3Server } from './helpers/servers/s3.js';
import { LOCAL_BACKEND, makeWorkTree, runYaml, type WorkTree } from './helpers/git/specs-repo.js';

/** One attempt of a small run on a loaded machine (submit, run, observe, commit): a ceiling, not a window. */
const ATTEMPT_MS = 60_000;

let tmp: string;
let s3: S3Server;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-retention-'));
  s3 = await startS3();
  // The SDK reads the credentials from the environment when a request is signed.
  Object.assign(process.env, s3.env);
}, 120_000);
afterAll(async () => {
  for (const k of Object.keys(s3?.env ?? {})) delete process.env[k];
  await s3?.stop();
  await removeTree(tmp);
});

async function adv(cwd: string, args: string[], env: NodeJS.ProcessEnv = {}) {
  const io = captureIo({ ...process.env, HOME: tmp, XDG_CACHE_HOME: join(tmp, 'cache'), ...env }, cwd);
  const code = await runCli(args, io);
  return { code, out: io.out(), err: io.err() };
}

const committedSteps = async (store: ObjectStore, run: string) =>
  (await listCheckpoints(store, run)).filter((i) => i.manifest && !i.problem).map((i) => i.step);

/**
 * A workload that commits steps 10..50, each after logging its loss, and waits for each commit
 * before the next (so no step is superseded before upload). The metric line goes to
 * `$ADV_METRICS_FILE`, which adv exec ships into the store; where no adv exec sets it yet (before
 * the metrics shipping lands), the workload writes the line where adv exec would ship it
 * (`metricsPrefix`) itself: what is tested here is retention reading it.
 */
const KEEP_SCRIPT = `set -eu
m="$STORE/runs/keep/attempts/$ADV_ATTEMPT/metrics"
for pair in 10:0.9 20:0.3 30:0.5 40:0.6 50:0.7; do
  s=\${pair%%:*}; loss=\${pair#*:}
  line=$(printf '{"step":%s,"metrics":{"loss":%s}}' "$s" "$loss")
  if [ -n "\${ADV_METRICS_FILE:-}" ]; then echo "$line" >> "$ADV_METRICS_FILE"
  else mkdir -p "$m"; echo "$line" > "$m/part-0000$s"; fi
  mkdir -p "$ADV_CKPT_DIR/$s"; echo "$s" > "$ADV_CKPT_DIR/$s/weights"; touch "$ADV_CKPT_DIR/$s/COMMITTED"
  i=0; while [ ! -f "$STORE/runs/keep/ckpt/$s/manifest.json" ]; do
    i=$((i+1)); [ "$i" -lt 2400 ] || { echo "step $s never committed"; exit 9; }; sleep 0.05
  done
done`;

describe('policy.checkpoints and policy.retryOn on the local backend', { timeout: 4 * ATTEMPT_MS }, () => {
  let wt: WorkTree;
  let c: Controller;
  const dataDir = () => join(tmp, 'data-policy');

  beforeAll(async () => {
    const store = join(dataDir(), 'store');
    wt = await makeWorkTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'storage.yaml': FILE_STORAGE,
      'runs/keep.yaml': runYaml(
        'keep',
        ['sh', '-c', KEEP_SCRIPT],
        `  env: {STORE: ${JSON.stringify(store)}}\n  policy:\n    checkpoints: {keepLast: 2, keepBest: {metric: loss, mode: min}}\n`,
      ),
      // Exit 75 (EX_TEMPFAIL) is worth another attempt; the second attempt's exit 2 is not.
      'runs/picky.yaml': runYaml(
        'picky',
        ['sh', '-c', '[ "$ADV_ATTEMPT" -ge 2 ] && exit 2; exit 75'],
        '  policy: {maxAttempts: 5, retryOn: {exitCodes: [75]}, backoff: {initialSec: 0.2}}\n',
      ),
    });
    c = await Controller.create({ repo: wt.dir, dataDir: dataDir(), pollIntervalMs: 100 });
    await c.runUntilIdle({ timeoutMs: 3 * ATTEMPT_MS });
  }, 4 * ATTEMPT_MS);
  afterAll(async () => {
    await c?.stop();
    await wt?.cleanup();
  });

  it('adv exec keeps the newest 2 and the best step by the logged loss, and deletes the rest after each commit', async () => {
    const st = c.runStatus('keep')?.status;
    expect(st?.phase, JSON.stringify(st, null, 1)).toBe('Succeeded');
    const store = await openStore(`file://${join(dataDir(), 'store')}`);
    // 20 has the lowest loss (0.3); 40 and 50 are the newest two; 10 and 30 match no rule.
    expect(await committedSteps(store, 'keep')).toEqual([50, 40, 20]);
    const left: string[] = [];
    for await (const o of store.list('runs/keep/ckpt/')) left.push(o.key);
    expect(left.filter((k) => /ckpt\/(10|30)\//.test(k))).toEqual([]);
    // adv exec says what it deleted and why, in the job's output.
    const output = await readFile(
      join(dataDir(), 'local', 'local', 'jobs', 'adv-keep-1', 'output.log'),
      'utf8',
    );
    expect(output).toMatch(
      /retention: deleted checkpoint 10 \(not among the newest 2, not among the 1 best by loss\)/,
    );
  });

  it('retries an exit code policy.retryOn lists and fails the run at once on one it does not', () => {
    const st = c.runStatus('picky')!.status;
    expect(st.attempts.map((a) => [a.exitCode, a.class])).toEqual([
      [75, 'UserError'],
      [2, 'UserError'],
    ]);
    expect(st).toMatchObject({ phase: 'Failed', reason: 'ExitCodeNotRetryable' });
    expect(st.message).toMatch(
      /attempt 2 on local exited 2, which policy.retryOn.exitCodes \(75\) does not list/,
    );
    expect(st.conditions.find((x) => x.type === 'Retryable')).toMatchObject({ status: 'False' });
  });
});

/** Steps 10..50 committed, loss logged at each, and an upload that never finished (step 60). */
async function seed(store: ObjectStore, run: string): Promise<void> {
  const losses: Record<number, number> = { 10: 0.8, 20: 0.2, 30: 0.4, 40: 0.5, 50: 0.6 };
  for (const [step, loss] of Object.entries(losses)) {
    const dir = join(tmp, `seed-${run}-${step}`);
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'weights'), `step ${step}`);
    await uploadCheckpoint(store, { run, step: Number(step), attempt: 1, dir });
    await store.put(
      `${metricsPrefix(run, 1)}part-0000${step}`,
      JSON.stringify({ step: Number(step), metrics: { loss } }) + '\n',
    );
  }
  // A real attempt's folder holds its records beside metrics/ (s3rver lists a folder only when
  // an object lies directly in it; S3 itself does not care).
  await store.put(`${attemptPrefix(run, 1)}exit.json`, JSON.stringify({ exitCode: 0 }) + '\n');
  await store.put(`${stepPrefix(run, 60)}weights`, 'half an upload');
}

describe('adv ckpt gc', { timeout: 4 * ATTEMPT_MS }, () => {
  it.each(['file', 's3'] as const)(
    'on a %s store: --dry-run prints the plan and deletes nothing; then it deletes what the policy does not keep',
    async (kind) => {
      const url =
        kind === 'file'
          ? `file://${await mkdtemp(join(tmp, 'store-'))}`
          : s3.url(`gc${Math.random().toString(36).slice(2, 8)}`);
      const env = kind === 's3' ? s3.env : {};
      const store = await openStore(url, { ...process.env, ...env });
      await seed(store, 'r');
      // The run's policy is in its spec: adv ckpt gc reads it from the specs repo it runs in.
      const wt = await makeWorkTree({
        'backends/local.yaml': LOCAL_BACKEND,
        'runs/r.yaml': runYaml(
          'r',
          'true',
          '  policy: {checkpoints: {keepLast: 1, keepBest: {metric: loss, mode: min}}}\n',
        ),
      });
      try {
        const dry = await adv(wt.dir, ['ckpt', 'gc', 'r', '--store', url, '--grace', '0s', '--dry-run'], env);
        expect(dry.code, dry.err).toBe(0);
        expect(dry.out).toMatch(/^r: keep 50 \(the newest committed; among the newest 1\)$/m);
        expect(dry.out).toMatch(/^r: keep 20 \(the best by loss \(min: 0.2\)\)$/m);
        expect(dry.out).toMatch(
          /^r: would delete 40 \(not among the newest 1, not among the 1 best by loss\)$/m,
        );
        expect(dry.out).toMatch(/^r: would delete 60 \(no manifest that verifies/m);
        expect(await committedSteps(store, 'r')).toEqual([50, 40, 30, 20, 10]);

        const real = await adv(wt.dir, ['ckpt', 'gc', 'r', '--store', url, '--grace', '0s'], env);
        expect(real.code, real.err).toBe(0);
        expect(real.out).toMatch(/^r: deleted 10 /m);
        expect(await committedSteps(store, 'r')).toEqual([50, 20]);
        const left: string[] = [];
        for await (const o of store.list('runs/r/ckpt/')) left.push(o.key);
        expect(left.sort()).toEqual([
          'runs/r/ckpt/20/manifest.json',
          'runs/r/ckpt/20/weights',
          'runs/r/ckpt/50/manifest.json',
          'runs/r/ckpt/50/weights',
        ]);

        // Flags replace the spec's policy: the best alone (and the newest, always) stay.
        const flags = await adv(wt.dir, ['ckpt', 'gc', 'r', '--store', url, '--keep-best', 'loss:max'], env);
        expect(flags.code, flags.err).toBe(0);
        expect(await committedSteps(store, 'r')).toEqual([50]);
      } finally {
        await wt.cleanup();
      }
    },
  );

  it('says what is wrong with a --keep-best it cannot read', async () => {
    const r = await adv(tmp, ['ckpt', 'gc', 'r', '--store', `file://${tmp}/none`, '--keep-best', 'loss']);
    expect(r.code).not.toBe(0);
    expect(r.err).toMatch(/--keep-best takes METRIC:min or METRIC:max/);
  });
});
