/**
 * A fork's first checkpoint (`spec.forkFrom`): before an attempt of the run is submitted, while
 * the run has no committed checkpoint of its own, the parent's checkpoint at the pinned step is
 * copied into the run's inside the object store. The attempt then restores it as it would its own
 * (adv exec's restore is the only restore). Once the run has a checkpoint, its own newest wins.
 */
import type { Logger } from 'pino';
import { latestCommitted } from '../../../runtime/checkpoint.js';
import { CheckpointNotFound, copyCheckpoint } from '../../../runtime/checkpoint-copy.js';
import type { ObjectStore } from '../../../runtime/store/types.js';
import { StallingError } from '../../errors.js';
import type { RunSpec } from '../../spec/schema.js';
import { Reason } from '../../status/types.js';

/**
 * Copies the checkpoint `spec.forkFrom` names into `run`'s, unless `run` already has one.
 * Throws a StallingError (ForkSourceMissing) when the source is not committed in the store, or
 * there is no store; any other failure (the store not answering) is an ordinary error, retried.
 */
export async function prepareFork(
  run: string,
  attempt: number,
  spec: RunSpec | undefined,
  objects: ObjectStore | undefined,
  logger: Logger,
): Promise<void> {
  const fork = spec?.forkFrom;
  if (!fork) return;
  const where = `spec.forkFrom of run ${run}`;
  if (fork.run === run)
    throw new StallingError(Reason.ForkSourceMissing, `${where} names the run itself`, 'name another run');
  if (!objects)
    throw new StallingError(
      Reason.ForkSourceMissing,
      `${where} asks for run ${fork.run}'s checkpoint at step ${fork.step}, but the controller has no object store to copy it in`,
      'add a Storage spec (storage.yaml) to the specs repo: the one the parent run used',
    );
  if (await latestCommitted(objects, run)) return;
  try {
    const m = await copyCheckpoint(objects, { from: fork.run, to: run, step: fork.step, attempt });
    logger.info(
      { run, attempt, from: fork.run, step: fork.step, files: m.files.length, bytes: m.totalBytes },
      'fork: checkpoint copied in the store',
    );
  } catch (e) {
    if (!(e instanceof CheckpointNotFound)) throw e;
    throw new StallingError(
      Reason.ForkSourceMissing,
      `${where}: in ${objects.url}, ${e.message}`,
      e.committed.length
        ? `set spec.forkFrom.step to one of them (or fork again: adv fork ${fork.run} --step N), then adv reconcile run ${run}`
        : `check that ${fork.run} ran with this Storage and was not garbage-collected, then adv reconcile run ${run}`,
    );
  }
}
