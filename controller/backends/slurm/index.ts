/**
 * `slurm`: a cluster behind a login node, reached over SSH; a job is an `sbatch` of a generated
 * batch script, `srun` starts it on every node. See `adapter.ts`.
 */
import type { AdapterDescriptor } from '../types.js';
import { SLURM_TRAITS, slurmRules, slurmSettings } from './settings.js';

export { slurmSettings };
// The state mapping is pure (parse.ts loads no transport); the planner's tests read it here.
export { mapSlurmState } from './parse.js';

/** `slurm`: a login node's batch scheduler (`SLURM_TRAITS`). */
export const slurmBackend: AdapterDescriptor<'slurm', typeof slurmSettings> = {
  type: 'slurm',
  settings: slurmSettings,
  needsConnection: true,
  rules: slurmRules,
  traits: SLURM_TRAITS,
  // Loaded when a Backend of this type is started, never by validating YAML (test/import-graph.test.ts).
  async create(spec, ctx) {
    const { SlurmBackend } = await import('./adapter.js');
    return new SlurmBackend(spec.metadata.name, spec.spec, ctx);
  },
};
