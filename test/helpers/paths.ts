/** Where the repository is, for helpers that read or start its files by path rather than import them. */
import { join } from 'node:path';

/**
 * The repository's root. Helpers name files under it from here, never by counting `..` from their
 * own folder: a helper that moves keeps its paths (test/helper-paths.test.ts checks them).
 */
export const REPO = join(import.meta.dirname, '..', '..');
