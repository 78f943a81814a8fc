/**
 * Bundles the worker side (`adv exec`) into ONE file with esbuild, so it runs on a host that has
 * Node.js but not this project's node_modules (backends ship this file). `npm run build` calls it.
 */
import { build } from 'esbuild';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

export async function bundleExec(outfile: string): Promise<void> {
  await build({
    entryPoints: [join(here, 'exec-main.ts')],
    outfile,
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'esm',
    minify: true,
    legalComments: 'none',
    // Some bundled CommonJS code calls require(); give the ESM bundle one.
    banner: {
      js: "import { createRequire as __advCreateRequire } from 'node:module'; const require = __advCreateRequire(import.meta.url);",
    },
    logLevel: 'warning',
  });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const out = process.argv[2] ?? join(here, '..', 'dist', 'adv-exec.mjs');
  await bundleExec(out);
  console.log(`bundled adv exec into ${out}`);
}
