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
import type { Environment, EnvironmentSpec } from './schema.js';

export interface ResolvedEnvironment {
  name: string;
  version: number;
  /** A hash of the spec: changes when the version is edited in place. */
  digest: string;
  spec: EnvironmentSpec;
}

/** `cuda12@2#1a2b3c4d5e6f`: what a Run's desired state holds for its Environment. */
export const resolvedRef = (e: ResolvedEnvironment): string => `${e.name}@${e.version}#${e.digest}`;

/** `cuda12@2` of a reference in any form (`cuda12@2#…` too). */
export const shortRef = (ref: string): string => ref.replace(/#.*$/, '');

export class EnvironmentIndex {
  private readonly byName = new Map<string, Map<number, ResolvedEnvironment>>();

  /** From the valid objects of a load (a duplicate name and version is never valid). */
  constructor(objects: Iterable<LoadedObject> = []) {
    for (const o of objects) {
      if (o.kind !== 'Environment') continue;
      const e = o.object as Environment;
      const digest = createHash('sha256').update(canonicalJson(e.spec)).digest('hex').slice(0, 12);
      let versions = this.byName.get(o.name);
      if (!versions) this.byName.set(o.name, (versions = new Map()));
      versions.set(e.spec.version, { name: o.name, version: e.spec.version, digest, spec: e.spec });
    }
  }

  /** `name` → its newest version, `name@N` (or `name@N#digest`) → version N; undefined when absent. */
  resolve(ref: string): ResolvedEnvironment | undefined {
    const parsed = parseEnvironmentRef(shortRef(ref));
    const versions = parsed && this.byName.get(parsed.name);
    if (!versions) return undefined;
    return versions.get(parsed.version ?? Math.max(...versions.keys()));
  }
}
