/**
 * `ssh`: a plain host reached over SSH. Everything happens through the remote-host module
 * (`../remote/`): per job, a dir under the backend's work root holding a generated POSIX `run.sh`
 * and a quoted `env` file; the job runs `nohup setsid sh run.sh` in its own session, under the
 * bundled `adv exec`, which leaves the same `exec.json` / `exit.json` records as on the local
 * backend. Code and the runtime are shipped once per host, content-addressed, sha256-verified.
 */
import type { Backend as BackendObject } from '../../spec/schema.js';
import { hostGpuCapacity } from '../remote/capacity.js';
import { sshHostOf, type RemoteHost } from '../remote/host.js';
import {
  type Backend,
  type BackendContext,
  type Capacity,
  type JobHandle,
  type JobRequest,
  type ObservedJob,
  type SubmitResult,
} from '../types.js';

/** The `ssh` adapter: a `RemoteHost` over the Backend's connection, plus `nvidia-smi` for capacity. */
export class SshBackend implements Backend {
  readonly type = 'ssh' as const;
  readonly host: RemoteHost;

  constructor(
    readonly name: string,
    spec: BackendObject['spec'],
    ctx: BackendContext,
  ) {
    this.host = sshHostOf(spec, ctx);
  }

  /** One SSH command for all: idempotent by name (an existing pid file: launched already, adopted). */
  async submit(jobs: readonly JobRequest[]): Promise<(SubmitResult | Error)[]> {
    const launched = await this.host.launchMany(jobs);
    return launched.map((r, i) =>
      r instanceof Error
        ? r
        : {
            backend: this.name,
            jobName: jobs[i]!.jobName,
            jobId: r.pid,
            ...(r.adopted ? { adopted: true } : {}),
          },
    );
  }

  async find(jobName: string): Promise<JobHandle | undefined> {
    const pid = await this.host.findPid(jobName);
    return pid === undefined ? undefined : { backend: this.name, jobName, jobId: pid };
  }

  /** One remote command for every job of this host. */
  poll(handles: readonly JobHandle[]): Promise<ObservedJob[]> {
    return this.host.observe(handles);
  }

  cancel(h: JobHandle): Promise<void> {
    return this.host.cancel(h.jobName);
  }

  logs(h: JobHandle, opts: { follow?: boolean; since?: number } = {}): AsyncIterable<string> {
    return this.host.logs(h.jobName, opts);
  }

  /** GPUs of the host from `nvidia-smi` (none, with the reason, where it is missing). */
  capacity(): Promise<Capacity> {
    return hostGpuCapacity(this.host.transport);
  }

  async close(): Promise<void> {
    this.host.close();
  }
}
