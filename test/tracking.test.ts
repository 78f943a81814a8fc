/**
 * Tracking continuity with a real W&B client (wandb from PyPI, offline mode): a run on the local
 * backend is preempted after its first checkpoint and resumed as attempt 2; both attempts log to
 * the same W&B run id (the controller's ADV_TRACKING_ID, given to W&B as WANDB_RUN_ID with
 * WANDB_RESUME=allow), and W&B's own run files say so.
 */
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Controller } from '../controller/controller.js';
import { FILE_STORAGE } from './helpers/backends/kinds.js';
import { removeTree } from './helpers/io.js';
import { PYTHON, pythonAvailable } from './helpers/python/python.js';
import { LOCAL_BACKEND, makeWorkTree, runYaml } from './helpers/git/specs-repo.js';

const FIXTURES = join(import.meta.dirname, 'fixtures', 'tracking');
/** One attempt (submit, start Python and wandb, run, observe) on a loaded machine: a ceiling, not a window. */
const ATTEMPT_MS = 90_000;

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-tracking-'));
});
afterAll(() => removeTree(tmp));

interface Seen {
  id: string;
  tracking: string;
  start: number;
}
interface WandbFile {
  file: string;
  run_id: string;
  resume: boolean;
  steps: number[];
}

describe.runIf(pythonAvailable('the W&B tracking-id test'))(
  'W&B across a preemption',
  { timeout: 3 * ATTEMPT_MS },
  () => {
    it('both attempts log to one W&B run id, the second asking W&B to resume it', async () => {
      const wandbDir = join(tmp, 'wandb-out');
      const env = {
        WANDB_MODE: 'offline',
        WANDB_SILENT: 'true',
        WANDB_DIR: wandbDir,
        WANDB_CONFIG_DIR: join(tmp, 'wandb-config'),
        WANDB_CACHE_DIR: join(tmp, 'wandb-cache'),
        WANDB_DATA_DIR: join(tmp, 'wandb-data'),
      };
      const wt = await makeWorkTree({
        'backends/local.yaml': LOCAL_BACKEND,
        'storage.yaml': FILE_STORAGE,
        'train_wandb.py': readFileSync(join(FIXTURES, 'train_wandb.py'), 'utf8'),
        'runs/tracked.yaml': runYaml(
          'tracked',
          [PYTHON, 'train_wandb.py'],
          `  env: ${JSON.stringify(env)}\n`,
        ),
      });
      await mkdir(wandbDir, { recursive: true });
      const c = await Controller.create({ repo: wt.dir, dataDir: join(tmp, 'data'), pollIntervalMs: 100 });
      try {
        await c.runUntilIdle({ timeoutMs: 2 * ATTEMPT_MS });
        const st = c.runStatus('tracked')!.status;
        expect(
          st.attempts.map((a) => [a.class, a.startStep]),
          JSON.stringify(st, null, 1),
        ).toEqual([
          ['Preempted', undefined],
          ['Succeeded', 1],
        ]);
        const seen = (n: number) =>
          JSON.parse(readFileSync(join(wandbDir, `attempt-${n}.json`), 'utf8')) as Seen;
        const [one, two] = [seen(1), seen(2)];
        expect(one.tracking).toMatch(/^tracked-[0-9a-f]{8}$/);
        expect(one).toMatchObject({ id: one.tracking, start: 0 });
        expect(two).toMatchObject({ id: one.tracking, tracking: one.tracking, start: 1 });

        // W&B's own files: one offline run dir per attempt, both of the same run, both resumable.
        const runs = join(wandbDir, 'wandb');
        const dirs = readdirSync(runs)
          .filter((d) => d.startsWith('offline-run-'))
          .sort();
        expect(dirs).toHaveLength(2);
        for (const d of dirs) expect(d.endsWith(`-${one.id}`)).toBe(true);
        const files = dirs.map((d) => join(runs, d, `run-${one.id}.wandb`));
        const { stdout } = await promisify(execFile)(PYTHON, [join(FIXTURES, 'read_wandb.py'), ...files]);
        const read = JSON.parse(stdout) as WandbFile[];
        expect(read.map((r) => [r.run_id, r.resume, r.steps])).toEqual([
          [one.id, true, [1]],
          [one.id, true, [2, 3]],
        ]);
      } finally {
        await c.stop();
        await wt.cleanup();
      }
    });
  },
);
