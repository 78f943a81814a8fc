/**
 * `gcp-tpu`: Cloud TPU VMs through the user's `gcloud` CLI — a node per attempt, created on demand
 * (spot or preemptible where the Backend says so), the job run on every worker of the slice with
 * the multi-host contract, the node deleted when the attempt ends. See `adapter.ts`.
 */
import type { AdapterDescriptor } from '../types.js';
import { TPU_TRAITS } from './names.js';
import { gcpTpuSettings } from './settings.js';

export { gcpTpuSettings };

/** `gcp-tpu`: the one type with TPU chips; a slice spans hosts; spot VMs are preemptible capacity. */
export const gcpTpuBackend: AdapterDescriptor<'gcp-tpu', typeof gcpTpuSettings> = {
  type: 'gcp-tpu',
  settings: gcpTpuSettings,
  needsConnection: false,
  traits: TPU_TRAITS,
  // Loaded when a Backend of this type is started, never by validating YAML (test/import-graph.test.ts).
  async create(spec, ctx) {
    const { TpuBackend } = await import('./adapter.js');
    return new TpuBackend(spec.metadata.name, spec.spec, ctx);
  },
};
