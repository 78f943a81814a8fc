/**
 * Where a multi-host job's processes keep their checkpoint, and which signal stops the workload:
 * what a backend offers (`BackendTraits.checkpointModes`), what a run declares
 * (`spec.checkpoint.mode`, `spec.policy.stopSignal`), and what a launcher passes to `adv exec`
 * (`--ckpt-mode`, `--ckpt-dir`, `--stop-signal`). The solver, validation and the adapters all
 * decide here, so a run is never placed where its launch would have to refuse it.
 */
import type { Backend as BackendObject, RunSpec } from '../spec/schema.js';
import type { BackendTraits } from './types.js';

/**
 * - `per-process`: each process has a dir of its own; every process uploads what it wrote and
 *   process 0 commits the union (DCP and other per-rank formats).
 * - `shared`: one dir that every process of the attempt sees (a cluster file system, a
 *   ReadWriteMany volume, a declared mount): what Orbax's multi-host save needs.
 * - `store`: the workload writes straight to the object store (`ADV_CKPT_URI`).
 */
export const CheckpointMode = { PerProcess: 'per-process', Shared: 'shared', Store: 'store' } as const;
export type CheckpointMode = (typeof CheckpointMode)[keyof typeof CheckpointMode];

/** What `spec.checkpoint.mode` takes: a mode, or `auto` (the first the backend offers). */
export const CHECKPOINT_MODE_CHOICES = ['auto', 'per-process', 'shared', 'store'] as const;
export type CheckpointModeChoice = (typeof CHECKPOINT_MODE_CHOICES)[number];

/** What `spec.policy.stopSignal` takes. */
export const STOP_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGUSR1', 'SIGUSR2'] as const;
export type StopSignal = (typeof STOP_SIGNALS)[number];
export const DEFAULT_STOP_SIGNAL: StopSignal = 'SIGTERM';

/** The modes a backend offers, in the order `auto` takes them; a single-host one: `per-process`. */
export function offeredModes(traits: BackendTraits, spec: BackendObject['spec']): CheckpointMode[] {
  return traits.checkpointModes?.(spec) ?? [CheckpointMode.PerProcess];
}

/** The run's declared mode (`auto` when it declares none). */
export const declaredMode = (spec: RunSpec): CheckpointModeChoice => spec.checkpoint?.mode ?? 'auto';

/** The signal the workload gets to stop, whatever the scheduler sent (`policy.stopSignal`). */
export const stopSignalOf = (spec: RunSpec): StopSignal => spec.policy?.stopSignal ?? DEFAULT_STOP_SIGNAL;

/**
 * The mode a run gets from a backend that offers `offered`: the declared one if offered, else
 * undefined; `auto`: the first offered. A backend that runs every job as one process (`oneProcess`)
 * satisfies `shared`: that process's own dir is every process's dir.
 */
export function modeFor(
  spec: RunSpec,
  offered: readonly CheckpointMode[],
  oneProcess = false,
): CheckpointMode | undefined {
  const want = declaredMode(spec);
  if (want === 'auto') return offered[0];
  if (offered.includes(want)) return want;
  if (oneProcess && want === CheckpointMode.Shared && offered.includes(CheckpointMode.PerProcess))
    return CheckpointMode.PerProcess;
  return undefined;
}

const MODE_WORDS: Record<CheckpointMode, string> = {
  [CheckpointMode.PerProcess]: 'no per-process checkpoint dirs',
  [CheckpointMode.Shared]: 'no shared checkpoint dir',
  [CheckpointMode.Store]: 'no checkpoints written straight to the object store',
};

/**
 * Why a backend cannot take the run's declared mode, or undefined when it can: `offers no shared
 * checkpoint dir (checkpoint.mode: shared): declare volcano.checkpointVolume …`.
 */
export function modeRefusal(
  spec: RunSpec,
  traits: BackendTraits,
  backend: BackendObject['spec'],
  offered = offeredModes(traits, backend),
): string | undefined {
  if (modeFor(spec, offered, !traits.multiNode)) return undefined;
  const want = declaredMode(spec) as CheckpointMode;
  const fix =
    traits.howToOffer?.[want] ??
    `a ${backend.type} backend offers ${offered.join(', ')}; choose one of those, or another backend`;
  return `offers ${MODE_WORDS[want]} (checkpoint.mode: ${want}): ${fix}`;
}

/**
 * The `adv exec` options of one process of a multi-host job, as variables of its environment
 * (the bootstrap turns each into its flag, so no value is pasted into a script): the mode, the
 * shared dir (in `shared` mode), the stop signal.
 */
export function execModeEnv(mode: CheckpointMode, spec: RunSpec, sharedDir?: string): Record<string, string> {
  return {
    ADV_CKPT_MODE: mode,
    ...(mode === CheckpointMode.Shared && sharedDir ? { ADV_SHARED_CKPT_DIR: sharedDir } : {}),
    ADV_STOP_SIGNAL: stopSignalOf(spec),
  };
}

/** `<run>/<attempt>`: an attempt's own dir under a shared mount or volume. */
export const attemptSubdir = (job: { run: string; attempt: number }): string => `${job.run}/${job.attempt}`;

/**
 * The mode an adapter launches a job with: the run's, from what this Backend offers. The solver
 * places no run where this throws; a request rebuilt after the Backend changed may meet it.
 */
export function launchMode(
  spec: RunSpec,
  traits: BackendTraits,
  backend: BackendObject['spec'],
  offered = offeredModes(traits, backend),
): CheckpointMode {
  const mode = modeFor(spec, offered, !traits.multiNode);
  if (!mode)
    throw new Error(`this backend ${modeRefusal(spec, traits, backend, offered) ?? 'cannot take the run'}`);
  return mode;
}
