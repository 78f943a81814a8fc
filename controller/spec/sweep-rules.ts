/**
 * A Sweep's own rules, beyond the schema and the Run rules its template gets: the parameters
 * expand to a bounded set of distinct points, every listed point names the same parameters, and
 * every `{{params.NAME}}` of the template names one of them (located at the string that says it).
 */
import { canonicalJson } from '../reconcile/run-plan-model.js';
import type { Diagnostic } from './diagnostic.js';
import type { Locator } from './parse.js';
import type { Sweep } from './schema.js';
import { expandPoints, MAX_SWEEP_POINTS, PARAM_REF, pointCount, pointRunName } from './sweep-params.js';
import { closest } from './validate.js';

type Path = (string | number)[];
/** How a rule reports: the Collector's `error` of rules.ts. */
export type SweepError = (code: string, path: Path, message: string, hint?: string, key?: boolean) => void;

/** Every rule of a schema-valid Sweep. */
export function sweepRules(error: SweepError, sweep: Sweep): void {
  const { grid = {}, points } = sweep.spec.parameters;
  const gridNames = Object.keys(grid);
  if (!gridNames.length && !points) {
    error(
      'SweepNoPoints',
      ['spec', 'parameters'],
      'the sweep has no points: neither "grid" nor "points" names a parameter',
      'add parameters.grid: {lr: [0.1, 0.01]} or parameters.points: [{lr: 0.1}]',
    );
    return;
  }
  const count = pointCount(sweep.spec);
  if (count > MAX_SWEEP_POINTS)
    error(
      'SweepTooLarge',
      ['spec', 'parameters'],
      `the parameters expand to ${count} points; a Sweep may have at most ${MAX_SWEEP_POINTS}`,
      'split it into several Sweeps, or take fewer values',
    );
  const listed = points ? listedPointRules(error, points, gridNames) : [];
  paramRefRules(error, sweep, new Set([...gridNames, ...listed]));
}

/** Listed points all name the same parameters, none of the grid's, and no two are equal. */
function listedPointRules(
  error: SweepError,
  points: readonly Record<string, unknown>[],
  gridNames: readonly string[],
): string[] {
  const names = Object.keys(points[0] ?? {}).sort();
  const seen = new Map<string, number>();
  points.forEach((p, i) => {
    const path = ['spec', 'parameters', 'points', i];
    const own = Object.keys(p).sort();
    if (own.join(',') !== names.join(','))
      error(
        'SweepPointNames',
        path,
        `this point names ${list(own)}, the first point ${list(names)}: every point names the same parameters`,
        'give every point a value for each parameter (a parameter common to all can go in parameters.grid)',
      );
    for (const n of own)
      if (gridNames.includes(n))
        error(
          'SweepParamTwice',
          [...path, n],
          `"${n}" is in parameters.grid too: a point would have two values for it`,
          `remove "${n}" from the point or from the grid`,
          true,
        );
    const key = canonicalJson(p);
    const first = seen.get(key);
    if (first !== undefined)
      error(
        'SweepDuplicatePoint',
        path,
        `this point is the same as point ${first}: one point runs once`,
        'remove one of them',
      );
    else seen.set(key, i);
  });
  return names;
}

/** Every `{{params.NAME}}` in the template's command, setup steps and env values names a parameter. */
function paramRefRules(error: SweepError, sweep: Sweep, names: ReadonlySet<string>): void {
  const t = sweep.spec.template;
  const texts: [Path, string][] = [];
  const base = ['spec', 'template'];
  if (typeof t.command === 'string') texts.push([[...base, 'command'], t.command]);
  else (t.command ?? []).forEach((a, i) => texts.push([[...base, 'command', i], a]));
  for (const [k, v] of Object.entries(t.env ?? {})) texts.push([[...base, 'env', k], v]);
  (t.setup ?? []).forEach((step, i) => texts.push([[...base, 'setup', i], step]));
  for (const [path, text] of texts)
    for (const m of text.matchAll(PARAM_REF)) {
      const name = m[1]!;
      if (names.has(name)) continue;
      const guess = closest(name, names);
      error(
        'UnknownParam',
        path,
        `{{params.${name}}} names no parameter of this sweep (it has ${list([...names].sort())})`,
        guess ? `did you mean {{params.${guess}}}?` : 'add it to parameters.grid or to every point',
      );
    }
}

const list = (names: readonly string[]): string =>
  names.length ? names.map((n) => `"${n}"`).join(', ') : 'none';

/** The run names of a schema-valid Sweep's points, with where its parameters are written. */
export interface SweepPointNames {
  names: string[];
  line: number;
  column: number;
}

/** What the loader keeps of a Sweep for the cross-file rules (none when it has too many points). */
export function sweepPointNamesOf(sweep: Sweep, loc: Locator): SweepPointNames {
  const at = loc.at(['spec', 'parameters']);
  const n = pointCount(sweep.spec);
  const names =
    n > 0 && n <= MAX_SWEEP_POINTS
      ? expandPoints(sweep.spec).map((p) => pointRunName(sweep.metadata.name, p))
      : [];
  return { names, line: at.line, column: at.column };
}

/** The documents the cross-file rule reads: where each is, its kind and name, what it holds. */
interface NamedDoc {
  file: string;
  line: number;
  column: number;
  kind?: string;
  name?: string;
  namePos?: { line: number; column: number };
  children?: { name: string; path: string; line: number; column: number }[];
  sweepPoints?: SweepPointNames;
}

/**
 * A point runs as `<sweep>-<hash8>`: a Run, or a DAG node's child run, of that name would be one run
 * asked for twice. The Run (or DAG) and the Sweep are both refused, as two Runs of one name are.
 */
export function sweepPointNameRules<D extends NamedDoc>(
  docs: readonly D[],
  add: (d: D, diag: Diagnostic) => void,
): void {
  // Who else runs a name: a Run (at its name) or a DAG (at the node's id).
  const owners = new Map<string, { doc: D; path: string; line: number; column: number }>();
  for (const d of docs) {
    if (d.kind === 'Run' && d.name)
      owners.set(d.name, { doc: d, path: 'metadata.name', ...(d.namePos ?? d) });
    for (const c of d.children ?? []) owners.set(c.name, { doc: d, ...c });
  }
  const hint =
    'rename the Run (or the Sweep): a point runs as "<sweep>-<hash of its params>", and Run names are unique';
  for (const s of docs)
    for (const run of s.sweepPoints?.names ?? []) {
      const other = owners.get(run);
      if (!other) continue;
      const otherAt = `${other.doc.file}:${other.line}`;
      add(other.doc, {
        severity: 'error',
        code: 'DuplicateName',
        file: other.doc.file,
        line: other.line,
        column: other.column,
        path: other.path,
        message: `Run/${run} is also a point of Sweep/${s.name} at ${s.file}:${s.sweepPoints!.line}`,
        hint,
      });
      add(s, {
        severity: 'error',
        code: 'DuplicateName',
        file: s.file,
        line: s.sweepPoints!.line,
        column: s.sweepPoints!.column,
        path: 'spec.parameters',
        message: `a point runs as Run/${run}, which is also defined at ${otherAt}`,
        hint,
      });
    }
}
