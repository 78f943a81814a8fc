export * from './schema.js';
export type { Diagnostic } from './diagnostic.js';
export { formatDiagnostic, formatPath } from './diagnostic.js';
export { DEFAULT_LIMITS, type ParseLimits } from './parse.js';
export {
  SpecLoader,
  loadSpecs,
  type LoadResult,
  type LoadedObject,
  type InvalidDocument,
  type LoadedDocument,
} from './loader.js';
export { DirectorySource, type SpecSource, type SpecFileRef, isSpecFile } from './source.js';
export { WorkTreeSource } from './worktree-source.js';
export { findCycle } from './dag-rules.js';
export { devicesOf } from './parallelism-rules.js';
