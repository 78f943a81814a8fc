/**
 * The specs repo's own status (`sources/specs.yaml` on the status branch): what could not be
 * loaded, by file and line, so `adv get`, the dashboard and `/metrics` can say it, and
 * `git log adventuretime/status` shows when a bad file arrived and when it was fixed. Written only
 * when the set of errors changes: a spec commit that changes nothing here writes nothing.
 */
import {
  ConditionType,
  Reason,
  setCondition,
  SPECS_SOURCE,
  type LoadError,
  type SourceStatusDoc,
} from '../status/types.js';
import type { StatusWriter } from '../status/writer.js';

const stableErrorKey = (e: LoadError): string => `${e.file}:${e.line}:${e.column}:${e.code}:${e.message}`;

/** At most this many errors are written out, and this many per file (all are counted). */
export const MAX_LOAD_ERRORS = 500;
export const MAX_LOAD_ERRORS_PER_FILE = 10;

/** The errors to write out: every file gets its first few before any file gets more. */
function keep(errors: readonly LoadError[]): LoadError[] {
  const perFile = new Map<string, number>();
  const out: LoadError[] = [];
  for (const e of errors) {
    const n = perFile.get(e.file) ?? 0;
    perFile.set(e.file, n + 1);
    if (n < MAX_LOAD_ERRORS_PER_FILE) out.push(e);
    if (out.length === MAX_LOAD_ERRORS) break;
  }
  return out;
}

/** Stages the source status for these load errors; false when nothing changed. */
export function stageSourceStatus(
  status: StatusWriter,
  errors: readonly LoadError[],
  specCommit: string,
  now: number,
): boolean {
  const prev = status.get<SourceStatusDoc>('Source', SPECS_SOURCE);
  if (!prev && errors.length === 0) return false;
  const kept = keep(errors);
  const same =
    prev !== undefined &&
    prev.status.errorCount === errors.length &&
    prev.status.errors.map(stableErrorKey).join('\n') === kept.map(stableErrorKey).join('\n');
  if (same) return false;
  const files = new Set(errors.map((e) => e.file));
  const first = errors[0];
  const conditions = setCondition(
    prev?.status.conditions ?? [],
    errors.length
      ? {
          type: ConditionType.Ready,
          status: 'False',
          reason: Reason.LoadFailed,
          message: `${errors.length} error${errors.length === 1 ? '' : 's'} in ${files.size} file${files.size === 1 ? '' : 's'}, first at ${first!.file}:${first!.line}: ${first!.message}`,
        }
      : {
          type: ConditionType.Ready,
          status: 'True',
          reason: Reason.Loaded,
          message: 'every spec file loads',
        },
    new Date(now).toISOString(),
  );
  const doc: SourceStatusDoc = {
    apiVersion: 'adventuretime.dev/v1alpha1',
    kind: 'SourceStatus',
    metadata: { name: SPECS_SOURCE },
    status: { conditions, since: specCommit, errorCount: errors.length, errors: kept },
  };
  return status.stage('Source', SPECS_SOURCE, doc, {
    summary: errors.length
      ? `source/${SPECS_SOURCE}: ${errors.length} load error${errors.length === 1 ? '' : 's'} (${first!.file}:${first!.line} ${first!.code})`
      : `source/${SPECS_SOURCE}: every spec file loads`,
    trailers: [['Spec-Commit', specCommit]],
  });
}
