/** One YAML document as the spec loader keeps it: where it is, what it is, and its summaries. */
import type { ModeRef } from './checkpoint-rules.js';
import type { DatasetOutputRef, DatasetRef } from './dataset-rules.js';
import type { Diagnostic } from './diagnostic.js';
import type { EnvironmentRef, TemplateRef } from './environment-rules.js';
import type { BackendRef, ChildRef } from './refs.js';
import type { Kind, SpecObject } from './schema.js';
import type { SweepPointNames } from './sweep-rules.js';

/** One YAML document of a specs repo, valid or not. */
export interface LoadedDocument {
  file: string;
  /** 0-based index of the document in its file. */
  index: number;
  /** Where the document starts. */
  line: number;
  column: number;
  kind?: Kind;
  name?: string;
  /** Where `metadata.name` is written. */
  namePos?: { line: number; column: number };
  /** A schema-valid DAG's child Runs (`<dag>.<node>`), each with where its node's id is written. */
  children?: ChildRef[];
  /** A schema-valid Sweep's point run names (`<sweep>-<hash8>`), and where its parameters are. */
  sweepPoints?: SweepPointNames;
  /** The secrets a schema-valid Backend (its `*Secret` fields) or Provider (`secretRef`) names, located. */
  secretRefs?: BackendRef[];
  /** The checkpoint modes a schema-valid Run or DAG declares, located. */
  modeRefs?: ModeRef[];
  /** An Environment's `spec.version`, when it is a whole number (even if the document is invalid). */
  envVersion?: number;
  /** The templates a schema-valid Environment holds, located. */
  templateRefs?: TemplateRef[];
  /** The Environments a schema-valid Run or DAG names, located. */
  environmentRefs?: EnvironmentRef[];
  /** A Dataset's `spec.version`, when it is a whole number (even if the document is invalid). */
  datasetVersion?: number;
  /** The Datasets a schema-valid Run, DAG or Sweep names in `inputs`, located. */
  datasetRefs?: DatasetRef[];
  /** A schema-valid Dataset's output source, located (empty for other sources). */
  datasetOutputs?: DatasetOutputRef[];
  /** Present when the per-file stages passed. */
  object?: SpecObject;
  backendRefs: BackendRef[];
  /** Problems found by the per-file stages. */
  diagnostics: Diagnostic[];
}
