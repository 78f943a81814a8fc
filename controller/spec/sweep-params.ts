/**
 * A Sweep's points and what each becomes: the expansion of `spec.parameters` (grid × points), the
 * stable child name of a point, and the template with a point's values substituted. Pure; the
 * rules (sweep-rules.ts), the planner and `adv plan` all expand through here, so they agree.
 */
import { createHash } from 'node:crypto';
import { shellQuote } from '../../runtime/shell.js';
import { canonicalJson } from '../reconcile/run-plan-model.js';
import type { RunSpec, SweepSpec } from './schema.js';

/** One parameter value (the schema allows scalars only). */
export type ParamValue = string | number | boolean;
/** One point: a value per parameter name. */
export type Params = Record<string, ParamValue>;

/** The most points one Sweep may expand to (grid × points). */
export const MAX_SWEEP_POINTS = 10_000;

/** `{{params.NAME}}` (spaces allowed inside the braces, as in setup templates). */
export const PARAM_REF = /\{\{\s*params\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g;

/** The env variable carrying all of a point's parameters as canonical JSON. */
export const PARAMS_ENV = 'ADV_PARAMS';
/** The prefix of the env variable carrying one parameter: `ADV_PARAM_<name>`, the name as written. */
export const PARAM_ENV_PREFIX = 'ADV_PARAM_';

/** Number of points `spec.parameters` expands to, without expanding it (grid product × points). */
export function pointCount(spec: SweepSpec): number {
  const grid = Object.values(spec.parameters.grid ?? {});
  const product = grid.reduce((n, values) => n * values.length, 1);
  return product * (spec.parameters.points?.length ?? 1);
}

/**
 * Every point, in a stable order: each listed point (in list order) combined with every grid
 * combination (the grid's names in written order, the last varying fastest). With no `points`,
 * the grid alone; with no `grid`, the points alone. Callers check `pointCount` first.
 */
export function expandPoints(spec: SweepSpec): Params[] {
  let combos: Params[] = [{}];
  for (const [name, values] of Object.entries(spec.parameters.grid ?? {}))
    combos = combos.flatMap((c) => values.map((v) => ({ ...c, [name]: v })));
  const listed = spec.parameters.points ?? [{}];
  return listed.flatMap((p) => combos.map((c) => ({ ...p, ...c })));
}

/** `<sweep>-<first 8 hex of sha256(canonical JSON of the params)>`: the same point, the same run. */
export function pointRunName(sweep: string, params: Params): string {
  return `${sweep}-${createHash('sha256').update(canonicalJson(params)).digest('hex').slice(0, 8)}`;
}

/** A value as text: strings as written, numbers and booleans as JSON writes them. */
export const paramText = (v: ParamValue): string => (typeof v === 'string' ? v : String(v));

/**
 * Replaces every `{{params.NAME}}` in `text`; `quote` shell-quotes each value (for a command run by
 * `sh -c`). A name the point does not have is left as written (the rules refuse such a spec).
 */
export function substituteParams(text: string, params: Params, quote = false): string {
  return text.replace(PARAM_REF, (whole, name: string) => {
    const v = params[name];
    if (v === undefined) return whole;
    return quote ? shellQuote(paramText(v)) : paramText(v);
  });
}

/**
 * The Run spec of one point: the template with the point's values in `command` and `setup` (a
 * string command and setup steps are run by a shell, so values are shell-quoted there; an argv list
 * gets them as is) and in `env` values, plus `ADV_PARAMS` (canonical JSON) and `ADV_PARAM_<NAME>` per parameter.
 */
export function pointRunSpec(template: RunSpec, params: Params): RunSpec {
  const run: RunSpec = { ...template };
  if (typeof template.command === 'string') run.command = substituteParams(template.command, params, true);
  else if (template.command) run.command = template.command.map((a) => substituteParams(a, params));
  if (template.setup) run.setup = template.setup.map((step) => substituteParams(step, params, true));
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(template.env ?? {})) env[k] = substituteParams(v, params);
  env[PARAMS_ENV] = canonicalJson(params);
  for (const [k, v] of Object.entries(params)) env[`${PARAM_ENV_PREFIX}${k}`] = paramText(v);
  run.env = env;
  return run;
}
