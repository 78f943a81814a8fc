/**
 * What masking secrets costs a job that prints a lot. The bundled `adv exec` runs a workload that
 * writes 64 MiB of text (4 KiB lines) to its stdout (a file, as `output.log` is), first with no secrets
 * (the output is inherited: the baseline), then with three secrets named in `ADV_REDACT` (the
 * output is piped through `StreamRedactor`), and once more with the masked value in the output
 * every 4 KiB. Medians of 5; the ratio is against the baseline of the same run.
 */
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { median, table } from './lib.js';

const BUNDLE = fileURLToPath(new URL('../dist/adv-exec.mjs', import.meta.url));
const MIB = 64;
const SECRETS = {
  WANDB_API_KEY: 'wandb-9f8e7d6c5b4a',
  HF_TOKEN: 'hf_abcdefghijklmnop',
  S3_KEY: 'AKIAEXAMPLEKEY123',
};
const tmp = mkdtempSync(join(tmpdir(), 'adv-bench-redact-'));

/** Wall time (ms) of one adv exec run, its stdout to a file; and that file's size. */
function once(script: string, env: NodeJS.ProcessEnv): { ms: number; bytes: number } {
  const outFile = join(tmp, 'output.log');
  const fd = openSync(outFile, 'w');
  const t0 = performance.now();
  execFileSync(process.execPath, [BUNDLE, '--run', 'bench', '--', 'sh', '-c', script], {
    stdio: ['ignore', fd, 'inherit'],
    env: { PATH: process.env.PATH, ...env },
  });
  const ms = performance.now() - t0;
  closeSync(fd);
  return { ms, bytes: readFileSync(outFile).length };
}

// One 4 KiB line repeated (\`yes\`): with the secret at its end, one value to mask every 4 KiB.
const line = 'head -c 3000 /dev/zero | base64 -w 0';
const plain = `yes "$(${line})" | head -c ${MIB}M`;
const withSecret = `yes "$(${line}) $WANDB_API_KEY" | head -c ${MIB}M`;
const masked = { ...SECRETS, ADV_REDACT: Object.keys(SECRETS).join(',') };

const cases: [string, string, NodeJS.ProcessEnv][] = [
  ['no secrets (baseline: output inherited)', plain, {}],
  ['3 secrets named, none in the output', plain, masked],
  ['3 secrets, one masked every 4 KiB', withSecret, masked],
];
const rows: (string | number)[][] = [];
let base = 0;
for (const [what, script, env] of cases) {
  const runs = Array.from({ length: 5 }, () => once(script, env));
  const ms = median(runs.map((r) => r.ms));
  if (!base) base = ms;
  const mib = runs[0]!.bytes / 1024 / 1024;
  rows.push([
    what,
    Math.round(mib),
    Math.round(ms),
    Math.round(mib / (ms / 1000)),
    (ms / base).toFixed(2) + '×',
  ]);
}
rmSync(tmp, { recursive: true, force: true });
console.log(table(['adv exec, workload prints', 'MiB', 'ms (median of 5)', 'MiB/s', 'vs baseline'], rows));
