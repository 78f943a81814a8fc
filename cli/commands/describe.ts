import type { Command } from 'commander';
import { AdvError, ErrorCode } from '../../controller/index.js';
import type { RunStatusDoc } from '../../controller/status/types.js';
import { age, renderTable } from '../format.js';
import { openStatus } from '../status-reader.js';
import type { Io } from '../output.js';

export function registerDescribe(program: Command, io: Io): void {
  program
    .command('describe')
    .description('Show one run in detail: phase, conditions, attempts, and its history from git log')
    .argument('<kind>', 'run')
    .argument('<name>', 'run name')
    .option('--repo <url|path>', 'specs repo (default: the repository of the current directory)')
    .option('--status-branch <name>', 'status branch (default adventuretime/status)')
    .addHelpText('after', '\nExamples:\n  adv describe run hello')
    .action(async (kind: string, name: string, opts: { repo?: string; statusBranch?: string }) => {
      if (!/^runs?$/i.test(kind))
        throw new AdvError(ErrorCode.UsageError, `cannot describe "${kind}" yet`, {
          hint: 'use: adv describe run NAME',
        });
      const r = await openStatus(opts, io);
      try {
        const doc = r.store.get<RunStatusDoc>('Run', name);
        if (!doc)
          throw new AdvError(ErrorCode.NotFound, `run "${name}" has no status`, {
            hint: 'adv get runs lists what exists',
          });
        const st = doc.status;
        const out: string[] = [];
        out.push(`Name:         ${name}`);
        if (doc.metadata.labels)
          out.push(
            `Labels:       ${Object.entries(doc.metadata.labels)
              .map(([k, v]) => `${k}=${v}`)
              .join(', ')}`,
          );
        if (st.owner) out.push(`Owner:        ${st.owner}`);
        out.push(`Phase:        ${st.phase}${st.reason ? ` (${st.reason})` : ''}`);
        if (st.message) out.push(`Message:      ${st.message}`);
        out.push(
          `Spec:         ${st.specFile ?? '-'} @ ${(st.specCommit ?? '-').slice(0, 12)} (generation ${st.observedGeneration ?? '-'})`,
        );
        if (st.codeCommit) out.push(`Code:         ${st.codeCommit.slice(0, 12)}`);
        if (st.nextAttemptAfter) out.push(`Next attempt: not before ${st.nextAttemptAfter}`);
        if (st.checkpoint)
          out.push(
            `Checkpoint:   step ${st.checkpoint.step} at ${st.checkpoint.createdAt} (${st.checkpoint.uri})`,
          );
        if (st.lastHeartbeat) out.push(`Heartbeat:    ${st.lastHeartbeat} (${age(st.lastHeartbeat)} ago)`);

        out.push('', 'Conditions:');
        out.push(
          st.conditions.length
            ? renderTable(
                ['TYPE', 'STATUS', 'REASON', 'AGE', 'MESSAGE'],
                st.conditions.map((c) => [c.type, c.status, c.reason, age(c.lastTransitionTime), c.message]),
              ).trimEnd()
            : '  (none)',
        );
        out.push('', 'Attempts:');
        out.push(
          st.attempts.length
            ? renderTable(
                [
                  '#',
                  'BACKEND',
                  'JOB',
                  'PHASE',
                  'SUBMITTED',
                  'STARTED',
                  'FINISHED',
                  'EXIT',
                  'STEPS',
                  'REASON',
                ],
                st.attempts.map((a) => [
                  String(a.n),
                  a.backend,
                  a.jobId ?? '-',
                  a.phase,
                  a.submittedAt ?? '-',
                  a.startedAt ?? '-',
                  a.finishedAt ?? '-',
                  a.exitCode !== undefined ? String(a.exitCode) : '-',
                  a.startStep !== undefined || a.lastStep !== undefined
                    ? `${a.startStep ?? 0}→${a.lastStep ?? a.startStep ?? 0}`
                    : '-',
                  [a.reason, a.message].filter(Boolean).join(': '),
                ]),
              ).trimEnd()
            : '  (none)',
        );
        const history = await r.repo.git.log(r.store.ref, { path: `runs/${name}.yaml`, limit: 50 });
        out.push('', `History (git log ${r.repo.statusBranch} -- runs/${name}.yaml):`);
        for (const c of history.reverse()) {
          const subject = c.message.split('\n')[0]!;
          const line = subject.startsWith(`run/${name}:`)
            ? subject
            : (c.message
                .split('\n')
                .find((l) => l.startsWith(`- run/${name}:`))
                ?.slice(2) ?? subject);
          out.push(`  ${new Date(c.time * 1000).toISOString()}  ${c.oid.slice(0, 10)}  ${line}`);
        }
        io.stdout.write(out.join('\n') + '\n');
      } finally {
        await r.close();
      }
    });
}
