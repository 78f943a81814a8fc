import type { Command } from 'commander';
import { Option } from 'commander';
import { AdvError, ErrorCode, graphOf, type DagStatusDoc } from '../../controller/index.js';
import { toDot, toMermaid } from '../dag-graph.js';
import { openStatus } from '../status-reader.js';
import { printable, type Io } from '../output.js';

/** `adv dag graph NAME`: the DAG with its nodes' phases, as Mermaid or Graphviz DOT. */
export function registerDag(program: Command, io: Io): void {
  const dag = program.command('dag').description('DAG tools: draw a DAG with its nodes’ phases');
  dag
    .command('graph')
    .description('Print a DAG as a Mermaid flowchart or a Graphviz DOT graph, each node with its phase')
    .argument('<name>', 'DAG name')
    .addOption(
      new Option('-o, --output <format>', 'graph format').choices(['mermaid', 'dot']).default('mermaid'),
    )
    .option('--repo <url|path>', 'specs repo (default: the repository of the current directory)')
    .option('--status-branch <name>', 'status branch (default adventuretime/status)')
    .addHelpText(
      'after',
      `
Examples:
  adv dag graph pipeline                      # paste into a Markdown file or a PR comment
  adv dag graph pipeline -o dot | dot -Tsvg > pipeline.svg`,
    )
    .action(async (name: string, opts: { output: string; repo?: string; statusBranch?: string }) => {
      const r = await openStatus(opts, io);
      try {
        const doc = r.store.get<DagStatusDoc>('DAG', name);
        if (!doc?.appliedSpec)
          throw new AdvError(ErrorCode.NotFound, `DAG "${printable(name)}" has no status yet`, {
            hint: 'adv get dags lists the DAGs the controller has seen; commit the DAG and run the controller',
          });
        const nodes = graphOf(doc.appliedSpec, doc);
        io.stdout.write(opts.output === 'dot' ? toDot(name, nodes) : toMermaid(name, nodes));
      } finally {
        await r.close();
      }
    });
}
