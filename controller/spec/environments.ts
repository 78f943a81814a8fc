/**
 * The Environments of a loaded specs repo, by name and version, and how a Run's reference
 * (`cuda12`, `cuda12@2`) resolves. A resolved reference is written `name@version#digest`: the
 * desired state of a Run holds it in place of what the spec says, so a new version (for a Run
 * that names no version) or an edit of the version in use is a change of the Run.
 */
import { canonicalJson } from '../reconcile/run-plan-model.js';
import { createHash } from 'node:crypto';
import { parseEnvironmentRef } from './environment-rules.js';
import type { LoadedObject } from './loader.js';
import type { EnvironmentSpec } from './schema.js';

/** One version of a versioned kind (an Environment, a Dataset), as a reference resolves to it. */
export interface ResolvedVersion<S> {
  name: string;
  version: number;
  /** A hash of the spec: changes when the version is edited in place. */
  digest: string;
  spec: S;
}

export type ResolvedEnvironment = ResolvedVersion<EnvironmentSpec>;

/** `cuda12@2#1a2b3c4d5e6f`: what a Run's desired state holds for its Environment (or a Dataset). */
export const resolvedRef = (e: ResolvedVersion<unknown>): string => `${e.name}@${e.version}#${e.digest}`;

/** `cuda12@2` of a reference in any form (`cuda12@2#…` too). */
export const shortRef = (ref: string): string => ref.replace(/#.*$/, '');

/**
 * The documents of one versioned kind by name and version (a name is shared by its versions, and
 * a name and version are unique: a duplicate is never valid), and how a reference resolves.
 */
export class VersionIndex<S extends { version: number }> {
  private readonly byName = new Map<string, Map<number, ResolvedVersion<S>>>();

  /** From the valid objects of a load: those of `kind`. */
  constructor(kind: 'Environment' | 'Dataset', objects: Iterable<LoadedObject>) {
    for (const o of objects) {
      if (o.kind !== kind) continue;
      const spec = (o.object as { spec: S }).spec;
      const digest = createHash('sha256').update(canonicalJson(spec)).digest('hex').slice(0, 12);
      let versions = this.byName.get(o.name);
      if (!versions) this.byName.set(o.name, (versions = new Map()));
      versions.set(spec.version, { name: o.name, version: spec.version, digest, spec });
    }
  }

  /** How many names. */
  get size(): number {
    return this.byName.size;
  }

  /** `name` → its newest version, `name@N` (or `name@N#digest`) → version N; undefined when absent. */
  resolve(ref: string): ResolvedVersion<S> | undefined {
    const parsed = parseEnvironmentRef(shortRef(ref));
    const versions = parsed && this.byName.get(parsed.name);
    if (!versions) return undefined;
    return versions.get(parsed.version ?? Math.max(...versions.keys()));
  }

  /** Every name with its versions, oldest first. */
  all(): ResolvedVersion<S>[] {
    return [...this.byName.values()].flatMap((v) => [...v.values()].sort((a, b) => a.version - b.version));
  }
}

export class EnvironmentIndex extends VersionIndex<EnvironmentSpec> {
  constructor(objects: Iterable<LoadedObject> = []) {
    super('Environment', objects);
  }
}
