/**
 * Loader benchmark (issue 2): load and validate a repo of N Run specs, against parsing the same
 * files with `yaml` alone (the floor), each mode in a fresh process so peak RSS is its own.
 *
 *   node --import tsx bench/load-specs.ts            # orchestrates, prints a Markdown table
 *   node --import tsx bench/load-specs.ts --mode M --dir D   # one sample (internal)
 */
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { DirectorySource, SpecLoader } from '../controller/index.js';
import { generateRepo, runYaml } from './gen-repo.js';
import { isolated, median, report, table } from './lib.js';

async function listYaml(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile() && /\.ya?ml$/.test(e.name)) out.push(join(e.parentPath, e.name));
  }
  return out;
}

async function sample(mode: string, dir: string): Promise<void> {
  if (mode === 'parse') {
    await report(async () => {
      const files = await listYaml(dir);
      let docs = 0;
      for (let i = 0; i < files.length; i += 64) {
        const texts = await Promise.all(files.slice(i, i + 64).map((f) => readFile(f, 'utf8')));
        for (const t of texts) if (parse(t)) docs++;
      }
      return { docs };
    });
  } else if (mode === 'load') {
    await report(async () => {
      const r = await new SpecLoader().sync(new DirectorySource(dir));
      if (r.diagnostics.length) throw new Error(`unexpected diagnostics: ${r.diagnostics[0]?.message}`);
      return { docs: r.objects.length };
    });
  } else if (mode === 'reload-one') {
    const loader = new SpecLoader();
    const source = new DirectorySource(dir);
    await loader.sync(source);
    await writeFile(
      join(dir, 'runs', 'sweep-7.yaml'),
      runYaml(7).replace('WANDB_PROJECT: sweep', 'WANDB_PROJECT: changed'),
    );
    const t0 = performance.now();
    await loader.sync(source);
    const reloadMs = performance.now() - t0;
    const t1 = performance.now();
    loader.loadFile('runs/sweep-8.yaml', new TextEncoder().encode(runYaml(8) + '# edit\n'), 'edited');
    loader.result();
    const oneFileMs = performance.now() - t1;
    console.log(
      JSON.stringify({ ms: reloadMs, oneFileMs, maxRssMiB: process.resourceUsage().maxRSS / 1024 }),
    );
  }
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const modeAt = args.indexOf('--mode');
  if (modeAt >= 0) return sample(args[modeAt + 1]!, args[args.indexOf('--dir') + 1]!);

  const runs = Number(process.env.BENCH_RUNS ?? 10_000);
  const reps = Number(process.env.BENCH_REPS ?? 3);
  const dir = await mkdtemp(join(tmpdir(), 'adv-bench-load-'));
  try {
    await generateRepo(dir, runs);
    const results: Record<string, { ms: number[]; rss: number[] }> = {
      parse: { ms: [], rss: [] },
      load: { ms: [], rss: [] },
    };
    for (let r = 0; r < reps; r++) {
      for (const mode of ['parse', 'load'] as const) {
        const s = isolated('./load-specs.ts', ['--mode', mode, '--dir', dir]);
        results[mode]!.ms.push(s.ms);
        results[mode]!.rss.push(s.maxRssMiB);
      }
    }
    const reload = isolated('./load-specs.ts', ['--mode', 'reload-one', '--dir', dir]);
    const parseMs = median(results.parse!.ms);
    const loadMs = median(results.load!.ms);
    console.log(`\n### Spec loading: ${runs} Run specs (median of ${reps}, each in a fresh process)\n`);
    console.log(
      table(
        ['what', 'wall ms', 'docs/s', 'peak RSS MiB', 'ratio to yaml.parse'],
        [
          ['yaml.parse only (floor)', parseMs, (runs / parseMs) * 1000, median(results.parse!.rss), 1],
          [
            'full load (parse with positions, schema, rules)',
            loadMs,
            (runs / loadMs) * 1000,
            median(results.load!.rss),
            loadMs / parseMs,
          ],
          [
            'sync after one file changed (stat walk + 1 parse)',
            reload.ms,
            0,
            reload.maxRssMiB,
            reload.ms / parseMs,
          ],
          [
            'loadFile + result() for one file',
            reload.oneFileMs!,
            0,
            reload.maxRssMiB,
            reload.oneFileMs! / parseMs,
          ],
        ],
      ),
    );
    console.log(`\nTarget: full load ≤ 1.3× yaml.parse. Measured: ${(loadMs / parseMs).toFixed(2)}×.`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
