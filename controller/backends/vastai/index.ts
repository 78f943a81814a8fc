/**
 * `vastai`: rented GPUs through the Vast.ai REST API — search offers that fit the run, rent one per
 * attempt, run it over SSH through the shared remote-host module, destroy it when the attempt
 * ends. See `adapter.ts`.
 */
import { declaredGpuTypes, ONE_HOST_TRAITS, type BackendDescriptor } from '../types.js';
import { vastGpuNames } from './query.js';
import { vastaiSettings } from './settings.js';

export { vastaiSettings };

/** `vastai`: one rented instance per job. */
export const vastaiBackend: BackendDescriptor<'vastai', typeof vastaiSettings> = {
  type: 'vastai',
  settings: vastaiSettings,
  needsConnection: false,
  traits: {
    ...ONE_HOST_TRAITS,
    // `gpuName` (with the names Vast lists for it) limits the rentals; without it, or a declared
    // `capabilities.gpuTypes`, the marketplace rents any type a run names (none fits: NoCapacity).
    gpuTypes: (spec) => {
      const name = spec.vastai?.gpuName;
      const types = [...declaredGpuTypes(spec), ...(name ? [name, ...vastGpuNames(name)] : [])];
      return types.length ? types : undefined;
    },
  },
  // Loaded when a Backend of this type is started, never by validating YAML (test/import-graph.test.ts).
  async create(spec, ctx) {
    const { VastBackend } = await import('./adapter.js');
    return new VastBackend(spec.metadata.name, spec.spec, ctx);
  },
  // The cheapest fitting offer's price, for `adv plan`; loaded as lazily as the adapter.
  async quote(spec, run, src) {
    const { quoteVast } = await import('./quote.js');
    return quoteVast(spec.spec.vastai!, run, src);
  },
};
