/**
 * `slurm`: a cluster behind a login node, reached over SSH through the same remote-host module as
 * `ssh` (payloads, job dirs, the bootstrap). A job is an `sbatch --parsable` of a generated batch
 * script whose directives come from the run's resources and the backend's defaults; `srun` starts
 * the bootstrap on every node, with the JAX multi-host contract in the environment. One poll is
 * one SSH command running `scontrol -o show job` (accounting off) for every job at once.
 */
import { shellQuote } from '../../internal/shell.js';
import type { Backend as BackendObject, RunSpec } from '../../spec/schema.js';
import { packFiles } from '../remote/pack.js';
import { SOURCE_SECRETS } from '../remote/bootstrap.js';
import { CheckpointMode, execModeEnv, launchMode, stopSignalOf } from '../checkpoint-mode.js';
import { sshHostOf, type RemoteHost } from '../remote/host.js';
import {
  JobState,
  unobservable,
  type Backend,
  type BackendContext,
  type Capacity,
  type JobHandle,
  type JobRequest,
  type ObservedJob,
  type SubmitResult,
} from '../types.js';
import { mapSlurmState, parseScontrol, parseSinfoCapacity, slurmMem, type SlurmJobInfo } from './parse.js';
import { SLURM_TRAITS } from './settings.js';

/**
 * Find-or-sbatch on the login node, for the job dirs that arrive as a tar on stdin: one line per
 * job, `<name> found|ok|error <id or message>`.
 */
const SUBMIT_MANY = `set -u
mkdir -p "$1" && cd "$1" && umask 077 && tar -xf - || exit 1
shift
# Every job SLURM knows (queued, running, or finished within MinJobAge), one name-and-id per
# line; looked up with shell patterns, so N jobs cost N sbatch calls and no other process.
known="
$(scontrol -o show job 2>/dev/null | sed -n 's/^JobId=\\([0-9]*\\) JobName=\\([^ ]*\\).*/\\2 \\1/p')
"
# Known names answer at once (on fd 3); the rest go to sbatch, four at a time. A job that is not
# queued now (known already, or refused) gets no secrets file: only the batch script reads one.
exec 3>&1
for j in "$@"; do
  case "$known" in
    *"
$j "*) rm -f "$j/secrets"; id=\${known##*"
$j "}; printf '%s found %s\\n' "$j" "\${id%%"
"*}" >&3; continue ;;
  esac
  printf '%s\\n' "$j"
done | xargs -r -P 4 -n 1 sh -c 'if out=$(sbatch --parsable "$1/job.sbatch" 2>&1); then printf "%s ok %s\\n" "$1" "$out"; else rm -f "$1/secrets"; printf "%s error %s\\n" "$1" "$(printf %s "$out" | tr "\\n" " ")"; fi' sh`;

/**
 * One `#SBATCH` line. A line break in a value would end the directive and run the rest as the batch
 * script's own shell code: validation refuses such values (`SbatchUnsafeValue`), this never writes one.
 */
function directiveLine(directive: string): string {
  if (/[\n\r\0]/.test(directive))
    throw new Error(
      `refusing to write an #SBATCH line with a line break: ${JSON.stringify(directive.slice(0, 80))}`,
    );
  return `#SBATCH ${directive}`;
}

/**
 * What srun runs on every node (one task per node): the process's own facts, then the bootstrap.
 * It outlives the stop signal (a trap) so the task ends when `adv exec` has. After a stop notice a
 * process other than 0 ends with 0: `--kill-on-bad-exit` would otherwise kill process 0 while it
 * still commits the gang's last checkpoint, and the attempt's outcome is process 0's to say.
 */
const TASK = [
  'export ADV_PROCESS_ID="$SLURM_PROCID" ADV_LOCAL_PROCESS_ID="${SLURM_LOCALID:-0}" ADV_LOCAL_PROCESS_COUNT="${SLURM_NTASKS_PER_NODE:-1}"',
  'ADV_LOCAL_DEVICE_COUNT=$(echo "${CUDA_VISIBLE_DEVICES:-}" | tr , "\\n" | grep -c .); export ADV_LOCAL_DEVICE_COUNT',
  'stopped=; trap "stopped=1" TERM INT USR1 USR2',
  'sh ./run.sh; code=$?',
  'if [ -n "$stopped" ] && [ "$ADV_PROCESS_ID" != 0 ]; then exit 0; fi',
  'exit "$code"',
].join('\n');

/** The `slurm` adapter: job dirs through a `RemoteHost` on the login node, then sbatch/scontrol/sinfo. */
export class SlurmBackend implements Backend {
  readonly type = 'slurm' as const;
  readonly host: RemoteHost;

  constructor(
    readonly name: string,
    private readonly spec: BackendObject['spec'],
    private readonly ctx: BackendContext,
  ) {
    this.host = sshHostOf(spec, ctx);
  }

  /** `#SBATCH` lines for a run, from its resources and the backend's defaults. */
  directives(job: JobRequest, dir: string): string[] {
    const d = this.spec.slurm?.sbatchDefaults ?? {};
    const res: RunSpec['resources'] = job.spec.resources ?? {};
    const nodes = res.nodes ?? 1;
    const out = [
      `--job-name=${job.jobName}`,
      `--output=${dir}/slurm-%j.out`,
      `--nodes=${nodes}`,
      '--ntasks-per-node=1',
      '--no-requeue',
    ];
    if (d.partition) out.push(`--partition=${d.partition}`);
    if (d.account) out.push(`--account=${d.account}`);
    if (d.qos) out.push(`--qos=${d.qos}`);
    if (d.time) out.push(`--time=${d.time}`);
    if (d.exclude) out.push(`--exclude=${d.exclude}`);
    if (d.constraint) out.push(`--constraint=${d.constraint}`);
    const mem = res.memory ? slurmMem(res.memory) : d.mem;
    if (mem) out.push(`--mem=${mem}`);
    const cpus = res.cpus ? Math.ceil(res.cpus) : d.cpusPerTask;
    if (cpus) out.push(`--cpus-per-task=${cpus}`);
    if ((res.gpus ?? 0) > 0) out.push(`--gres=${this.gres(res.gpuType)}:${res.gpus}`);
    out.push(`--signal=B:USR1@${this.spec.slurm?.signalGraceSec ?? 120}`);
    out.push(...(d.extra ?? []));
    return out;
  }

  /** GRES name for the first acceptable GPU type the backend maps; `default`, else `gpu`. */
  gres(gpuType: string | undefined): string {
    const mapping = this.spec.slurm?.gresMapping ?? {};
    for (const t of (gpuType ?? 'any').split('|')) if (t !== 'any' && mapping[t]) return mapping[t];
    return mapping.default ?? 'gpu';
  }

  /**
   * The batch script: directives, the multi-host facts, srun of the bootstrap on every node.
   *
   * The stop notice: SLURM sends USR1 (`--signal=B:USR1@grace`) to this shell only. Passing USR1
   * on through srun would reach every process of the step (srun signals them all, the workload
   * included: a workload without a USR1 handler dies at once). So the shell has SLURM signal the
   * step with the run's stop signal (`scancel --signal`, which leaves this shell out): every
   * `adv exec` takes it as its notice, and the workload gets that same signal. srun is never sent
   * TERM: it turns TERM into a SIGKILL of every task.
   */
  batchScript(job: JobRequest, dir: string): string {
    const port = this.spec.slurm?.coordinatorPort ?? 29500;
    const signal = stopSignalOf(job.spec).replace(/^SIG/, '');
    return [
      '#!/bin/sh',
      ...this.directives(job, dir).map(directiveLine),
      `cd ${shellQuote(dir)}`,
      // The secrets file goes before anything else runs; srun passes the environment on.
      SOURCE_SECRETS,
      'first=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
      // The first node's address as SLURM reaches it (NodeAddr): a node name need not resolve.
      `addr=$(scontrol show node "$first" 2>/dev/null | sed -n 's/.*NodeAddr=\\([^ ]*\\).*/\\1/p' | head -n 1)`,
      `export ADV_COORDINATOR_ADDRESS="\${addr:-$first}:${port}" ADV_NUM_PROCESSES="$SLURM_NTASKS"`,
      `srun --kill-on-bad-exit=1 sh -c ${shellQuote(TASK)} &`,
      'child=$!',
      `trap 'scancel --signal=${signal} "$SLURM_JOB_ID" || echo "adv: cannot pass the stop notice on to the job step" >&2' USR1`,
      "trap ':' TERM",
      'wait $child; code=$?',
      // wait returns early when a trapped signal arrives: wait for the step to finish.
      'while kill -0 $child 2>/dev/null; do wait $child; code=$?; done',
      'exit $code',
      '',
    ].join('\n');
  }

  /**
   * Submits many jobs with ONE SSH command: their job dirs go over as a tar on stdin, then the
   * login node runs one `sbatch` each (a login shell per SSH command costs ~70 ms here, an sbatch
   * ~4 ms). Idempotent by name: a job already queued or running under that name is returned.
   */
  async submit(jobs: readonly JobRequest[]): Promise<(SubmitResult | Error)[]> {
    if (!jobs.length) return [];
    const work = await this.host.workRoot();
    const files: { name: string; body: string; mode?: number }[] = [];
    for (const request of jobs) {
      const job = this.withCheckpointMode(request, this.host.jobDir(work, request.jobName));
      const { dir, env, runSh, secrets } = await this.host.prepare(job);
      files.push(
        { name: `${job.jobName}/env`, body: env },
        { name: `${job.jobName}/run.sh`, body: runSh },
        { name: `${job.jobName}/job.sbatch`, body: this.batchScript(job, dir) },
        ...(secrets ? [{ name: `${job.jobName}/secrets`, body: secrets, mode: 0o600 }] : []),
      );
    }
    const where = this.host.where;
    const r = await this.host.transport.exec(
      ['sh', '-c', SUBMIT_MANY, 'sh', work, ...jobs.map((j) => j.jobName)],
      { input: await packFiles(files) },
    );
    if (r.code !== 0) throw new Error(`submitting to ${where} failed (exit ${r.code}): ${r.stderr.trim()}`);
    const lines = new Map(
      r.stdout
        .toString()
        .split('\n')
        .filter(Boolean)
        .map((l) => {
          const [name, status, ...rest] = l.split(' ');
          return [name!, { status: status!, text: rest.join(' ').trim() }] as const;
        }),
    );
    return jobs.map((job) => {
      const line = lines.get(job.jobName);
      if (!line) return new Error(`no answer from ${where} for ${job.jobName}`);
      if (line.status === 'error') return new Error(`sbatch on ${where} refused the job: ${line.text}`);
      const jobId = line.text.split(';')[0]!;
      this.ctx.logger.info(
        { job: job.jobName, jobId, adopted: line.status === 'found' },
        'submitted to slurm',
      );
      return {
        backend: this.name,
        jobName: job.jobName,
        jobId,
        ...(line.status === 'found' ? { adopted: true } : {}),
      };
    });
  }

  /**
   * The request with its `adv exec` options: every process of the job writes its checkpoint into
   * `<job dir>/ckpt` (`shared`: the job dir is on the file system every node runs the job from),
   * or each into its own job dir's (`per-process`).
   */
  withCheckpointMode(job: JobRequest, dir: string): JobRequest {
    const mode = launchMode(job.spec, SLURM_TRAITS, this.spec);
    const shared = mode === CheckpointMode.Shared ? `${dir}/ckpt` : undefined;
    return { ...job, env: { ...job.env, ...execModeEnv(mode, job.spec, shared) } };
  }

  private async jobs(): Promise<SlurmJobInfo[]> {
    return parseScontrol(await this.host.run(['scontrol', '-o', 'show', 'job']));
  }

  async find(jobName: string): Promise<JobHandle | undefined> {
    const r = await this.host.transport.exec(['squeue', '-h', '-n', jobName, '-o', '%i']);
    const live = r.code === 0 ? r.stdout.toString().trim().split('\n').filter(Boolean) : [];
    if (live.length) return { backend: this.name, jobName, jobId: live[0]! };
    const done = (await this.jobs()).filter((j) => j.jobName === jobName);
    const last = done.at(-1);
    return last ? { backend: this.name, jobName, jobId: last.jobId } : undefined;
  }

  async poll(handles: readonly JobHandle[]): Promise<ObservedJob[]> {
    if (!handles.length) return [];
    let infos: Map<string, SlurmJobInfo>;
    try {
      infos = new Map((await this.jobs()).map((j) => [j.jobId, j]));
    } catch (e) {
      return unobservable(handles, 'Unreachable', (e as Error).message);
    }
    return this.withStopRecords(handles.map((h) => this.observed(h, infos.get(h.jobId))));
  }

  private observed(h: JobHandle, j: SlurmJobInfo | undefined): ObservedJob {
    if (!j)
      return {
        jobName: h.jobName,
        jobId: h.jobId,
        state: JobState.Lost,
        reason: 'JobVanished',
        message: `job ${h.jobId} is no longer known to SLURM`,
      };
    return {
      jobName: h.jobName,
      jobId: h.jobId,
      ...mapSlurmState(j),
      ...(j.startTime ? { startedAt: j.startTime } : {}),
      ...(j.endTime && j.state !== 'RUNNING' && j.state !== 'PENDING' ? { finishedAt: j.endTime } : {}),
    };
  }

  /**
   * SLURM calls a job FAILED when its workload exited 128+signal after a stop notice (USR1 before
   * the time limit, `scancel --signal`): adv exec's exit record in the job dir says it was
   * preempted, which is what the attempt was — it resumes, and it does not count as a failure.
   */
  private async withStopRecords(observed: ObservedJob[]): Promise<ObservedJob[]> {
    const failed = observed.filter((o) => o.state === JobState.Failed);
    if (!failed.length) return observed;
    const records = await this.host
      .observe(failed.map((o) => ({ backend: this.name, jobName: o.jobName, jobId: o.jobId })))
      .catch(() => [] as ObservedJob[]);
    const stopped = new Map(records.filter((r) => r.state === JobState.Preempted).map((r) => [r.jobName, r]));
    return observed.map((o) => {
      const r = o.state === JobState.Failed ? stopped.get(o.jobName) : undefined;
      return r ? { ...o, state: JobState.Preempted, reason: r.reason, message: r.message ?? o.message } : o;
    });
  }

  /** Free GPUs per partition and type, from one `sinfo` (a node in several partitions counts in each). */
  async capacity(): Promise<Capacity> {
    const partitions = parseSinfoCapacity(
      await this.host.run([
        'sinfo',
        '-h',
        '-N',
        '-O',
        'NodeList:|,Partition:|,Gres:|,GresUsed:|,StateCompact:|',
      ]),
    );
    const allowed = new Set((this.spec.slurm?.partitions ?? []).map((p) => p.name));
    const mine = allowed.size ? partitions.filter((p) => allowed.has(p.partition)) : partitions;
    return { freeGpus: Math.max(0, ...mine.map((p) => p.freeGpus)), partitions: mine };
  }

  async cancel(h: JobHandle): Promise<void> {
    await this.host.markCancelRequested(h.jobName);
    await this.host.run(['scancel', h.jobId]);
  }

  logs(h: JobHandle, opts: { follow?: boolean; since?: number } = {}): AsyncIterable<string> {
    return this.host.logs(h.jobName, opts);
  }

  async close(): Promise<void> {
    this.host.close();
  }
}
