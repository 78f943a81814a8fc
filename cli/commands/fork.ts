/**
 * `adv fork RUN`: a new Run that starts from RUN's committed checkpoint. Its spec is RUN's as
 * committed on the watched branch, with the `--set`s, plus `spec.forkFrom: {run, step}` — the step
 * resolved here from the store (RUN's latest committed one unless `--step`), so the spec says
 * exactly where the run starts. Committed (and pushed) like `adv apply`; the controller copies the
 * checkpoint inside the store before the fork's first attempt (controller/loop/execute/fork.ts).
 */
import type { Command } from 'commander';
import { parseAllDocuments, type Document } from 'yaml';
import {
  AdvError,
  ErrorCode,
  RECONCILE_ANNOTATION,
  RETRY_ANNOTATION,
  type LoadResult,
} from '../../controller/index.js';
import { checkStep } from '../../runtime/checkpoint.js';
import { committedSteps, notCommitted } from '../../runtime/checkpoint-copy.js';
import { openStore, type ObjectStore } from '../../runtime/store/index.js';
import { RUN_NAME_MAX } from '../../runtime/names.js';
import { printableDiagnostic } from '../format.js';
import { checkName } from '../names.js';
import { printable, type Io } from '../output.js';
import { gitToken, resolveRepo } from '../repo.js';
import { applySets, collectSet, type SetArg } from '../set-args.js';
import { openSpecsWorkTree, type RepoOpts, type SpecsWorkTree } from '../specs-writer.js';
import { openSpecsStore } from '../store.js';

interface ForkOpts extends RepoOpts {
  step?: number;
  name?: string;
  set?: SetArg[];
  store?: string;
  dataDir?: string;
}

export function registerFork(program: Command, io: Io): void {
  program
    .command('fork')
    .description(
      "Start a new run from a run's committed checkpoint (its latest, or --step), with its spec and your changes; commits the new Run",
    )
    .argument('<run>', 'the run to fork')
    .option('--step <n>', 'the checkpoint step to start from (default: the latest committed)', parseStep)
    .option('--name <name>', 'name of the new run (default: <run>-fork-<step>)')
    .option('--set <path=value>', 'change a field of the spec, dotted from spec (repeatable)', collectSet)
    .option('--repo <url|path>', 'specs repo (default: the repository of the current directory)')
    .option('--branch <name>', 'the watched branch', 'main')
    .option('--store <url>', 'object store (default: $ADV_STORE, else the Storage spec of the repo)')
    .option('--data-dir <dir>', "the controller's data dir (where a file store's relative path starts)")
    .addHelpText(
      'after',
      `
Examples:
  adv fork train                                      # from its latest checkpoint
  adv fork train --step 2000 --set env.LR=1e-4   # from step 2000, another learning rate
  adv get runs --tree                                 # the family: parents and their forks`,
    )
    .action((run: string, opts: ForkOpts) => fork(io, checkName(run), opts));
}

function parseStep(v: string): number {
  if (!/^\d{1,15}$/.test(v))
    throw new AdvError(ErrorCode.UsageError, `--step ${JSON.stringify(v)} is not a step number`, {
      hint: 'adv ckpt ls RUN lists the committed steps',
    });
  return Number(v);
}

async function fork(io: Io, run: string, opts: ForkOpts): Promise<void> {
  for (const s of opts.set ?? [])
    if (['metadata.name', 'spec.forkFrom'].some((p) => `${s.path.join('.')}.`.startsWith(`${p}.`)))
      throw new AdvError(ErrorCode.UsageError, `--set ${s.path.join('.')}: adv fork sets it`, {
        hint: 'name the new run with --name, and pick the checkpoint with --step',
      });
  const repo = await resolveRepo(opts.repo, io.cwd);
  const wt = await openSpecsWorkTree(repo, opts.branch, await gitToken(io.env));
  try {
    const head = await wt.branchHead();
    const specs = await wt.loadCommitted(head);
    const parent = specs.objects.find((o) => o.kind === 'Run' && o.name === run);
    if (!parent) throw noSuchRun(run, opts.branch, repo);
    const explicit = opts.store ?? io.env.ADV_STORE;
    const store = explicit ? await openStore(explicit, io.env) : await openSpecsStore(specs, repo, opts, io);
    const step = await resolveStep(store, run, opts.step);
    const name = await newName(store, specs, run, step, opts.name);
    const committed = (await wt.fileState(parent.file, head)).committed!;
    const text = forkDocument(
      committed,
      run,
      name,
      step,
      opts.set ?? [],
      `${parent.file} at ${head.slice(0, 10)}`,
    );
    const target = `runs/${name}.yaml`;
    const sha = await commitNew(wt, target, text, `fork run/${name} from run/${run} at step ${step}`);
    io.stdout.write(
      `run/${name} forked from run/${run} at step ${step}: ${target} (commit ${sha.slice(0, 10)})\n` +
        `  the controller copies the checkpoint in ${store.url} before its first attempt\n` +
        `  adv describe run ${name}     adv get runs --tree     adv logs ${name} -f\n`,
    );
  } finally {
    await wt.close();
  }
}

function noSuchRun(run: string, branch: string, repo: string): AdvError {
  return new AdvError(ErrorCode.NotFound, `no Run "${printable(run)}" committed to ${branch} of ${repo}`, {
    hint: run.includes('.')
      ? 'a DAG node has no spec file of its own: fork needs a Run committed under runs/'
      : 'adv get runs lists the runs; the spec must be committed (adv fork reads the branch, not your work tree)',
  });
}

/** The step asked for, checked to be committed; else RUN's latest committed one. */
async function resolveStep(store: ObjectStore, run: string, step: number | undefined): Promise<number> {
  if (step !== undefined) {
    const info = await checkStep(store, run, step);
    if (info.manifest && !info.problem) return step;
    const why = await notCommitted(store, run, step);
    throw new AdvError(ErrorCode.NotFound, `in ${store.url}, ${why.message}`, {
      hint: why.committed.length
        ? 'pick one of them with --step, or leave --step out for the latest'
        : `adv ckpt ls ${run} shows what is there`,
    });
  }
  const latest = (await committedSteps(store, run))[0];
  if (latest === undefined)
    throw new AdvError(
      ErrorCode.NotFound,
      `run ${run} has no committed checkpoint in ${store.url}: nothing to fork from`,
      {
        hint: `adv ckpt ls ${run} shows what is there; a run commits one when its workload writes $ADV_CKPT_DIR/<step>/`,
      },
    );
  return latest;
}

/**
 * `--name`, or `<run>-fork-<step>` (then `-2`, `-3`, … while taken). A name is taken by a spec on
 * the branch, or by checkpoints in the store: a fork with checkpoints of its own restores those,
 * never its parent's.
 */
async function newName(
  store: ObjectStore,
  specs: LoadResult,
  run: string,
  step: number,
  asked: string | undefined,
): Promise<string> {
  const taken = async (n: string): Promise<string | undefined> => {
    const spec = [...specs.objects, ...specs.invalid].find((o) => o.kind === 'Run' && o.name === n);
    if (spec) return `a Run of that name is in ${spec.file}`;
    const steps = await store.listFolders(`runs/${n}/ckpt/`);
    return steps.length ? `${store.url} already holds checkpoints of a run of that name` : undefined;
  };
  if (asked !== undefined) {
    const why = await taken(checkName(asked, 'run', true));
    if (why)
      throw new AdvError(ErrorCode.UsageError, `cannot name the fork ${asked}: ${why}`, {
        hint: 'pick another --name',
      });
    return asked;
  }
  const base = `${run.slice(0, RUN_NAME_MAX - `-fork-${step}-99`.length).replace(/[-.]+$/, '')}-fork-${step}`;
  for (let i = 1; i < 100; i++) {
    const n = i === 1 ? base : `${base}-${i}`;
    if (!(await taken(n))) return n;
  }
  throw new AdvError(ErrorCode.UsageError, `every default name ${base}-N is taken`, { hint: 'pass --name' });
}

/**
 * The new Run's file: RUN's document as committed (its comments kept), renamed, with the sets
 * made and `spec.forkFrom` added; what belongs to RUN's own life (`suspend`, the retry and
 * reconcile annotations) is not carried over.
 */
export function forkDocument(
  committed: string,
  run: string,
  name: string,
  step: number,
  sets: readonly SetArg[],
  from: string,
): string {
  const doc = parseAllDocuments(committed).find((d): d is Document.Parsed => {
    const v = (d as Document.Parsed).toJS?.() as { kind?: string; metadata?: { name?: string } } | null;
    return v?.kind === 'Run' && v.metadata?.name === run;
  });
  if (!doc) throw new AdvError(ErrorCode.NotFound, `cannot find the Run ${run} in its committed file`);
  // The sets are checked on a plain copy first: a path through a scalar gets applySets' message.
  applySets(doc.toJS() as Record<string, unknown>, sets);
  for (const s of sets) doc.setIn(s.path, s.value);
  doc.setIn(['metadata', 'name'], name);
  for (const a of [RETRY_ANNOTATION, RECONCILE_ANNOTATION])
    if (doc.hasIn(['metadata', 'annotations', a])) doc.deleteIn(['metadata', 'annotations', a]);
  const annotations = doc.getIn(['metadata', 'annotations']) as { items?: unknown[] } | undefined;
  if (annotations?.items?.length === 0) doc.deleteIn(['metadata', 'annotations']);
  doc.deleteIn(['spec', 'suspend']);
  doc.setIn(['spec', 'forkFrom'], doc.createNode({ run, step }, { flow: true }));
  doc.commentBefore = ` Forked by adv fork from run/${run} at checkpoint step ${step} (its spec: ${from}).`;
  doc.directives.docStart = null;
  return doc.toString({ lineWidth: 0, flowCollectionPadding: false });
}

/** Validates the file in the repo as it would be with it, and commits it alone (like adv apply). */
async function commitNew(wt: SpecsWorkTree, target: string, text: string, message: string): Promise<string> {
  if ((await wt.read(target)) !== undefined)
    throw new AdvError(ErrorCode.UsageError, `${target} already exists in ${wt.dir}`, {
      hint: 'pick another --name, or move that file away',
    });
  await wt.write(target, text);
  try {
    const mine = (await wt.load()).diagnostics.filter((d) => d.file === target && d.severity === 'error');
    if (mine.length)
      throw new AdvError(
        ErrorCode.SpecInvalid,
        `the fork's spec is invalid; nothing was committed:\n${mine.map((d) => `  ${printableDiagnostic(d)}`).join('\n')}`,
        { hint: 'fix the --set values' },
      );
    return await wt.commit([target], message);
  } catch (e) {
    await wt.remove(target);
    throw e;
  }
}
