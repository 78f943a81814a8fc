/**
 * `adv exec`'s hold on the workload's process group: stop signals forwarded to it (SIGKILL after
 * the grace period), and the end of the workload — after which nothing of its group is left, and
 * nothing it started keeps adv exec waiting.
 */
import type { ChildProcess } from 'node:child_process';

/** The signals adv exec forwards to the workload's group. */
export const FORWARDED = ['SIGTERM', 'SIGINT', 'SIGUSR1', 'SIGUSR2', 'SIGHUP'] as const;

/**
 * Stop notices: SIGTERM (most schedulers, a cancel), SIGUSR1 (SLURM's `--signal=B:USR1@grace`),
 * SIGINT. Whichever comes, the workload gets the one stop signal (`--stop-signal`), then the grace
 * period: a workload that checkpoints on SIGTERM does so on every backend.
 */
export const STOP_NOTICES: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGINT', 'SIGUSR1'];

/** What the workload may be given as its stop signal (`--stop-signal`, `policy.stopSignal`). */
export const STOP_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGUSR1', 'SIGUSR2'] as const;
export type StopSignal = (typeof STOP_SIGNALS)[number];

/**
 * How long the workload's output may still flow once it has exited and its group is gone: only a
 * process that left the group (`setsid`) can hold the pipes open after that. Then adv exec stops
 * reading, so such a process never keeps a finished worker alive.
 */
export const OUTPUT_DRAIN_MS = 5_000;

/**
 * Forwards stop signals to the workload's process group, from before the workload is spawned until
 * adv exec is done with its final writes. Listening from the start matters: without a listener,
 * a SIGTERM that comes while the worker starts up (its first heartbeat can take seconds) gets
 * Node's default handling — adv exec ends, and the workload, in its own group, runs on with
 * nobody to stop it (an ssh cancel signals adv exec's group, not the workload's).
 */
export class StopForwarder {
  /** What stopped the workload from outside, if anything did: a signal, or the agent lease. */
  stopSignal: string | undefined;
  /** Whether the workload was killed after the grace period. */
  killedByUs = false;
  private group: number | undefined;
  /** Set once the workload has exited and its group was killed: its pid may belong to another process by now. */
  private groupGone = false;
  private killTimer: NodeJS.Timeout | undefined;
  private readonly handlers: (readonly [NodeJS.Signals, () => void])[];
  private readonly abort = new AbortController();

  constructor(
    private readonly graceMs: number,
    private readonly log: (line: string) => void,
    /** What the workload gets for any stop notice. */
    readonly stopAs: StopSignal = 'SIGTERM',
  ) {
    this.handlers = FORWARDED.map((sig) => {
      const h = () => this.onSignal(sig);
      process.on(sig, h);
      return [sig, h] as const;
    });
  }

  /**
   * The workload's group: its pid (spawned `detached`). Attach in the tick of the spawn: a listener
   * runs on a later one, so no signal falls between.
   */
  attach(pid: number | undefined): void {
    this.group = pid;
  }

  /** Aborted at the first stop notice: what adv exec does before the workload starts gives up. */
  get stopped(): AbortSignal {
    return this.abort.signal;
  }

  /** Stops the workload for `why` with its stop signal; the caller decides when to `kill`. */
  stop(why: string): void {
    this.stopSignal ??= why;
    this.abort.abort(new Error(`stopped by ${why}`));
    this.signal(this.stopAs);
  }

  /** Kills the workload's group now. */
  kill(): void {
    this.killedByUs = true;
    this.signal('SIGKILL');
  }

  /** The workload has exited: whatever it left running in its group goes with it. */
  exited(): void {
    if (this.killTimer) clearTimeout(this.killTimer);
    this.signal('SIGKILL');
    this.groupGone = true;
  }

  /** Stops listening; kills the group if the workload has not exited (adv exec failed on the way). */
  dispose(): void {
    if (!this.groupGone) this.exited();
    for (const [sig, h] of this.handlers) process.off(sig, h);
  }

  signal(sig: NodeJS.Signals): void {
    if (!this.group || this.groupGone) return;
    try {
      process.kill(-this.group, sig);
    } catch {
      // already gone
    }
  }

  private onSignal(sig: NodeJS.Signals): void {
    this.stopSignal ??= sig;
    if (!STOP_NOTICES.includes(sig)) {
      this.log(`received ${sig}; forwarding it to the workload`);
      return this.signal(sig);
    }
    this.abort.abort(new Error(`stopped by ${sig}`));
    if (!this.group || this.groupGone)
      return this.log(`received ${sig}: a stop notice, while no workload runs`);
    this.log(
      `received ${sig}; ${sig === this.stopAs ? 'forwarding it' : `sending ${this.stopAs}`} to the workload, SIGKILL in ${this.graceMs / 1000}s`,
    );
    this.signal(this.stopAs);
    this.armKill();
  }

  private armKill(): void {
    if (this.killTimer || this.groupGone) return;
    this.killTimer = setTimeout(() => this.kill(), this.graceMs);
    this.killTimer.unref();
  }
}

/** How the workload ended. */
export interface WorkloadEnd {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** It could not be started. */
  error?: Error;
}

/**
 * Resolves once the workload has exited (then `onExit`, which kills what it left in its group) and
 * its output has been read — or OUTPUT_DRAIN_MS after its exit, when something that left its group
 * still holds the pipes. Listen before awaiting anything: a quick workload may be gone by then.
 */
export function workloadEnd(child: ChildProcess, onExit: () => void): Promise<WorkloadEnd> {
  return new Promise((resolve) => {
    child.on('error', (error) => resolve({ code: null, signal: null, error }));
    child.on('exit', (code, signal) => {
      onExit();
      const timer = setTimeout(() => {
        child.stdout?.destroy();
        child.stderr?.destroy();
        resolve({ code, signal });
      }, OUTPUT_DRAIN_MS);
      child.once('close', () => {
        clearTimeout(timer);
        resolve({ code, signal });
      });
    });
  });
}
