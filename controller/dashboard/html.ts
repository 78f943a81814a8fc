/**
 * HTML built from tagged templates that escape every interpolated value, so a name, message or
 * reason from a spec can never become markup. Only `Html` values (made here) pass through as is.
 */

/** A fragment of markup that is already safe. */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

const ENTITIES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

/** Text for an element's content or a quoted attribute. */
export function esc(value: unknown): string {
  return String(value).replace(/[&<>"']/g, (c) => ENTITIES[c]!);
}

function piece(v: unknown): string {
  if (v instanceof Html) return v.text;
  if (Array.isArray(v)) return v.map(piece).join('');
  if (v === undefined || v === null || v === false) return '';
  return esc(v);
}

/** `html\`<td>${name}</td>\``: values are escaped; arrays are joined; null, undefined and false are empty. */
export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0]!;
  values.forEach((v, i) => (out += piece(v) + strings[i + 1]!));
  return new Html(out);
}

/** Markup known to be safe (built here from constants). */
export const raw = (text: string): Html => new Html(text);

/** A token safe in a class name: `Succeeded` → `Succeeded`, anything odd → `Other`. */
export function phaseClass(phase: string | undefined): string {
  return phase && /^[A-Za-z]{1,32}$/.test(phase) ? phase : 'Other';
}
