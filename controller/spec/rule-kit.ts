/**
 * What the per-document rules share: a path into a document, a diagnostic without its file, and
 * the collector each rule reports into (located by the document's own positions).
 */
import type { Diagnostic } from './diagnostic.js';
import { formatPath } from './diagnostic.js';
import type { Locator } from './parse.js';

/** A path into a document: keys and list indexes. */
export type Path = (string | number)[];
/** A diagnostic of one document (the loader adds the file). */
export type Located = Omit<Diagnostic, 'file'>;

/** Where rules report: each error located at its path. */
export class Collector {
  readonly out: Located[] = [];
  constructor(private readonly loc: Locator) {}
  error(code: string, path: Path, message: string, hint?: string, key = false): void {
    this.out.push({
      severity: 'error',
      code,
      ...this.loc.at(path, { key }),
      path: formatPath(path),
      message,
      ...(hint ? { hint } : {}),
    });
  }
}
