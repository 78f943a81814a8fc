import type { Command } from 'commander';
import { resolve } from 'node:path';
import { AdvError, ErrorCode, KINDS, schemaJson, writeSchemas, type Kind } from '../../controller/index.js';
import type { Io } from '../output.js';

export function registerSchema(program: Command, io: Io): void {
  program
    .command('schema')
    .description('Print the JSON Schema of a kind, or write all of them for your editor')
    .argument('[kind]', `one of ${KINDS.join(', ')}`)
    .option('--out <dir>', 'write every schema into DIR (for yaml-language-server)')
    .addHelpText(
      'after',
      `
Examples:
  adv schema Run                 # print the Run schema
  adv schema --out .schemas      # then start each spec with
                                 # # yaml-language-server: $schema=.schemas/run.schema.json`,
    )
    .action(async (kind: string | undefined, opts: { out?: string }) => {
      if (opts.out) {
        const files = await writeSchemas(resolve(io.cwd, opts.out));
        for (const f of files) io.stdout.write(`wrote ${f}\n`);
        return;
      }
      if (!kind)
        throw new AdvError(ErrorCode.UsageError, 'name a kind or pass --out DIR', {
          hint: `adv schema Run (kinds: ${KINDS.join(', ')})`,
        });
      const match = KINDS.find((k) => k.toLowerCase() === kind.toLowerCase());
      if (!match)
        throw new AdvError(ErrorCode.UsageError, `unknown kind "${kind}"`, {
          hint: `use one of ${KINDS.join(', ')}`,
        });
      io.stdout.write(schemaJson(match as Kind));
    });
}
