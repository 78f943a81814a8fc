/**
 * Sections `adv describe` prints for more than one kind (a run, a DAG, a sweep): the conditions
 * table, the object's history on the status branch, an owner's header lines.
 */
import { age, type Condition, type OwnerStatusCore } from '../controller/index.js';
import { renderTable } from './format.js';
import { safe } from './output.js';
import type { StatusReader } from './status-reader.js';

/** The `Conditions:` section, kubectl describe style. */
export function conditionsSection(conditions: readonly Condition[]): string[] {
  return [
    '',
    'Conditions:',
    conditions.length
      ? renderTable(
          ['TYPE', 'STATUS', 'REASON', 'AGE', 'MESSAGE'],
          conditions.map((c) => [c.type, c.status, c.reason, age(c.lastTransitionTime), c.message]),
        ).trimEnd()
      : '  (none)',
  ];
}

/** The object's lines from `git log` of its status file: what changed, when, in which commit. */
export async function history(
  r: StatusReader,
  kind: 'run' | 'dag' | 'sweep',
  name: string,
): Promise<string[]> {
  const file = `${kind}s/${name}.yaml`;
  const commits = await r.repo.git.log(r.store.ref, { path: file, limit: 50 });
  const out = ['', safe`History (git log ${r.repo.statusBranch} -- ${file}):`];
  for (const c of commits.reverse()) {
    const subject = c.message.split('\n')[0]!;
    const line = subject.startsWith(`${kind}/${name}:`)
      ? subject
      : (c.message
          .split('\n')
          .find((l) => l.startsWith(`- ${kind}/${name}:`))
          ?.slice(2) ?? subject);
    out.push(safe`  ${new Date(c.time * 1000).toISOString()}  ${c.oid.slice(0, 10)}  ${line}`);
  }
  return out;
}

/** The first lines of `adv describe dag|sweep`: name, phase, message, the spec acted on. */
export function ownerHeader(name: string, st: OwnerStatusCore): string[] {
  const out = [
    safe`Name:         ${name}`,
    safe`Phase:        ${st.phase}${st.reason ? ` (${st.reason})` : ''}`,
  ];
  if (st.message) out.push(safe`Message:      ${st.message}`);
  out.push(
    safe`Spec:         ${st.specFile ?? '-'} @ ${(st.specCommit ?? '-').slice(0, 12)} (generation ${st.observedGeneration ?? '-'})`,
  );
  return out;
}
