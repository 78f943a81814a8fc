/**
 * `adv artifacts ls|pull RUN`: a run's outputs in the object store, complete (a completion
 * manifest) or not (only the parts committed so far), read from the store alone.
 */
import { Option, type Command } from 'commander';
import { join, resolve } from 'node:path';
import { AdvError, ErrorCode, age } from '../../controller/index.js';
import {
  downloadOutput,
  downloadParts,
  listParts,
  outputPrefix,
  readOutputManifest,
  type ArtifactManifest,
  type StoredPart,
  PARTS,
} from '../../runtime/artifacts.js';
import type { ObjectStore } from '../../runtime/store/types.js';
import { renderTable } from '../format.js';
import { mib, storeOptions } from './ckpt.js';
import { checkName } from '../names.js';
import { openCommandStore, type StoreOpts } from '../store.js';
import type { Io } from '../output.js';

export function registerArtifacts(program: Command, io: Io): void {
  const artifacts = program
    .command('artifacts')
    .description(
      "A run's outputs in the object store: list, download (complete, or the parts committed so far)",
    );
  registerLs(artifacts, io);
  registerPull(artifacts, io);
}

/** One output of a run as the store has it. */
export interface OutputListing {
  output: string;
  /** True iff its completion manifest exists and is usable. */
  complete: boolean;
  /** Why the completion manifest is not usable, when it is not. */
  problem?: string;
  attempt?: number;
  createdAt?: string;
  files: number;
  totalBytes: number;
  parts: {
    name: string;
    files?: number;
    totalBytes?: number;
    attempt?: number;
    createdAt?: string;
    problem?: string;
  }[];
}

/** Every output of `run` in the store, by name: complete or not, with its committed parts. */
export async function listOutputs(store: ObjectStore, run: string): Promise<OutputListing[]> {
  const base = `runs/${run}/outputs/`;
  const names = (await store.listFolders(base)).map((f) => f.slice(base.length, -1));
  return Promise.all(names.map((name) => listOutput(store, run, name)));
}

async function listOutput(store: ObjectStore, run: string, output: string): Promise<OutputListing> {
  const [m, parts] = await Promise.all([
    readOutputManifest(store, run, output),
    listParts(store, run, output),
  ]);
  const committed = parts.flatMap((p) => (typeof p.manifest === 'string' ? [] : [p.manifest]));
  const complete = typeof m === 'object';
  return {
    output,
    complete,
    ...(typeof m === 'string' ? { problem: m } : {}),
    ...(complete ? { attempt: m.attempt, createdAt: m.createdAt } : {}),
    // An incomplete output holds what its parts hold so far.
    files: complete ? m.files.length : committed.reduce((a, p) => a + p.files.length, 0),
    totalBytes: complete ? m.totalBytes : committed.reduce((a, p) => a + p.totalBytes, 0),
    parts: parts.map(partListing),
  };
}

function partListing(p: StoredPart): OutputListing['parts'][number] {
  if (typeof p.manifest === 'string') return { name: p.name, problem: p.manifest };
  const m = p.manifest;
  return {
    name: p.name,
    files: m.files.length,
    totalBytes: m.totalBytes,
    attempt: m.attempt,
    createdAt: m.createdAt,
  };
}

function registerLs(artifacts: Command, io: Io): void {
  storeOptions(
    artifacts
      .command('ls')
      .description("List a run's outputs: complete or not, their committed parts, files and bytes"),
  )
    .argument('<run>', 'run name')
    .addOption(new Option('-o, --output <format>', 'output format').choices(['text', 'json']).default('text'))
    .addHelpText('after', '\nExamples:\n  adv artifacts ls rollout-7\n  adv artifacts ls rollout-7 -o json')
    .action(async (run: string, opts: StoreOpts & { output: 'text' | 'json' }) => {
      checkName(run);
      const store = await openCommandStore(opts, io);
      const outputs = await listOutputs(store, run);
      if (opts.output === 'json') return void io.stdout.write(JSON.stringify(outputs, null, 2) + '\n');
      if (!outputs.length) return void io.stdout.write(`No outputs for run ${run} in ${store.url}\n`);
      io.stdout.write(
        renderTable(
          ['OUTPUT', 'COMPLETE', 'PARTS', 'FILES', 'SIZE', 'ATTEMPT', 'AGE', 'PROBLEM'],
          outputs.map((o) => [
            o.output,
            o.complete ? 'yes' : 'no',
            String(o.parts.length),
            String(o.files),
            mib(o.totalBytes),
            o.attempt ? String(o.attempt) : '-',
            o.createdAt ? age(o.createdAt) : '-',
            o.problem ?? '',
          ]),
        ),
      );
      const parts = outputs.flatMap((o) => o.parts.map((p) => ({ output: o.output, ...p })));
      if (!parts.length) return;
      io.stdout.write('\n');
      io.stdout.write(
        renderTable(
          ['OUTPUT', 'PART', 'FILES', 'SIZE', 'ATTEMPT', 'AGE', 'PROBLEM'],
          parts.map((p) => [
            p.output,
            p.name,
            p.files !== undefined ? String(p.files) : '-',
            p.totalBytes !== undefined ? mib(p.totalBytes) : '-',
            p.attempt ? String(p.attempt) : '-',
            p.createdAt ? age(p.createdAt) : '-',
            p.problem ?? '',
          ]),
        ),
      );
    });
}

interface PullOpts extends StoreOpts {
  to: string;
  partial?: boolean;
}

function registerPull(artifacts: Command, io: Io): void {
  storeOptions(
    artifacts
      .command('pull')
      .description(
        'Download and verify outputs of a run into <dir>/<output>/ (an incomplete one only with --partial: its committed parts)',
      ),
  )
    .argument('<run>', 'run name')
    .argument('[output]', 'this output only (default: every output of the run)')
    .option('--to <dir>', 'where to put them (as <dir>/<output>/)', '.')
    .option(
      '--partial',
      'an output that is not complete yet: its committed parts, into <dir>/<output>/parts/',
    )
    .addHelpText(
      'after',
      '\nExamples:\n  adv artifacts pull rollout-7 --to ./out\n  adv artifacts pull rollout-7 samples --partial   # while it runs',
    )
    .action(async (run: string, output: string | undefined, opts: PullOpts) => {
      checkName(run);
      const store = await openCommandStore(opts, io);
      const outputs = await listOutputs(store, run);
      const chosen = output ? outputs.filter((o) => o.output === output) : outputs;
      if (!chosen.length)
        throw new AdvError(
          ErrorCode.NotFound,
          output
            ? `run ${run} has no output ${output} in ${store.url}${outputs.length ? ` (it has: ${outputs.map((o) => o.output).join(', ')})` : ''}`
            : `run ${run} has no outputs in ${store.url}`,
          { hint: `adv artifacts ls ${run} shows what is there` },
        );
      const incomplete = chosen.filter((o) => !o.complete);
      if (incomplete.length && !opts.partial)
        throw new AdvError(
          ErrorCode.NotFound,
          `output ${incomplete.map((o) => `${o.output} (${o.parts.length} committed parts${o.problem ? `; ${o.problem}` : ''})`).join(', ')} of ${run} is not complete`,
          { hint: 'pass --partial to download the parts committed so far' },
        );
      for (const o of chosen)
        io.stdout.write(await pullOne(store, run, o, resolve(io.cwd, opts.to, o.output)));
    });
}

/** Downloads one output (complete: all of it; else its committed parts); says what it did. */
async function pullOne(store: ObjectStore, run: string, o: OutputListing, dest: string): Promise<string> {
  if (o.complete) {
    const m: ArtifactManifest = await downloadOutput(store, run, o.output, dest);
    return `output ${o.output}: complete, ${m.files.length} files (${mib(m.totalBytes)}) verified into ${dest}\n`;
  }
  const { parts } = await downloadParts(store, run, o.output, join(dest, PARTS));
  return `output ${o.output}: not complete; ${parts.length} committed parts (${mib(o.totalBytes)}) verified into ${join(dest, PARTS)} (${store.url}${outputPrefix(run, o.output)})\n`;
}
