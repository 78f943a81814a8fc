/**
 * Label selectors, as kubectl reads the equality-based ones: requirements separated by commas,
 * each `key`, `!key`, `key=value`, `key==value` or `key!=value`, with Kubernetes' syntax for keys
 * and values. What does not parse is refused, naming the requirement (a typo is never "No runs
 * found"). One matcher for `adv get -l` and an Alert's `spec.selector`.
 */
import { DNS1123_SUBDOMAIN_RE } from '../runtime/names.js';
import { AdvError, ErrorCode } from './errors.js';
import { printable } from './status/printable.js';

export interface Requirement {
  key: string;
  op: 'exists' | 'notExists' | 'equals' | 'notEquals';
  value?: string;
}

const NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const HINT =
  'write key=value, key!=value, key or !key, separated by commas (e.g. -l team=ml,size!=big); set-based requirements (in, notin) are not supported';

/** `[prefix/]name`: a DNS-1123 subdomain of at most 253, then a name of at most 63 characters. */
function keyProblem(key: string): string | undefined {
  const slash = key.indexOf('/');
  const prefix = slash < 0 ? undefined : key.slice(0, slash);
  const name = slash < 0 ? key : key.slice(slash + 1);
  if (prefix !== undefined && (prefix.length > 253 || !DNS1123_SUBDOMAIN_RE.test(prefix)))
    return `the key prefix ${q(prefix)} is not a DNS-1123 subdomain`;
  if (name.length > 63 || !NAME.test(name))
    return `the key ${q(key)} is not a label key: at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit`;
  return undefined;
}

function valueProblem(value: string): string | undefined {
  if (value === '' || (value.length <= 63 && NAME.test(value))) return undefined;
  return `the value ${q(value)} is not a label value: at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit`;
}

const q = (s: string) => printable(JSON.stringify(s));

/** Splits at commas outside parentheses (so `k in (a,b)` stays one requirement, to be refused whole). */
function split(selector: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < selector.length; i++) {
    const c = selector[i];
    if (c === '(') depth++;
    else if (c === ')') depth = Math.max(0, depth - 1);
    else if (c === ',' && depth === 0) {
      out.push(selector.slice(start, i));
      start = i + 1;
    }
  }
  out.push(selector.slice(start));
  return out;
}

function parseRequirement(raw: string): Requirement | string {
  const term = raw.trim();
  if (term === '') return 'it is empty';
  if (/\s(in|notin)\s*\(/.test(term)) return 'set-based requirements (in, notin) are not supported';
  const m = /^(.*?)(==|!=|=)(.*)$/.exec(term);
  if (!m) {
    const negated = term.startsWith('!');
    const key = negated ? term.slice(1).trim() : term;
    const problem = keyProblem(key);
    return problem ?? { key, op: negated ? 'notExists' : 'exists' };
  }
  const key = m[1]!.trim();
  const value = m[3]!.trim();
  if (key === '') return 'it has no key before the operator';
  const problem = keyProblem(key) ?? valueProblem(value);
  if (problem) return problem;
  return { key, op: m[2] === '!=' ? 'notEquals' : 'equals', value };
}

/** The selector's requirements, or what is wrong with the first that does not parse. */
export function checkSelector(selector: string): Requirement[] | { requirement: string; problem: string } {
  if (selector.trim() === '') return [];
  const out: Requirement[] = [];
  for (const raw of split(selector)) {
    const r = parseRequirement(raw);
    if (typeof r === 'string') return { requirement: raw.trim(), problem: r };
    out.push(r);
  }
  return out;
}

/** How to write a selector, for the messages that refuse one. */
export const SELECTOR_HINT = HINT;

/** Parses `-l`; an empty selector selects everything. */
export function parseSelector(selector: string): Requirement[] {
  const r = checkSelector(selector);
  if (Array.isArray(r)) return r;
  throw new AdvError(
    ErrorCode.UsageError,
    `bad selector -l ${q(selector)}: requirement ${q(r.requirement)}: ${r.problem}`,
    { hint: HINT },
  );
}

export function selectorMatches(
  labels: Readonly<Record<string, string>> | undefined,
  requirements: readonly Requirement[],
): boolean {
  return requirements.every((r) => {
    const has = labels !== undefined && Object.hasOwn(labels, r.key);
    const v = has ? labels[r.key] : undefined;
    switch (r.op) {
      case 'exists':
        return has;
      case 'notExists':
        return !has;
      case 'equals':
        return has && v === r.value;
      case 'notEquals':
        return v !== r.value;
    }
  });
}
