/**
 * The specs repo's own status (`sources/specs.yaml` on the status branch): what could not be
 * loaded, by file and line, so `adv get`, the dashboard and `/metrics` can say it, and
 * `git log adventuretime/status` shows when a bad file arrived and when it was fixed. Written only
 * when the set of errors changes: a spec commit that changes nothing here writes nothing.
 *
 * With `--trusted-signers` it also says whether the watched branch's head is acted on: the
 * `Verified` condition, the last verified commit acted on and the head refused (verified-head.ts).
 */
import type { Verdict } from '../../git/signatures.js';
import {
  ConditionType,
  Reason,
  removeCondition,
  setCondition,
  SPECS_SOURCE,
  type LoadError,
  type SourceStatusDoc,
} from '../../status/types.js';
import type { StatusWriter } from '../../status/writer.js';

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
    status: { ...prev?.status, conditions, since: specCommit, errorCount: errors.length, errors: kept },
  };
  return status.stage('Source', SPECS_SOURCE, doc, {
    summary: errors.length
      ? `source/${SPECS_SOURCE}: ${errors.length} load error${errors.length === 1 ? '' : 's'} (${first!.file}:${first!.line} ${first!.code})`
      : `source/${SPECS_SOURCE}: every spec file loads`,
    trailers: [['Spec-Commit', specCommit]],
  });
}

/** What the gate decided about the watched branch's head, and the commit it acts on. */
export interface Verification {
  verdict: Verdict;
  /** The last verified commit acted on (the head itself when it verified). */
  verified: { commit: string; signer: string } | undefined;
}

const shortId = (commit: string): string => commit.slice(0, 12);

/**
 * Stages the `Verified` condition (undefined: signatures are not checked, and any condition left
 * from when they were is removed); false when nothing changed.
 */
export function stageVerification(status: StatusWriter, v: Verification | undefined, now: number): boolean {
  const prev = status.get<SourceStatusDoc>('Source', SPECS_SOURCE);
  if (!v) {
    if (!prev || !prev.status.conditions.some((c) => c.type === ConditionType.Verified)) return false;
    const { verified: _verified, refused: _refused, ...rest } = prev.status;
    const conditions = removeCondition(prev.status.conditions, ConditionType.Verified);
    // A document that said nothing else goes: no status file for a repo that always loaded.
    const empty = conditions.length === 0 && rest.errorCount === 0;
    return status.stage('Source', SPECS_SOURCE, empty ? null : { ...prev, status: { ...rest, conditions } }, {
      summary: `source/${SPECS_SOURCE}: signatures are no longer checked`,
      trailers: [],
    });
  }
  const { verdict: head, verified } = v;
  const acting = verified
    ? `acting on ${verified.commit}, the last verified commit`
    : 'nothing is acted on until a commit signed by a trusted key is pushed';
  const conditions = setCondition(
    prev?.status.conditions ?? [],
    head.ok
      ? { type: ConditionType.Verified, status: 'True', reason: Reason.TrustedSigner, message: head.message }
      : {
          type: ConditionType.Verified,
          status: 'False',
          reason: head.reason ?? Reason.VerificationError,
          message: `${head.message}; ${acting}.${head.fix ? ` Fix: ${head.fix}` : ''}`,
        },
    new Date(now).toISOString(),
  );
  const {
    verified: _v,
    refused: _r,
    conditions: _c,
    ...rest
  } = prev?.status ?? { errorCount: 0, errors: [] };
  const doc: SourceStatusDoc = {
    apiVersion: 'adventuretime.dev/v1alpha1',
    kind: 'SourceStatus',
    metadata: { name: SPECS_SOURCE },
    status: {
      conditions,
      ...rest,
      ...(verified ? { verified } : {}),
      ...(head.ok
        ? {}
        : { refused: { commit: head.commit, reason: head.reason ?? Reason.VerificationError } }),
    },
  };
  return status.stage('Source', SPECS_SOURCE, doc, {
    summary: head.ok
      ? `source/${SPECS_SOURCE}: ${shortId(head.commit)} verified, signed by ${head.signer}`
      : `source/${SPECS_SOURCE}: ${shortId(head.commit)} not acted on (${head.reason})`,
    trailers: [[head.ok ? 'Verified-Commit' : 'Refused-Commit', head.commit]],
  });
}
