/**
 * The controller's status as the dashboard and an embedded user read it: the status documents as
 * last loaded or written, their history on the status branch, and the object store of logs and
 * checkpoints. Read-only.
 */
import type { ObjectStore } from '../../../runtime/store/index.js';
import type { GitPort } from '../../git/port.js';
import type { StatusWriter } from '../../status/writer.js';
import {
  SPECS_SOURCE,
  STATUS_DIRS,
  type BackendStatusDoc,
  type DagStatusDoc,
  type RunStatusDoc,
  type SourceStatusDoc,
} from '../../status/types.js';
import type { SweepStatusDoc } from '../../status/types.js';

export class StatusView {
  constructor(
    private readonly status: StatusWriter,
    private readonly git: GitPort,
    private readonly objects: () => ObjectStore | undefined,
  ) {}

  runStatus(name: string): RunStatusDoc | undefined {
    return this.status.get<RunStatusDoc>('Run', name);
  }

  dagStatus(name: string): DagStatusDoc | undefined {
    return this.status.get<DagStatusDoc>('DAG', name);
  }

  backendStatus(name: string): BackendStatusDoc | undefined {
    return this.status.get<BackendStatusDoc>('Backend', name);
  }

  sweepStatus(name: string): SweepStatusDoc | undefined {
    return this.status.get<SweepStatusDoc>('Sweep', name);
  }

  /** What could not be loaded from the specs repo (absent until something failed to load once). */
  sourceStatus(): SourceStatusDoc | undefined {
    return this.status.get<SourceStatusDoc>('Source', SPECS_SOURCE);
  }

  /** Names of the objects of a kind on the status branch. */
  statusNames(kind: 'Run' | 'DAG' | 'Backend'): readonly string[] {
    return this.status.names(kind);
  }

  /** The commits that changed an object's status file, newest first. */
  async statusHistory(
    kind: 'Run' | 'DAG' | 'Backend',
    name: string,
    limit = 50,
  ): Promise<{ oid: string; time: number; message: string }[]> {
    if (!this.status.head) return [];
    const log = await this.git.log(this.status.ref, { path: `${STATUS_DIRS[kind]}/${name}.yaml`, limit });
    return log.map((c) => ({ oid: c.oid, time: c.time, message: c.message }));
  }

  /** The object store of the repo's Storage spec (logs, checkpoints), when one is configured. */
  get objectStore(): ObjectStore | undefined {
    return this.objects();
  }
}
