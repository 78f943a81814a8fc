/**
 * Gang commit: the checkpoint of a multi-host attempt is the union of what its N processes wrote.
 * Each process puts its files in the step's prefix, then its part record
 * (`runs/<run>/ckpt/<step>/_parts/<attempt>/<k>.json`: its files with size and sha256). Process 0
 * writes the step's manifest only when all N parts of THIS attempt are there and agree: a path two
 * processes wrote with different contents aborts the step. So the invariant holds for gangs too: a
 * checkpoint exists iff its manifest exists and verifies.
 */
import { createHash } from 'node:crypto';
import { pipeline } from 'node:stream/promises';
import { Writable } from 'node:stream';
import { MANIFEST, malformedFile, PARTS_DIR, stepPrefix, type ManifestFile } from './checkpoint.js';
import { hashing } from './store/file.js';
import type { ObjectStore } from './store/types.js';

/** What process k of N says it wrote for a step, in one attempt. */
export interface CheckpointPart {
  kind: 'CheckpointPart';
  run: string;
  step: number;
  attempt: number;
  process: number;
  processes: number;
  files: ManifestFile[];
  createdAt: string;
}

export const partsPrefix = (run: string, step: number, attempt: number): string =>
  `${stepPrefix(run, step)}${PARTS_DIR}/${attempt}/`;
export const partKey = (run: string, step: number, attempt: number, k: number): string =>
  `${partsPrefix(run, step, attempt)}${k}.json`;

/**
 * Which process of N uploads (or hashes) `path` of a step dir all of them see: sha256(path) mod N,
 * so N processes share the work about evenly, and every process computes the same split.
 */
export function shareOf(path: string, n: number): number {
  return createHash('sha256').update(path).digest().readUInt32BE(0) % n;
}

/** Writes process k's part record (after its files: the record says they are all there). */
export async function writePart(
  store: ObjectStore,
  o: Omit<CheckpointPart, 'kind' | 'createdAt'>,
): Promise<void> {
  const part: CheckpointPart = { kind: 'CheckpointPart', ...o, createdAt: new Date().toISOString() };
  await store.put(partKey(o.run, o.step, o.attempt, o.process), JSON.stringify(part, null, 2) + '\n');
}

/**
 * The part records of (step, attempt), indexed by process: undefined where a process has written
 * none yet. A record that is unreadable or does not describe what its key says counts as missing.
 */
export async function readParts(
  store: ObjectStore,
  o: { run: string; step: number; attempt: number; processes: number },
): Promise<(CheckpointPart | undefined)[]> {
  const out: (CheckpointPart | undefined)[] = new Array<CheckpointPart | undefined>(o.processes).fill(
    undefined,
  );
  const prefix = partsPrefix(o.run, o.step, o.attempt);
  for await (const obj of store.list(prefix)) {
    const k = /^(\d{1,6})\.json$/.exec(obj.key.slice(prefix.length));
    if (!k || Number(k[1]) >= o.processes) continue;
    const raw = await store.get(obj.key);
    const p = raw ? parsePart(raw) : undefined;
    if (p && p.run === o.run && p.step === o.step && p.attempt === o.attempt && p.process === Number(k[1]))
      out[p.process] = p;
  }
  return out;
}

function parsePart(raw: Uint8Array): CheckpointPart | undefined {
  try {
    const p = JSON.parse(new TextDecoder().decode(raw)) as CheckpointPart;
    if (p?.kind !== 'CheckpointPart' || !Array.isArray(p.files) || p.files.some(malformedFile))
      return undefined;
    return p;
  } catch {
    return undefined;
  }
}

/**
 * The union of all parts, deduplicated; or why the step must be aborted: a path two processes
 * wrote with different contents (the layout is not disjoint, e.g. Orbax in per-process dirs).
 */
export function unionOfParts(
  parts: readonly CheckpointPart[],
): { files: ManifestFile[] } | { conflict: string } {
  const byPath = new Map<string, { f: ManifestFile; k: number }>();
  for (const p of parts)
    for (const f of p.files) {
      const seen = byPath.get(f.path);
      if (!seen) byPath.set(f.path, { f, k: p.process });
      else if (seen.f.sha256 !== f.sha256 || seen.f.size !== f.size)
        return {
          conflict: `path ${f.path} written by processes ${seen.k} and ${p.process} with different contents`,
        };
    }
  return { files: [...byPath.values()].map((v) => v.f) };
}

/** Whether a key under a step's prefix is one of ours (manifest, part records), not the workload's. */
export const isBookkeeping = (pathInStep: string): boolean =>
  pathInStep === MANIFEST || pathInStep.startsWith(`${PARTS_DIR}/`);

/**
 * Hashes the files of a step the workload wrote straight into the store (store mode), reading
 * them from the store; `only` picks this process's share.
 */
export async function hashStoredStep(
  store: ObjectStore,
  run: string,
  step: number,
  only: (path: string) => boolean,
): Promise<ManifestFile[]> {
  const prefix = stepPrefix(run, step);
  const out: ManifestFile[] = [];
  for await (const obj of store.list(prefix)) {
    const path = obj.key.slice(prefix.length);
    if (isBookkeeping(path) || !only(path)) continue;
    const stream = await store.getStream(obj.key);
    if (!stream) throw new Error(`${path} vanished from ${store.url}${prefix} while it was hashed`);
    const h = hashing();
    await pipeline(stream, h, new Writable({ write: (_c, _e, cb) => cb() }));
    const r = h.result();
    out.push({ path, size: r.size, sha256: r.sha256 });
  }
  return out;
}

/** Files the union names that the store lacks, or holds at another size: the step cannot commit. */
export async function missingInStore(
  store: ObjectStore,
  run: string,
  step: number,
  files: readonly ManifestFile[],
): Promise<string | undefined> {
  const prefix = stepPrefix(run, step);
  const sizes = new Map<string, number>();
  for await (const o of store.list(prefix)) sizes.set(o.key.slice(prefix.length), o.size);
  for (const f of files) {
    const have = sizes.get(f.path);
    if (have === undefined) return `${f.path} is missing from the store`;
    if (have !== f.size) return `${f.path} is ${have} bytes in the store, its part says ${f.size}`;
  }
  return undefined;
}
