/**
 * Injection fuzz suite: 1,200 generated hostile strings (test/helpers/fuzz/hostile.ts: quotes, `$()`,
 * backticks, `${IFS}`, `;` `&&` `|`, newlines and CR, NUL, `../` and absolute paths, printf
 * formats, leading `-`, `#SBATCH` lines, 100 KiB and around the 128 KiB argument limit, unicode,
 * ANSI escapes, globs) in every spec field that takes a string. Each must be refused with the file
 * and line of the value, or arrive as one literal argument; nothing may run (every string that
 * could carries its own marker file, and none may exist afterwards).
 *
 * Field → sink, read from the code (each FieldCase in helpers/fuzz/fuzz-fields.ts names its sink):
 * - Run `metadata.name`, DAG node ids → job name `adv-<run>-<n>` (`--job-name`, job dir, status file,
 *   store keys `runs/<run>/…`): DNS-1123 pattern.
 * - Run `command` as a list → argv: `shellJoin` into run.sh (ssh, slurm), spawn argv (local), then
 *   execve by adv exec. NUL and > 128 KiB refused (NulByte, ArgumentTooLarge). EXECUTED below.
 * - Run `env` values (and DAG `defaults.env`, node `run.env`) → env file `export K=<shellQuote(v)>`
 *   (ssh, slurm), spawn env (local). EXECUTED below. Names: ENV_NAME pattern, `ADV_*` reserved.
 * - Run `workingDir` → ADV_WORKDIR (quoted) → `cd "./$ADV_WORKDIR"` in run.sh; `..`/absolute
 *   refused (PathEscape). EXECUTED below (real dirs with hostile names in the code tree).
 * - Run `secrets`, Backend `passEnv`, DAG input names → variable names: ENV_NAME pattern.
 * - DAG output names → ADV_OUTPUTS, store keys `runs/<run>/outputs/<name>/`, artifact dirs: pattern.
 * - Run `parallelism` → ADV_PARALLELISM (JSON, quoted): size-checked; `resources.memory` →
 *   `#SBATCH --mem` (pattern); `resources.gpuType` → gresMapping lookup; `tpuType`, `clusters`,
 *   Backend `cluster`, `capabilities.gpuTypes`, partition `gpuType`/`maxTime`, `paths.log`,
 *   labels: no shell, path or remote sink.
 * - Run `code.ref` → `git rev-parse --verify --quiet <ref>^{commit}` (argv, controller): EXECUTED
 *   below; `code.path` → git tree walk by segment, `git archive <commit>:<path>`; `code.repo` → `git fetch` of an http(s) URL (argv).
 * - Backend `sbatchDefaults.*` → `#SBATCH --<k>=<v>` lines (unquoted): patterns; `constraint` and the
 *   slurm `paths.root/work` (`#SBATCH --output=<dir>/slurm-%j.out`) by SbatchUnsafeValue; `extra` →
 *   one `#SBATCH` line each (admin-chosen sbatch flags by design); `gresMapping` → `--gres`.
 * - Backend `paths.root/work` (ssh) → quoted `sh -c` arguments and the env file; `connection.*` →
 *   `ssh -G` argv and ssh2 on the controller (a leading `-` refused: OptionLikeValue);
 *   `local.workDir`, Storage paths/URL → controller paths, ADV_STORE (quoted). Every Backend and
 *   Storage string: NUL refused.
 * - Shell code BY DESIGN, not injection targets: `command` as a string (`sh -c`), Run and Backend
 *   `setup` steps (run by adv exec from `ADV_SETUP`); only NUL, size and template names are checked there.
 *
 * The execution layer runs real jobs through the real controller on a real sshd and a real SLURM,
 * ~100–250 strings a job. Counts go to the console (one line) and test-results/injection-fuzz.json.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { Controller } from '../controller/controller.js';
import { SlurmBackend } from '../controller/backends/slurm/adapter.js';
import { defaultSshTransport } from '../controller/transport/ssh.js';
import type { CodeExporter, JobRequest } from '../controller/backends/types.js';
import { NativeGit } from '../controller/git/native.js';
import { resolveCodeRefs } from '../controller/reconcile/desired.js';
import { SpecLoader } from '../controller/spec/loader.js';
import { MAX_ARG_BYTES } from '../controller/spec/rules.js';
import { SLURM_INFRA, slurmAvailable, slurmBackendYaml, sshBackendYaml } from './helpers/backends/kinds.js';
import {
  deliveries,
  fitsRules,
  packRuns,
  runWaves,
  sshLaunchBytes,
  sshWaves,
  workingDirSample,
  type Delivery,
  type FuzzRun,
} from './helpers/fuzz/fuzz-exec.js';
import { FIELDS, verdict, type FieldCase, type Verdict } from './helpers/fuzz/fuzz-fields.js';
import { hostileStrings, type Hostile } from './helpers/fuzz/hostile.js';
import { haveSshd, startSshd, type Sshd } from './helpers/servers/sshd.js';
import { makeWorkTree, type WorkTree } from './helpers/git/specs-repo.js';

const SEED = 0x5eed;
/** What the launch commands of one wave of ssh Runs may take together (sshd passes ≤ 128 KiB). */
const SSH_WAVE_BYTES = 110 * 1024;
const MARKERS = markerDir();
const STRINGS = hostileStrings({ markerDir: MARKERS, seed: SEED, count: 1200 });
const started = performance.now();

const sshOk = haveSshd();
if (!sshOk && process.env.CI)
  throw new Error('the injection fuzz suite needs sshd in CI: apt-get install openssh-server');
if (!sshOk) console.warn('SKIPPING the execution layer of the injection fuzz suite: no /usr/sbin/sshd here');
const slurmOk = sshOk && slurmAvailable('the SLURM part of the injection fuzz suite');

/**
 * The marker dir: a fixed plain name (it is pasted into the payloads, so the strings are the same
 * bytes on every run), emptied first; integration runs never overlap (they hold a lock).
 */
function markerDir(): string {
  const dir = join(tmpdir(), 'adv-fuzz-markers');
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  return dir;
}

const report = {
  seed: SEED,
  strings: STRINGS.length,
  withMarkers: STRINGS.filter((h) => h.markers.length).length,
  validation: {
    fields: 0,
    checks: 0,
    refused: 0,
    accepted: 0,
    unlocated: 0,
    byField: {} as Record<string, object>,
  },
  execution: {} as Record<string, { tried: number; delivered: number; notDelivered: number; runs: number }>,
  controllerArgv: { codeRefs: 0, resolved: 0 },
  markersFound: [] as string[],
  escapes: 0,
  notDelivered: [] as { id: string; sink: string; run: string; bytes: number; why?: string }[],
  durationMs: 0,
};

/** Verdicts of the validation layer, by field and string. */
const verdicts = new Map<string, Verdict[]>();
const accepted = (field: string): Hostile[] => STRINGS.filter((_, i) => verdicts.get(field)?.[i]?.accepted);

afterAll(() => {
  report.markersFound = readdirSync(MARKERS);
  report.escapes = report.markersFound.length;
  report.durationMs = Math.round(performance.now() - started);
  const out = join(import.meta.dirname, '..', 'test-results');
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, 'injection-fuzz.json'), JSON.stringify(report, null, 2) + '\n');
  const v = report.validation;
  const ex = Object.entries(report.execution)
    .map(([k, e]) => `${k} ${e.delivered}/${e.tried} literal in ${e.runs} jobs`)
    .join(', ');
  console.log(
    `injection fuzz: ${report.strings} strings × ${v.fields} fields = ${v.checks} checks; validation refused ${v.refused} (unlocated ${v.unlocated}), accepted ${v.accepted}; execution: ${ex || 'skipped'}; not delivered ${report.notDelivered.length}; escapes ${report.escapes}`,
  );
  void rm(MARKERS, { recursive: true, force: true });
});

describe('injection fuzz: validation layer', () => {
  it('generates at least 1,000 distinct hostile strings deterministically', () => {
    expect(new Set(STRINGS.map((h) => h.text)).size).toBeGreaterThanOrEqual(1000);
    expect(hostileStrings({ markerDir: MARKERS, seed: SEED, count: 1200 })).toEqual(STRINGS);
  });

  it('every field template accepts a benign value (a refusal below is the value’s)', () => {
    const loader = new SpecLoader();
    const bad = FIELDS.filter((f) => f.ok !== null).filter(
      (f, i) => !verdict(loader, f, f.ok ?? 'x1', i).accepted,
    );
    expect(bad.map((f) => f.field)).toEqual([]);
  });

  it('refuses each string with file:line, or accepts it — in every field', () => {
    const loader = new SpecLoader();
    let n = 0;
    const unlocated: string[] = [];
    for (const f of FIELDS) {
      const vs = STRINGS.map((h) => verdict(loader, f, h.text, n++));
      verdicts.set(f.field, vs);
      const refused = vs.filter((v) => !v.accepted);
      const codes = [...new Set(refused.flatMap((v) => (v.accepted ? [] : v.codes)))].sort();
      report.validation.byField[f.field] = {
        sink: f.sink,
        accepted: vs.length - refused.length,
        refused: refused.length,
        codes,
      };
      vs.forEach((v, i) => {
        if (!v.accepted && !v.located) unlocated.push(`${f.field} ${STRINGS[i]!.id}: ${v.where}`);
      });
    }
    const all = [...verdicts.values()].flat();
    Object.assign(report.validation, {
      fields: FIELDS.length,
      checks: all.length,
      accepted: all.filter((v) => v.accepted).length,
      refused: all.filter((v) => !v.accepted).length,
      unlocated: unlocated.length,
    });
    expect(unlocated.slice(0, 20)).toEqual([]);
  }, 600_000); // 79,200 validations, CPU-bound: a ceiling for a loaded machine, not a window

  it('refuses every string with a NUL byte where the value reaches a process, a path or a host', () => {
    const leaks = FIELDS.filter((f) => f.nul !== false).flatMap((f) =>
      STRINGS.filter((h, i) => h.text.includes('\0') && verdicts.get(f.field)![i]!.accepted).map(
        (h) => `${f.field}: ${h.id}`,
      ),
    );
    expect(leaks.slice(0, 20)).toEqual([]);
  });

  it('refuses option-like values (leading "-") where a Backend field is an operand of a command', () => {
    const leaks = [
      'connection.host',
      'connection.proxyJump',
      '(ssh) spec.paths.root',
      '(ssh) spec.paths.work',
    ]
      .flatMap((k) => FIELDS.filter((f) => f.field.includes(k)))
      .flatMap((f) =>
        accepted(f.field)
          // A jump host's operand is the host of its first hop, as the transport reads it.
          .filter((h) =>
            (f.field.includes('proxyJump')
              ? h.text.split(',')[0]!.replace(/^[^@]+@/, '')
              : h.text
            ).startsWith('-'),
          )
          .map((h) => `${f.field}: ${h.id}`),
      );
    expect(leaks).toEqual([]);
  });

  it('refuses an argument over 128 KiB (ArgumentTooLarge) and accepts one at the limit', () => {
    const field = FIELDS.find((f) => f.field === 'Run spec.command[i] (list)')!;
    const vs = verdicts.get(field.field)!;
    STRINGS.forEach((h, i) => {
      if (h.text.includes('\0')) return;
      const v = vs[i]!;
      if (Buffer.byteLength(h.text) > MAX_ARG_BYTES)
        expect(v.accepted ? [] : v.codes, h.id).toContain('ArgumentTooLarge');
      else expect(v.accepted, h.id).toBe(true);
    });
    expect(STRINGS.some((h) => Buffer.byteLength(h.text) === MAX_ARG_BYTES)).toBe(true);
    expect(STRINGS.some((h) => Buffer.byteLength(h.text) === MAX_ARG_BYTES + 1)).toBe(true);
  });

  it('refuses ADV_* names in a DAG’s defaults.env (they steer where a node reads, writes and runs)', () => {
    const f: FieldCase = FIELDS.find((x) => x.field === 'DAG spec.defaults.env{name}')!;
    const loader = new SpecLoader();
    for (const name of ['ADV_INPUTS', 'ADV_OUTPUTS', 'ADV_WORKDIR', 'ADV_STORE', 'ADV_SETUP_0'])
      expect(verdict(loader, f, name, 0)).toMatchObject({
        accepted: false,
        located: true,
        codes: ['ReservedEnv'],
      });
  });

  it('never writes a line break into an #SBATCH line, even from a value validation let through', () => {
    const ctx = {
      dataDir: tmpdir(),
      logger: pino({ level: 'silent' }),
      now: Date.now,
      ssh: defaultSshTransport,
    };
    const job: JobRequest = {
      jobName: 'adv-fz-1',
      run: 'fz',
      attempt: 1,
      spec: {},
      argv: ['true'],
      code: { commit: 'c' },
      env: {},
    };
    const wrong: string[] = [];
    for (const h of STRINGS) {
      const b = new SlurmBackend(
        'fz',
        { type: 'slurm', connection: { host: 'h' }, slurm: { sbatchDefaults: { constraint: h.text } } },
        { ...ctx, code: {} as CodeExporter },
      );
      let script: string | undefined;
      try {
        script = b.batchScript(job, `/w/${h.text}/adv-fz-1`);
      } catch {
        // refused: the guard in directiveLine
      }
      if (/[\n\r\0]/.test(h.text) !== (script === undefined)) wrong.push(h.id);
    }
    expect(wrong).toEqual([]);
  });

  it('passes every accepted code.ref to git as one argument that names nothing', async () => {
    const refs = accepted('Run spec.code.ref').map((h) => h.text);
    const wt = await makeWorkTree({ 'README.md': 'x\n' });
    const git = new NativeGit(join(wt.dir, '.git'));
    try {
      const resolved = await resolveCodeRefs(
        git,
        refs.map((ref) => ({ code: { ref } })),
        false,
      );
      Object.assign(report.controllerArgv, { codeRefs: refs.length, resolved: resolved.size });
      expect(refs.length).toBeGreaterThan(0);
      expect([...resolved.keys()]).toEqual([]);
    } finally {
      await git.close();
      await wt.cleanup();
    }
  });
});

describe.runIf(sshOk)('injection fuzz: execution layer on a real sshd and a real SLURM', () => {
  let sshd: Sshd;
  let tmp: string;
  let wt: WorkTree;
  let c: Controller;
  const delivered: Delivery[] = [];

  beforeAll(async () => {
    if (slurmOk) execFileSync(join(SLURM_INFRA, 'slurm-start.sh'), { stdio: 'inherit' });
    sshd = await startSshd();
    tmp = await mkdtemp(join(tmpdir(), 'adv-fuzz-'));
  }, 120_000);

  afterAll(async () => {
    await c?.stop();
    await wt?.cleanup();
    await sshd?.stop();
    if (tmp) await rm(tmp, { recursive: true, force: true });
    if (slurmOk) execFileSync(join(SLURM_INFRA, 'slurm-stop.sh'));
  });

  it('delivers every accepted argv element, env value and working dir byte for byte', async () => {
    expect(verdicts.size, 'the validation layer runs first').toBe(FIELDS.length);
    // Shortest first, so the short strings share jobs and each long one gets its own.
    const items = [
      ...accepted('Run spec.command[i] (list)').map((h) => ({ sink: 'argv' as const, h })),
      ...accepted('Run spec.env{value}').map((h) => ({ sink: 'env' as const, h })),
    ].sort((a, b) => Buffer.byteLength(a.h.text) - Buffer.byteLength(b.h.text));
    const sshRuns = packRuns(
      'fz-ssh',
      'fz-ssh',
      items,
      (r) => fitsRules(r) && sshLaunchBytes(r) <= SSH_WAVE_BYTES,
    );
    const slurmRuns = slurmOk ? packRuns('fz-slurm', 'fz-slurm', items, fitsRules) : [];
    const wds = workingDirSample(accepted('Run spec.workingDir'));
    const wdRuns: FuzzRun[] = wds.map((h, i) => ({
      name: `fz-wd-${i}`,
      backend: 'fz-ssh',
      argv: [],
      env: [],
      workingDir: h,
    }));
    const roots = { 'fz-ssh': join(tmp, 'ssh-root'), 'fz-slurm': join(tmp, 'slurm-root') } as Record<
      string,
      string
    >;
    const files: Record<string, string> = {
      'backends/fz-ssh.yaml': sshBackendYaml(sshd, 'fz-ssh', roots['fz-ssh']!),
      'code/README': 'the fuzz runs’ code: working dirs with hostile names\n',
      ...Object.fromEntries(wds.map((h) => [`code/${h.text}/.keep`, ''])),
    };
    if (slurmOk)
      files['backends/fz-slurm.yaml'] = slurmBackendYaml(sshd, roots['fz-slurm']!, 'debug', 'fz-slurm');
    wt = await makeWorkTree(files);
    c = await Controller.create({ repo: wt.dir, dataDir: join(tmp, 'data'), pollIntervalMs: 200 });
    await c.init();
    const waves = sshWaves([...sshRuns, ...wdRuns], SSH_WAVE_BYTES);
    const outcomes = await runWaves(c, wt, slurmRuns, waves, (r) => roots[r.backend]!, 180_000);
    for (const o of outcomes) delivered.push(...deliveries(o));
    const tally = (key: string, runs: FuzzRun[]) => {
      const names = new Set(runs.map((r) => r.name));
      const ds = delivered.filter((d) => names.has(d.run));
      const ok = ds.filter((d) => d.literal).length;
      report.execution[key] = {
        tried: ds.length,
        delivered: ok,
        notDelivered: ds.length - ok,
        runs: runs.length,
      };
    };
    tally('ssh', sshRuns);
    tally('ssh-workingDir', wdRuns);
    if (slurmOk) tally('slurm', slurmRuns);
    report.notDelivered = delivered
      .filter((d) => !d.literal)
      .map((d) => ({
        id: d.h.id,
        sink: d.sink,
        run: d.run,
        bytes: Buffer.byteLength(d.h.text),
        ...(d.why ? { why: d.why } : {}),
      }));
    expect(delivered.length).toBe(items.length * (slurmOk ? 2 : 1) + wdRuns.length);
    expect(report.notDelivered.slice(0, 30)).toEqual([]);
  }, 900_000);

  it('reports a missing hostile working dir as the job’s own StartFailed, with valid JSON', async () => {
    const h = STRINGS.find((x) => x.family === 'payload' && x.text.includes('\\') && x.text.includes('"'))!;
    const text = `missing/a\n\u001b[2Jb/${h.text}`;
    const run: FuzzRun = {
      name: 'fz-nodir',
      backend: 'fz-ssh',
      argv: [],
      env: [],
      workingDir: { ...h, text },
    };
    const [o] = await runWaves(c, wt, [], [[run]], () => join(tmp, 'ssh-root'), 120_000);
    // The exit record parsed (the controller read it): its message holds the working dir, less controls.
    const printable = [...text].filter((ch) => ch.charCodeAt(0) >= 0x20).join('');
    expect(o).toMatchObject({ phase: 'Failed', exit: { reason: 'StartFailed' } });
    expect(o!.exit!.message).toBe(`no working dir ${printable} in the code`);
  }, 180_000);

  it('creates no marker file: nothing ran', () => {
    expect(readdirSync(MARKERS)).toEqual([]);
  });
});
