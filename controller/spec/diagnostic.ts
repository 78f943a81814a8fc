/** A problem found in a spec file, located to the byte a person should look at. */
export interface Diagnostic {
  severity: 'error' | 'warning';
  /** Stable code, e.g. `YamlSyntax`, `SchemaType`, `UnknownField`, `DuplicateName`, `DagCycle`. */
  code: string;
  /** File path as the source names it (relative to the repo root). */
  file: string;
  /** 1-based line and column. */
  line: number;
  column: number;
  /** Dotted path inside the document (`spec.resources.gpus`), empty for the whole file. */
  path: string;
  message: string;
  /** How to fix it. */
  hint?: string;
}

/** `file:line:col: error[Code] path: message` and an indented `fix:` line. */
export function formatDiagnostic(d: Diagnostic): string {
  const where = `${d.file}:${d.line}:${d.column}`;
  const path = d.path ? `${d.path}: ` : '';
  const head = `${where}: ${d.severity}[${d.code}] ${path}${d.message}`;
  return d.hint ? `${head}\n    fix: ${d.hint}` : head;
}

export const byLocation = (a: Diagnostic, b: Diagnostic): number =>
  a.file < b.file ? -1 : a.file > b.file ? 1 : a.line - b.line || a.column - b.column;

/** Renders `["spec", "nodes", 2, "id"]` as `spec.nodes[2].id`. */
export function formatPath(segments: readonly (string | number)[]): string {
  let out = '';
  for (const s of segments) {
    if (typeof s === 'number') out += `[${s}]`;
    else if (/^[A-Za-z_$][\w$-]*$/.test(s)) out += out ? `.${s}` : s;
    else out += `[${JSON.stringify(s)}]`;
  }
  return out;
}
