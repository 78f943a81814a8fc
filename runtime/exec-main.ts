/** Entry of the bundled worker runtime: `node adv-exec.mjs [options] -- COMMAND…` is `adv exec`. */
import { execMain } from './exec-cli.js';

process.exitCode = await execMain(process.argv.slice(2));
