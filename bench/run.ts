/**
 * `npm run bench [name…]`: runs the benchmarks (all by default) and prints Markdown tables to copy
 * into docs/benchmarks.md. Each benchmark measures its baseline in the same run. After each one,
 * nothing it started may still run (`leaks.ts`): what does is named and killed, and the run fails.
 */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { checkNoneLeft, endRun, markRun } from '../test/helpers/leaks.js';

const BENCHES: Record<string, string> = {
  'load-specs': './load-specs.ts',
  'controller-scale': './controller-scale.ts',
  latency: './latency.ts',
  git: './git.ts',
  checkpoint: './checkpoint.ts',
  'ssh-slurm': './ssh-slurm.ts',
  recovery: './recovery.ts',
  dag: './dag.ts',
  'big-blob': './big-blob.ts',
  redact: './redact.ts',
  tpu: './tpu.ts',
  vastai: './vastai.ts',
  agent: './agent.ts',
  gang: './gang.ts',
  environments: './environments.ts',
  submit: './submit.ts',
  metrics: './metrics.ts',
  'dashboard-metrics': './dashboard-metrics.ts',
  datasets: './datasets.ts',
};

const wanted = process.argv.slice(2).length ? process.argv.slice(2) : Object.keys(BENCHES);
// Jobs in the benchmarks start the built CLI, as they do in production.
execFileSync('npm', ['run', '--silent', 'build'], { stdio: 'inherit' });
const mark = markRun();

for (const name of wanted) {
  const script = BENCHES[name];
  if (!script) {
    console.error(`unknown benchmark "${name}"; known: ${Object.keys(BENCHES).join(', ')}`);
    process.exitCode = 2;
    continue;
  }
  console.log(`\n## ${name}`);
  try {
    execFileSync(process.execPath, ['--import', 'tsx', fileURLToPath(new URL(script, import.meta.url))], {
      stdio: 'inherit',
    });
  } finally {
    await checkNoneLeft(mark, `benchmark ${name}`);
  }
}
await endRun(mark, 'the benchmarks');
