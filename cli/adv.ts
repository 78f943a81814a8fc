#!/usr/bin/env node
/** Entry point of the `adv` command: composes, nothing else. */
import { runCli } from './program.js';

process.exitCode = await runCli(process.argv.slice(2));
