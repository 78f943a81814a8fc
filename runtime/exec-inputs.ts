/** What a node reads before it starts (its code, its DAG inputs) and publishes when it is done (its outputs). */
import { existsSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { hasContent, uploadOutput, type InputRefs } from './artifacts.js';
import { unpackTarGz } from './unpack.js';
import type { ObjectStore } from './store/types.js';

export function parseInputs(raw: string | undefined): InputRefs {
  if (!raw) return {};
  try {
    return JSON.parse(raw) as InputRefs;
  } catch {
    throw new Error(`ADV_INPUTS is not JSON: ${raw.slice(0, 80)}`);
  }
}

/** Uploads `$ADV_ARTIFACT_DIR/<name>/` for each declared output; returns what went wrong, if anything. */
export async function publishOutputs(
  store: ObjectStore | undefined,
  run: string,
  attempt: number,
  artifactDir: string,
  outputs: readonly string[],
  log: (line: string) => void,
): Promise<string | undefined> {
  const missing: string[] = [];
  for (const name of outputs) if (!(await hasContent(join(artifactDir, name)))) missing.push(name);
  if (missing.length)
    return `declared output${missing.length > 1 ? 's' : ''} ${missing.join(', ')} not written: put ${missing.length > 1 ? 'them' : 'it'} in ${missing.map((m) => join(artifactDir, m) + '/').join(', ')}`;
  if (!store) {
    log(`outputs ${outputs.join(', ')} stay in ${artifactDir}: no store to publish them to`);
    return undefined;
  }
  for (const name of outputs) {
    try {
      const m = await uploadOutput(store, { run, output: name, attempt, dir: join(artifactDir, name) });
      log(`output ${name}: ${m.files.length} files, ${m.totalBytes} bytes published`);
    } catch (e) {
      return `output ${name} could not be published: ${(e as Error).message}`;
    }
  }
  return undefined;
}

/** Downloads the code payload and extracts it into `<dir>/work`; the directory to run in. */
export async function fetchCode(
  store: ObjectStore | undefined,
  code: { key: string; workdir?: string },
  dir: string,
): Promise<string> {
  if (!store) throw new Error('no object store to fetch it from (pass --store or set ADV_STORE)');
  const archive = join(dir, 'code.tar.gz');
  if (!(await store.getToFile(code.key, archive)))
    throw new Error(`${code.key} is not in ${store.url} (the controller uploads it before it submits)`);
  const work = join(dir, 'work');
  await unpackTarGz(archive, work);
  const cwd = code.workdir ? resolve(work, code.workdir) : work;
  if (relative(work, cwd).startsWith('..') || !existsSync(cwd))
    throw new Error(`no working dir ${code.workdir} in the code`);
  return cwd;
}
